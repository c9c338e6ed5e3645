"""A potential's homonuclear dimer curves as the Matbench Discovery leaderboard samples them, in
its prediction-file format (``{potential}.json.gz``), so that its own code reads our file.

The grid is the leaderboard's runner's (``models/run_diatomics.py`` at the pinned commit): the
dimers of Z = 1…92, 119 log-spaced separations from 0.1 to 6.0 Å, the two atoms on the x axis in a
periodic 50 Å cube. The file is ``{"homo-nuclear": {"H-H": {"distances", "energies", "forces"}},
"hetero-nuclear": {}, "distances": [...], "run_metadata": {...}}``, gzipped JSON without NaN.

What the leaderboard's file leaves implicit is recorded in ``run_metadata``: elements the
potential has no parameters for (``not_covered``: not run, not failures), elements whose
evaluation raised (``failed``, with the reason), and single points with a non-finite energy or
force (``failed_points``: the point is left out of the curve; a curve with such a point inside the
scored window, 0.8 covalent radii up to its upper bound, is left out whole, as the leaderboard's
runner does, and its reason is in ``excluded_formula_reasons``), and finite points beyond the
physical bounds of :func:`crucible.potentials.spec.dimer_bounds` (|E| > 1e3 eV/atom or a force
component > 1e4 eV/Å, raised to the two bare nuclei's Coulomb repulsion at that separation where
that is larger: ``implausible_points``, ``{formula: [{distance, reason}]}``). Those stay in
the curve, so that the metrics are what the leaderboard's code computes from the same file; the
diatomics table counts them beside the metrics instead of averaging them unseen.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import math
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from crucible.core import strict_json
from crucible.core.errors import DataValidationError

log = logging.getLogger(__name__)

# The leaderboard runner's grid and box (its defaults; a curve file of another grid is refused).
MAX_Z = 92
N_POINTS = 119
MIN_DISTANCE = 0.1  # Å
MAX_DISTANCE = 6.0  # Å
BOX = 50.0  # Å, periodic cube
HOMO, HETERO = "homo-nuclear", "hetero-nuclear"
# Elements outside the Materials Project: the leaderboard scores no model on them.
NON_MP_ELEMENTS = frozenset({"Po", "At", "Rn", "Fr", "Ra"})
# Lower bound of the window of the general metrics and of the wall metric, in covalent radii.
WINDOW_R_MIN_FACTOR = 0.9
WALL_R_MIN_FACTOR = 0.8
WINDOW_R_MAX_VDW = 3.1  # upper bound in van der Waals radii (Alvarez), capped at the largest separation
# What this module writes beside the leaderboard's keys; a file of an older meaning reruns.
CURVES_FORMAT = 2  # 2: implausible_points


def distances() -> np.ndarray:
    """The separations of every curve (Å), ascending."""
    return np.geomspace(MIN_DISTANCE, MAX_DISTANCE, N_POINTS)


def symbols(max_z: int = MAX_Z) -> list[str]:
    from ase.data import chemical_symbols

    return [chemical_symbols[z] for z in range(1, max_z + 1)]


def formula(symbol: str) -> str:
    return f"{symbol}-{symbol}"


def eval_window(symbol: str, largest: float, r_min_factor: float = WINDOW_R_MIN_FACTOR) -> tuple[float, float]:
    """(r_min, r_max) in Å of the separations a metric of ``symbol``'s curve looks at: from
    ``r_min_factor`` covalent radii (0 where ase has none) to 3.1 van der Waals radii (Alvarez),
    at most ``largest``, the largest separation of the curve."""
    from ase.data import atomic_numbers, covalent_radii, vdw_alvarez

    z = atomic_numbers[symbol]
    r_cov = float(covalent_radii[z]) if z < len(covalent_radii) else math.nan
    r_vdw = float(vdw_alvarez.vdw_radii[z]) if z < len(vdw_alvarez.vdw_radii) else math.nan
    r_min = r_min_factor * r_cov if math.isfinite(r_cov) else 0.0
    r_max = min(WINDOW_R_MAX_VDW * r_vdw, largest) if math.isfinite(r_vdw) else largest
    return r_min, r_max


def dimer(symbol: str, distance: float):
    """Two atoms of ``symbol`` ``distance`` Å apart along x, from the centre of the periodic box."""
    from ase import Atoms

    c = BOX / 2
    return Atoms(2 * symbol, positions=[[c, c, c], [c + distance, c, c]], cell=[BOX] * 3, pbc=True)


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def element_curve(
    potential, symbol: str, grid: np.ndarray, batch_size: int | None = None
) -> tuple[dict[str, list], list[dict[str, Any]], list[dict[str, Any]]]:
    """One dimer's curve: ``{distances, energies, forces}`` of its finite points, a record
    ``{distance, reason}`` of each point whose energy or forces were not finite, and one of each
    finite point beyond the physical bounds (kept in the curve). The points go through
    :func:`crucible.potentials.batch.evaluate` (``potential``: a loaded potential or a bare
    calculator; ``batch_size`` points per pass of a batched model, default the whole curve). A
    calculator that raises, or returns an energy or forces that are no real numbers, raises here
    (the caller records the element as failed)."""
    from ase.data import atomic_numbers

    from crucible.potentials.batch import evaluate
    from crucible.potentials.spec import dimer_bounds, implausible_reason

    z = atomic_numbers[symbol]
    curve: dict[str, list] = {"distances": [], "energies": [], "forces": []}
    bad: list[dict[str, Any]] = []
    implausible: list[dict[str, Any]] = []
    points = [dimer(symbol, float(r)) for r in grid]
    for r, result in zip(grid, evaluate(potential, points, batch_size=batch_size or len(points))):
        if not result.ok:
            bad.append({"distance": float(r), "reason": result.reason})
            continue
        reason = implausible_reason(result.energy, result.forces, 2, *dimer_bounds(z, float(r)))
        if reason:
            implausible.append({"distance": float(r), "reason": reason})
        curve["distances"].append(float(r))
        curve["energies"].append(result.energy)
        curve["forces"].append(result.forces.tolist())
    return curve, bad, implausible


def in_scored_window(symbol: str, distance: float, largest: float) -> bool:
    """Whether a point at ``distance`` is one the metrics score (0.8 covalent radii, the
    leaderboard's wall bound, with its one-ulp slack, up to the window's upper bound)."""
    r_min = eval_window(symbol, largest, WALL_R_MIN_FACTOR)[0]
    r_max = eval_window(symbol, largest)[1]
    return r_min - 1e-12 <= distance <= r_max


def compute_curves(potential, elements: Iterable[str] | None = None) -> dict[str, Any]:
    """Every dimer curve of ``potential`` (a loaded :class:`~crucible.potentials.spec.Potential`)
    over ``elements`` (default H…U), as the prediction file's dict."""
    from tqdm import tqdm

    grid = distances()
    names = list(elements) if elements is not None else symbols()
    covered = potential.elements
    curves: dict[str, Any] = {}
    excluded: dict[str, str] = {}
    not_covered: list[str] = []
    failed: dict[str, str] = {}
    failed_points: dict[str, list[dict[str, Any]]] = {}
    implausible_points: dict[str, list[dict[str, Any]]] = {}
    for symbol in tqdm(names, desc=f"{potential.name} dimers", disable=None):
        key = formula(symbol)
        if covered is not None and symbol not in covered:
            not_covered.append(symbol)
            excluded[key] = f"not covered: {potential.name} has no parameters for {symbol}"
            continue
        try:
            curve, bad, implausible = element_curve(potential, symbol, grid)
        except Exception as exc:  # the element is not computed; the run goes on
            failed[key] = _reason(exc)
            excluded[key] = f"failed: {failed[key]}"
            log.warning("%s %s: %s", potential.name, key, failed[key])
            continue
        if implausible:
            implausible_points[key] = implausible
            log.warning(
                "%s %s: %d implausible point(s), first %s", potential.name, key, len(implausible), implausible[0]
            )
        if bad:
            failed_points[key] = bad
            scored = [p for p in bad if in_scored_window(symbol, p["distance"], float(grid.max()))]
            if scored:
                excluded[key] = (
                    f"non-finite at a scored separation: {scored[0]['distance']:.6g} Å, {scored[0]['reason']}"
                )
                continue
        curves[key] = curve
    return {
        HOMO: curves,
        HETERO: {},
        "distances": grid.tolist(),
        "run_metadata": {
            "excluded_formula_reasons": dict(sorted(excluded.items())),
            "crucible": {
                "format": CURVES_FORMAT,
                "potential": potential.name,
                "device": potential.device,
                "box_size": BOX,
                "elements": names,
                "not_covered": not_covered,
                "failed": failed,
                "failed_points": failed_points,
                "implausible_points": implausible_points,
                "provenance": dict(potential.provenance),
            },
        },
    }


