"""The third-order Birch–Murnaghan equation of state, its least-squares fit to energies per atom,
and the Delta gauge between two fits (Lejaeghere et al., Science 351, aad3000 (2016)): the
arithmetic of the EOS benchmark (:mod:`crucible.mlip.eos`), free of files and potentials.

Units: volumes in Å³/atom, energies in eV/atom, B0 in GPa (1 GPa = 0.00624151 eV/Å³, CatBench's
constant), Delta in meV/atom.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np

GPA_TO_EV_A3 = 0.00624151  # CatBench's rounding of 1/160.2177; its reference values depend on it


B0_START_CLAMP_GPA = (50.0, 500.0)


B0_START_FALLBACK_GPA = 150.0


B0P_START = 4.0


MAXFEV = 5000


def birch_murnaghan_energy(volume, e0: float, v0: float, b0_gpa: float, b0_prime: float):
    """E(V) = E0 + (9 V0 B0 / 16)·[(η−1)³ B0′ + (η−1)²(6 − 4η)], η = (V0/V)^(2/3); B0 in GPa."""
    v = np.asarray(volume, dtype=float)
    eta = (v0 / v) ** (2.0 / 3.0)
    b0 = b0_gpa * GPA_TO_EV_A3
    return e0 + (9.0 * v0 * b0 / 16.0) * ((eta - 1.0) ** 3 * b0_prime + (eta - 1.0) ** 2 * (6.0 - 4.0 * eta))


@dataclass(frozen=True)
class BMFit:
    e0: float
    v0: float
    b0: float  # GPa
    b0_prime: float
    rmse_mev: float  # RMS of fit minus data, meV per the energy unit given (per atom here)
    max_abs_residual_mev: float
    v0_in_range: bool  # fitted minimum inside the sampled volumes (otherwise an extrapolation)


class FitError(RuntimeError):
    """The Birch–Murnaghan fit did not converge or gave non-physical parameters."""


def _start_values(v: np.ndarray, e: np.ndarray) -> list[float]:
    """CatBench start: E0, V0 at the lowest point, B0 = V0·E″ by finite differences
    (clamped to 50–500 GPa, 150 GPa if not usable), B0′ = 4."""
    i = int(np.argmin(e))
    e0, v0 = float(e[i]), float(v[i])
    j = min(max(i, 1), len(v) - 2)  # centre of a three-point stencil inside the data
    b0 = B0_START_FALLBACK_GPA
    if len(v) >= 3:
        h1, h2 = v[j] - v[j - 1], v[j + 1] - v[j]
        # second derivative on a possibly uneven grid
        curvature = 2.0 * (h1 * e[j + 1] - (h1 + h2) * e[j] + h2 * e[j - 1]) / (h1 * h2 * (h1 + h2))
        guess = v0 * curvature / GPA_TO_EV_A3
        if math.isfinite(guess) and guess > 0:
            b0 = float(np.clip(guess, *B0_START_CLAMP_GPA))
    return [e0, v0, b0, B0P_START]


def fit_birch_murnaghan(volumes: Sequence[float], energies: Sequence[float]) -> BMFit:
    """Least-squares Birch–Murnaghan fit (scipy ``curve_fit``, maxfev 5000).

    Raises :class:`FitError` with the reason when there are fewer than 4 finite points, the
    optimiser does not converge, the result is not physical (B0 ≤ 0, V0 ≤ 0, non-finite), or
    the fitted V0 lies further outside the sampled volumes than their own spread (a deliberate
    difference from CatBench, which keeps such fits). A V0 just outside is kept and flagged.
    """
    from scipy.optimize import OptimizeWarning, curve_fit

    v = np.asarray(volumes, dtype=float)
    e = np.asarray(energies, dtype=float)
    if v.shape != e.shape or v.ndim != 1:
        raise ValueError(f"volumes {v.shape} and energies {e.shape} must be 1-D arrays of the same length")
    ok = np.isfinite(v) & np.isfinite(e)
    if ok.sum() < 4:
        raise FitError(f"only {int(ok.sum())} finite points; a Birch–Murnaghan fit needs at least 4")
    v, e = v[ok], e[ok]
    order = np.argsort(v)
    v, e = v[order], e[order]
    p0 = _start_values(v, e)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", OptimizeWarning)
            warnings.simplefilter("ignore", RuntimeWarning)  # overflow while exploring
            params, _ = curve_fit(birch_murnaghan_energy, v, e, p0=p0, maxfev=MAXFEV)
    except (RuntimeError, OptimizeWarning, ValueError, FloatingPointError) as exc:
        raise FitError(f"Birch–Murnaghan fit did not converge: {exc}") from exc
    e0, v0, b0, b0p = (float(x) for x in params)
    if not all(math.isfinite(x) for x in (e0, v0, b0, b0p)):
        raise FitError("Birch–Murnaghan fit gave non-finite parameters")
    if v0 <= 0 or b0 <= 0:
        raise FitError(f"Birch–Murnaghan fit gave non-physical parameters (V0={v0:.4g} Å³, B0={b0:.4g} GPa)")
    width = v.max() - v.min()
    if not v.min() - width <= v0 <= v.max() + width:
        # CatBench would keep this; a minimum this far outside the data is an extrapolation of
        # a curve that has no minimum where it was sampled (e.g. a straight line fits this way).
        raise FitError(
            f"Birch–Murnaghan minimum far outside the sampled volumes (V0={v0:.4g} Å³, sampled {v.min():.4g}–{v.max():.4g})"
        )
    resid = birch_murnaghan_energy(v, *params) - e
    return BMFit(
        e0=e0,
        v0=v0,
        b0=b0,
        b0_prime=b0p,
        rmse_mev=float(np.sqrt(np.mean(resid**2)) * 1000.0),
        max_abs_residual_mev=float(np.max(np.abs(resid)) * 1000.0),
        v0_in_range=bool(v.min() <= v0 <= v.max()),
    )


def _bm_coefficients(v0: float, b0_gpa: float, b0_prime: float) -> np.ndarray:
    """Coefficients c_k of E(V) − E0 = Σ c_k x^k, x = V^(−2/3), k = 0..3.

    Expanding the bracket in η = V0^(2/3) x gives (B′−4)η³ + (14−3B′)η² + (3B′−16)η + (6−B′).
    """
    k = 9.0 * v0 * b0_gpa * GPA_TO_EV_A3 / 16.0
    eta_coef = np.array([6.0 - b0_prime, 3.0 * b0_prime - 16.0, 14.0 - 3.0 * b0_prime, b0_prime - 4.0])
    return k * eta_coef * v0 ** (2.0 * np.arange(4) / 3.0)


def delta_gauge(
    v0_a: float,
    b0_a: float,
    b0p_a: float,
    v0_b: float,
    b0_b: float,
    b0p_b: float,
    window: tuple[float, float] = (0.94, 1.06),
) -> float:
    """Delta (meV/atom) between two Birch–Murnaghan curves, each taken relative to its own
    minimum: sqrt(∫ (E_a − E_b)² dV / (V_f − V_i)) over [0.94, 1.06] × the mean of the two V0.

    Arguments are per atom: V0 in Å³, B0 in GPa. The integral is done exactly: the difference is
    a cubic in x = V^(−2/3), so its square integrates term by term as powers of V.
    """
    vals = (v0_a, b0_a, b0p_a, v0_b, b0_b, b0p_b)
    if not all(math.isfinite(float(x)) for x in vals):
        return math.nan
    vmean = 0.5 * (v0_a + v0_b)
    vi, vf = window[0] * vmean, window[1] * vmean
    d = _bm_coefficients(v0_a, b0_a, b0p_a) - _bm_coefficients(v0_b, b0_b, b0p_b)
    total = 0.0
    for i in range(4):
        for j in range(4):
            p = 1.0 - 2.0 * (i + j) / 3.0  # ∫ V^(−2(i+j)/3) dV = V^p / p, p never 0
            total += d[i] * d[j] * (vf**p - vi**p) / p
    return 1000.0 * math.sqrt(max(total, 0.0) / (vf - vi))
