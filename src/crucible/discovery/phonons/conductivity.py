"""Force constants and the Wigner thermal conductivity of one material, from its force files.

The conductivity is phono3py's Wigner transport equation (Simoncelli, Marzari, Mauri 2019; phono3py
names it ``SMM19``) in the relaxation-time approximation with isotope scattering, at 300 K on the
material's q-mesh. SRME compares conductivities mode by mode, so each mode's share of the
coherence term κ_C(s, s') is split between the two modes in proportion to their heat capacities:
κ_s' = κ_P,s' + Σ_s 2 C_s / (C_s + C_s') κ_C(s, s'), as the benchmark defines it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from crucible.discovery.phonons.protocol import PROTOCOL


def has_imaginary_modes(frequencies: np.ndarray, threshold: float = PROTOCOL["imaginary_threshold"]) -> bool:
    """The benchmark's test on the frequencies (THz) of the q-mesh, Γ first: a negative optical
    frequency at Γ, an acoustic one below ``threshold`` there, or any negative one elsewhere;
    frequencies that are all NaN count as imaginary."""
    f = np.asarray(frequencies, dtype=float)
    if f.size == 0 or np.isnan(f).all():
        return True
    return bool((f[0, 3:] < 0).any() or (f[0, :3] < threshold).any() or (f[1:] < 0).any())


def harmonic(ph3, fc2_forces: np.ndarray) -> np.ndarray:
    """Produce fc2 from its force set; the harmonic frequencies (THz) on the mesh's grid, Γ first."""
    ph3.phonon_forces = np.asarray(fc2_forces, dtype=float)
    ph3.produce_fc2(symmetrize_fc2=True)
    ph3.init_phph_interaction(symmetrize_fc3q=False)
    ph3.run_phonon_solver()
    frequencies, _, _ = ph3.get_phonon_data()
    return np.asarray(frequencies, dtype=float)


def mode_kappa_total(mode_kappa_matrix: np.ndarray, heat_capacity: np.ndarray) -> np.ndarray:
    """Per-mode total conductivity (T, q, s, 6) from phono3py's mode-kappa matrix (T, q, s, s', 6):
    its diagonal is the particle term, its off-diagonal the coherence term, of which mode s' takes
    the share 2 C_s / (C_s + C_s') of element (s, s'). ``heat_capacity`` is (T, q, s); a pair of
    modes without heat capacity (acoustic at Γ) contributes nothing."""
    c = np.asarray(heat_capacity, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = 2 * c[:, :, :, None] / (c[:, :, :, None] + c[:, :, None, :])
    share[~np.isfinite(share)] = 0.0
    return np.einsum("tqab,tqabv->tqbv", share, np.asarray(mode_kappa_matrix, dtype=float))


def voigt_average(kappa: np.ndarray) -> np.ndarray:
    """The direction average (xx + yy + zz) / 3 of Voigt tensors (..., 6)."""
    return np.asarray(kappa, dtype=float)[..., :3].mean(axis=-1)


def wigner(ph3, fc3_forces: np.ndarray, temperature: float = PROTOCOL["temperature"]) -> dict[str, Any]:
    """fc3 from its force set, then the Wigner RTA conductivity; the arrays SRME and the
    leaderboard's prediction file need (fc2 must be produced first: :func:`harmonic`)."""
    ph3.forces = np.asarray(fc3_forces, dtype=float)
    ph3.produce_fc3(symmetrize_fc3r=True)
    ph3.init_phph_interaction(symmetrize_fc3q=False)
    ph3.run_thermal_conductivity(temperatures=[temperature], is_isotope=True, transport_type="SMM19", boundary_mfp=1e6)
    tc = ph3.thermal_conductivity
    sigma = 0  # one smearing setting: the tetrahedron method
    try:
        matrix = np.asarray(tc.mode_kappa_matrix[sigma], dtype=float)
        kappa_p, kappa_c, kappa_tot = (
            np.asarray(x[sigma], dtype=float) for x in (tc.kappa_intra, tc.kappa_inter, tc.kappa)
        )
    except (AttributeError, TypeError) as exc:
        raise RuntimeError(f"phono3py gave no Wigner (SMM19) conductivity terms: {exc}") from None
    mode_tot = mode_kappa_total(matrix, tc.mode_heat_capacities)
    weights = np.asarray(tc.grid_weights, dtype=float)
    return {
        "temperatures": [float(temperature)],
        "kappa_TOT_RTA": kappa_tot,
        "kappa_P_RTA": kappa_p,
        "kappa_C": kappa_c,
        "mode_kappa_TOT": mode_tot,
        "mode_kappa_TOT_ave": voigt_average(mode_tot),
        "kappa_TOT_ave": voigt_average(kappa_tot),
        "weights": weights,
        "qpoints": np.asarray(tc.qpoints, dtype=float),
        "frequencies": np.asarray(tc.frequencies, dtype=float),
        "heat_capacity": np.asarray(tc.mode_heat_capacities, dtype=float),
        # the check the benchmark makes: mode conductivities add up to the total
        "mode_sum_residual": float(np.abs(mode_tot.sum(axis=(1, 2)) / weights.sum() - kappa_tot).max()),
        "matrix_asymmetry": float(np.abs(matrix - matrix.swapaxes(2, 3)).max()),
    }