def dumps(results: dict[str, Any]) -> bytes:
    """The gzipped JSON of a curves dict, byte for byte the same for the same curves (no
    timestamp in the gzip header, no NaN)."""
    try:
        text = json.dumps(results, allow_nan=False, separators=(",", ":"))
    except ValueError as exc:
        raise DataValidationError(f"curves hold a non-finite number: {exc}") from exc
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as gz:
        gz.write(text.encode("utf-8"))
    return buf.getvalue()


def read_curves(path: str | Path) -> dict[str, Any]:
    """A prediction file (ours or the leaderboard's), checked: the grid top-level, each curve's
    distances an ordered subset of it, one energy and a (2, 3) force per distance, all finite."""
    path = Path(path)
    data = strict_json.read_json(path)
    if not isinstance(data, dict) or "distances" not in data or not isinstance(data.get(HOMO), dict):
        raise DataValidationError(f"{path}: needs top-level 'distances' and '{HOMO}'")
    grid = [float(d) for d in data["distances"]]
    position = {d: k for k, d in enumerate(grid)}
    for key, curve in data[HOMO].items():
        where = f"{path}: {HOMO}.{key}"
        if not isinstance(curve, dict):
            raise DataValidationError(f"{where}: not an object")
        dists = [float(d) for d in curve.get("distances", grid)]
        idx = [position.get(d, -1) for d in dists]
        if any(i < 0 for i in idx) or any(b <= a for a, b in zip(idx, idx[1:])):
            raise DataValidationError(f"{where}.distances: not an ordered subset of the top-level distances")
        energies = curve.get("energies", [])
        forces = curve.get("forces", [])
        if not energies:
            continue  # the leaderboard's code skips an empty curve too
        if len(energies) != len(dists):
            raise DataValidationError(f"{where}.energies: {len(energies)} values for {len(dists)} distances")
        f = np.asarray(forces, dtype=float)
        if f.shape != (len(dists), 2, 3):
            raise DataValidationError(f"{where}.forces: shape {f.shape}, expected ({len(dists)}, 2, 3)")
        e = np.asarray(energies, dtype=float)
        if not (np.isfinite(e).all() and np.isfinite(f).all()):
            raise DataValidationError(f"{where}: non-finite energy or force")
    return data


