"""The diatomics metrics of the Matbench Discovery leaderboard (:data:`METRICS`), by our own code with its
definitions (``matbench_discovery/metrics/diatomics/`` at the pinned commit).

Per element (the curve's symbol), skipping the elements outside the Materials Project:

* the window: separations from 0.9 covalent radii to 3.1 van der Waals radii (at most the curve's
  largest); a curve with fewer than 5 points there, or a non-finite value there, is not scored;
* on the predicted curve alone, in the window: ``tortuosity`` (energy total variation over
  |E(r_min) - E_min| + |E(r_max) - E_min|), ``energy_diff_flips`` (sign changes of the energy
  differences, differences under 1 meV counted as none), ``energy_jump`` (|ΔE| either side of
  each such flip), ``force_flips`` (sign changes of the first atom's x force, forces under
  10 meV/Å counted as zero), ``force_total_variation``, ``force_jump`` (|ΔF| either side of each
  sign change of the force differences);
* against PBE, where the reference curve is not low quality (its own energy jump >= 1.5 eV and
  >= 3 flips in its window, or a non-finite energy there): in the window,
  ``pbe_energy_mae`` (both curves on 200 shared points, each shifted to 0 at the largest
  separation), ``pbe_force_mae`` (the same grid, all six components), and, where the reference
  well is at least 0.05 eV deep, ``pbe_bond_length_error`` and ``pbe_vib_freq_error`` (a quadratic
  through the 5 points around each minimum), ``pbe_well_depth_error`` (E(r_max) - E_min); from
  0.8 covalent radii, ``pbe_wall_dist_mae`` (the separation where each curve's repulsive branch,
  made monotonic, crosses 1, 5, 10, 20, 50 and 100 eV above its minimum; a crossing the
  prediction misses costs the reference separation).

A model's row is each metric's mean over the elements where it is finite.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from crucible.discovery.curves import NON_MP_ELEMENTS, WALL_R_MIN_FACTOR, eval_window

METRICS = (
    "pbe_energy_mae",
    "pbe_force_mae",
    "pbe_wall_dist_mae",
    "pbe_bond_length_error",
    "pbe_well_depth_error",
    "pbe_vib_freq_error",
    "tortuosity",
    "energy_diff_flips",
    "energy_jump",
    "force_flips",
    "force_total_variation",
    "force_jump",
)
INTERPOLATION_POINTS = 200
MIN_WINDOW_POINTS = 5
ENERGY_DIFF_THRESHOLD = 1e-3  # eV
FORCE_THRESHOLD = 1e-2  # eV/Å
MIN_WELL_DEPTH = 0.05  # eV
WALL_THRESHOLDS = (1.0, 5.0, 10.0, 20.0, 50.0, 100.0)  # eV above the minimum
LOW_QUALITY_JUMP = 1.5  # eV
LOW_QUALITY_FLIPS = 3
AMU_KG = 1.66053906660e-27
EV_PER_A2_IN_N_PER_M = 16.02176634
C_CM_PER_S = 2.99792458e10

Curve = Mapping[str, np.ndarray]  # {"distances", "energies", "forces"}


def _sorted(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"a curve needs at least two points with one value each ({len(x)} and {len(y)})")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("a curve with a non-finite value")
    if len(np.unique(x)) != len(x):
        raise ValueError("a curve with a repeated separation")
    order = np.argsort(x, kind="stable")
    return x[order], y[order]


def _nonzero_steps(values: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """The consecutive differences of ``values`` at least ``threshold`` in size, and where their
    sign changes from one to the next."""
    steps = np.diff(values)
    steps = steps[(np.abs(steps) >= threshold) & (steps != 0)]
    return steps, np.sign(steps[1:]) != np.sign(steps[:-1])


def tortuosity(r, e) -> float:
    _, e = _sorted(r, e)
    low = e.min()
    chord = abs(e[0] - low) + abs(e[-1] - low)
    return float(np.abs(np.diff(e)).sum() / chord) if chord != 0 else math.nan


def energy_diff_flips(r, e) -> float:
    _, e = _sorted(r, e)
    return float(_nonzero_steps(e, ENERGY_DIFF_THRESHOLD)[1].sum())


def _jump(values: np.ndarray, threshold: float) -> float:
    steps, flips = _nonzero_steps(values, threshold)
    return float(np.abs(steps[:-1][flips]).sum() + np.abs(steps[1:][flips]).sum())


def energy_jump(r, e) -> float:
    _, e = _sorted(r, e)
    return _jump(e, ENERGY_DIFF_THRESHOLD)


def force_flips(r, f) -> float:
    _, f = _sorted(r, f)
    fx = f[:, 0, 0]
    signs = np.sign(fx[np.abs(fx) >= FORCE_THRESHOLD])
    return float((signs[1:] != signs[:-1]).sum())


def force_total_variation(r, f) -> float:
    _, f = _sorted(r, f)
    return float(np.abs(np.diff(f[:, 0, 0])).sum())


def force_jump(r, f) -> float:
    _, f = _sorted(r, f)
    return _jump(f[:, 0, 0], 0.0)


def _shared_grid(r_ref, r_pred) -> np.ndarray:
    lo, hi = max(r_ref.min(), r_pred.min()), min(r_ref.max(), r_pred.max())
    if lo >= hi:
        raise ValueError(f"curves without a shared range ({lo} >= {hi})")
    return np.linspace(lo, hi, INTERPOLATION_POINTS)


def energy_mae(r_ref, e_ref, r_pred, e_pred) -> float:
    r_ref, e_ref = _sorted(r_ref, e_ref)
    r_pred, e_pred = _sorted(r_pred, e_pred)
    grid = _shared_grid(r_ref, r_pred)
    a = np.interp(grid, r_ref, e_ref)
    b = np.interp(grid, r_pred, e_pred)
    return float(np.mean(np.abs((b - b[-1]) - (a - a[-1]))))


def force_mae(r_ref, f_ref, r_pred, f_pred) -> float:
    r_ref, f_ref = _sorted(r_ref, f_ref)
    r_pred, f_pred = _sorted(r_pred, f_pred)
    grid = _shared_grid(r_ref, r_pred)
    a = np.stack([np.interp(grid, r_ref, f_ref[:, i, k]) for i in range(2) for k in range(3)], axis=1)
    b = np.stack([np.interp(grid, r_pred, f_pred[:, i, k]) for i in range(2) for k in range(3)], axis=1)
    return float(np.mean(np.abs(a - b)))


def _depth(e: np.ndarray) -> float:
    return float(e[-1] - e.min())


def well_fit(r, e, n_fit: int = 5) -> tuple[float, float]:
    """(equilibrium separation, curvature d²E/dr²) of a quadratic through the ``n_fit`` points
    around the minimum; the sampled minimum where the fit's vertex falls outside them, and a NaN
    curvature where the fit opens downwards."""
    r, e = _sorted(r, e)
    k = int(np.argmin(e))
    start = min(max(0, k - n_fit // 2), max(0, len(r) - n_fit))
    rs, es = r[start : start + n_fit], e[start : start + n_fit]
    if len(rs) < 3:
        return float(r[k]), math.nan
    a, b, _ = np.polyfit(rs, es, 2)
    if a <= 0:
        return float(r[k]), math.nan
    vertex = -b / (2 * a)
    return (float(vertex) if rs.min() <= vertex <= rs.max() else float(r[k])), float(2 * a)


def bond_length_error(r_ref, e_ref, r_pred, e_pred) -> float:
    r_ref, e_ref = _sorted(r_ref, e_ref)
    r_pred, e_pred = _sorted(r_pred, e_pred)
    if _depth(e_ref) < MIN_WELL_DEPTH:
        return math.nan
    return float(abs(well_fit(r_pred, e_pred)[0] - well_fit(r_ref, e_ref)[0]))


def well_depth_error(r_ref, e_ref, r_pred, e_pred) -> float:
    r_ref, e_ref = _sorted(r_ref, e_ref)
    r_pred, e_pred = _sorted(r_pred, e_pred)
    if _depth(e_ref) < MIN_WELL_DEPTH:
        return math.nan
    return float(abs(_depth(e_pred) - _depth(e_ref)))


def wavenumber(symbol: str, curvature: float) -> float:
    """Harmonic wavenumber (cm⁻¹) of a homonuclear dimer with force constant ``curvature`` (eV/Å²)."""
    from ase.data import atomic_masses, atomic_numbers

    if not math.isfinite(curvature) or curvature <= 0:
        return math.nan
    mu = atomic_masses[atomic_numbers[symbol]] * AMU_KG / 2
    omega = math.sqrt(curvature * EV_PER_A2_IN_N_PER_M / mu)
    return omega / (2 * math.pi * C_CM_PER_S)


def vib_freq_error(symbol: str, r_ref, e_ref, r_pred, e_pred) -> float:
    r_ref, e_ref = _sorted(r_ref, e_ref)
    r_pred, e_pred = _sorted(r_pred, e_pred)
    if _depth(e_ref) < MIN_WELL_DEPTH:
        return math.nan
    ref = wavenumber(symbol, well_fit(r_ref, e_ref)[1])
    pred = wavenumber(symbol, well_fit(r_pred, e_pred)[1])
    return float(abs(pred - ref))


def wall_radius(r, e, height: float) -> float:
    """The separation inside the minimum where the repulsive branch, made monotonic outwards-in,
    first stands ``height`` eV above the minimum (linear between points); NaN where it never does."""
    r, e = _sorted(r, e)
    k = int(np.argmin(e))
    if k == 0:
        return math.nan
    inward_r = r[k::-1]
    rise = np.maximum.accumulate(e[k::-1] - e[k])
    levels, first = np.unique(rise, return_index=True)
    if len(levels) < 2 or height > levels[-1]:
        return math.nan
    return float(np.interp(height, levels, inward_r[first]))


def wall_dist_mae(r_ref, e_ref, r_pred, e_pred) -> float:
    errors = []
    for height in WALL_THRESHOLDS:
        ref = wall_radius(r_ref, e_ref, height)
        if not math.isfinite(ref):
            continue
        pred = wall_radius(r_pred, e_pred, height)
        errors.append(abs(pred - ref) if math.isfinite(pred) else ref)
    return float(np.mean(errors)) if errors else math.nan


def _window(curve: Curve, lo: float, hi: float) -> np.ndarray:
    d = curve["distances"]
    return (d >= lo) & (d <= hi)


def low_quality_references(reference: Mapping[str, Curve]) -> set[str]:
    """The elements whose PBE curve is too jumpy (or non-finite) in its own window to score against."""
    out = set()
    for symbol, curve in reference.items():
        d, e = curve["distances"], curve["energies"]
        if d.size == 0:
            continue
        mask = _window(curve, *eval_window(symbol, float(d.max())))
        if mask.sum() < MIN_WINDOW_POINTS:
            continue
        if not np.isfinite(e[mask]).all():
            out.add(symbol)
        elif (
            energy_jump(d[mask], e[mask]) >= LOW_QUALITY_JUMP
            and energy_diff_flips(d[mask], e[mask]) >= LOW_QUALITY_FLIPS
        ):
            out.add(symbol)
    return out


def element_metrics(symbol: str, pred: Curve, ref: Curve | None, low_quality: bool = False) -> dict[str, float] | None:
    """The metrics of one element's predicted curve (None where it is not scored)."""
    d, e, f = pred["distances"], pred["energies"], pred["forces"]
    largest = float(d.max())
    r_min, r_max = eval_window(symbol, largest)
    mask = _window(pred, r_min, r_max)
    if mask.sum() < MIN_WINDOW_POINTS:
        return None
    if len(f) != len(d):
        raise ValueError(f"{symbol}: {len(f)} forces for {len(d)} distances")
    rw, ew, fw = d[mask], e[mask], f[mask]
    if not (np.isfinite(ew).all() and np.isfinite(fw).all()):
        return None
    out: dict[str, float] = {}
    if ref is not None and not low_quality:
        rd, re_, rf = ref["distances"], ref["energies"], ref["forces"]
        rmask = _window(ref, r_min, r_max)
        wall_lo = eval_window(symbol, largest, WALL_R_MIN_FACTOR)[0] - 1e-12
        pwall, rwall = _window(pred, wall_lo, r_max), _window(ref, wall_lo, r_max)
        if pwall.sum() >= 2 and rwall.sum() >= 2:
            out["pbe_wall_dist_mae"] = wall_dist_mae(rd[rwall], re_[rwall], d[pwall], e[pwall])
        if rmask.sum() >= 2:
            pair = (rd[rmask], re_[rmask], rw, ew)
            out["pbe_energy_mae"] = energy_mae(*pair)
            out["pbe_bond_length_error"] = bond_length_error(*pair)
            out["pbe_well_depth_error"] = well_depth_error(*pair)
            out["pbe_vib_freq_error"] = vib_freq_error(symbol, *pair)
            rfw = rf[rmask] if rf.size and len(rf) == len(rd) else None
            shared = max(rd[rmask].min(), rw.min()) <= min(rd[rmask].max(), rw.max())
            if rfw is not None and shared:
                out["pbe_force_mae"] = force_mae(rd[rmask], rfw, rw, fw)
    out["tortuosity"] = tortuosity(rw, ew)
    out["energy_diff_flips"] = energy_diff_flips(rw, ew)
    out["energy_jump"] = energy_jump(rw, ew)
    out["force_flips"] = force_flips(rw, fw)
    out["force_total_variation"] = force_total_variation(rw, fw)
    out["force_jump"] = force_jump(rw, fw)
    return out


def per_element(pred: Mapping[str, Curve], reference: Mapping[str, Curve]) -> dict[str, dict[str, float]]:
    """``{symbol: {metric: value}}`` for every scored element of ``pred``, in its order."""
    low = low_quality_references(reference)
    out = {}
    for symbol, curve in pred.items():
        if symbol in NON_MP_ELEMENTS:
            continue
        values = element_metrics(symbol, curve, reference.get(symbol), symbol in low)
        if values is not None:
            out[symbol] = values
    return out


def means(per_elem: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    """Each metric's mean over the elements where it is finite (NaN where none is), and how many
    elements it averages (``n_<metric>``)."""
    out: dict[str, Any] = {}
    for m in METRICS:
        vals = [v[m] for v in per_elem.values() if m in v and v[m] is not None and math.isfinite(v[m])]
        out[m] = float(np.mean(vals)) if vals else math.nan
        out[f"n_{m}"] = len(vals)
    return out