def homo_curves(data: dict[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    """``{symbol: {distances, energies, forces}}`` of a curves dict's non-empty homonuclear
    curves, as float64 arrays, in the file's order."""
    grid = np.asarray(data["distances"], dtype=np.float64)
    out = {}
    for key, curve in data[HOMO].items():
        if not curve.get("energies"):
            continue
        first, _, second = key.partition("-")
        symbol = first if first == second else key
        out[symbol] = {
            "distances": np.asarray(curve.get("distances", grid), dtype=np.float64),
            "energies": np.asarray(curve["energies"], dtype=np.float64),
            "forces": np.asarray(curve["forces"], dtype=np.float64),
        }
    return out


def flagged_points(data: dict[str, Any]) -> dict[str, int]:
    """``{formula: points}`` of a curves file's flagged points: non-finite (left out) or beyond the
    physical bounds (kept and scored). Empty for a file without our metadata (the leaderboard's own)."""
    meta = (data.get("run_metadata") or {}).get("crucible") or {}
    out: dict[str, int] = {}
    for key in ("failed_points", "implausible_points"):
        for formula_, points in (meta.get(key) or {}).items():
            out[formula_] = out.get(formula_, 0) + len(points)
    return out


def flagged_in_window(data: dict[str, Any]) -> int:
    """How many of a curves file's points beyond the physical bounds lie inside the window the
    metrics score (those move the means; a flagged point at 0.1 Å does not)."""
    meta = (data.get("run_metadata") or {}).get("crucible") or {}
    largest = float(max(data["distances"]))
    return sum(
        in_scored_window(key.partition("-")[0], p["distance"], largest)
        for key, points in (meta.get("implausible_points") or {}).items()
        for p in points
    )
