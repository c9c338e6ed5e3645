"""Energy, force and position metrics with FAIRChem's ``Evaluator`` semantics.

Re-implemented from the behaviour of ``fairchem/core/modules/evaluator.py`` in fairchem-core
2.24.0 (PyPI), and tested against that file in ``tests/test_mlip_metrics.py``.

What is the same as the peer
----------------------------
* Task tables, output key names (the key-naming rule of :func:`metric_key`) and the
  ``{"metric", "total", "numel"}`` record for every key.
* Pooled accumulation: ``total`` and ``numel`` are summed over batches and
  ``metric = total / numel``, never a mean of per-batch means. Elementwise metrics count
  elements (N×3 for ``forces_mae``), threshold metrics count systems (ADwT: systems × 490).
* Formulas and constants: strict ``<`` against 0.02 eV / 0.03 eV/Å; EFwT takes the max over
  a system's atoms *and* Cartesian components of |ΔF|; ADwT uses the peer's minimum-image
  difference including its quirks and ``numpy.arange(0.01, 0.5, 0.001)`` thresholds with their
  float drift; cosine similarity is computed per atom in float32 with each norm clamped at 1e-8.

Where we deliberately differ
----------------------------
* Everything except cosine similarity is computed in float64 whatever the input dtype (the
  peer computes in the input dtype, so float32 inputs differ at float32 rounding level).
  Per-atom cosines are float32 like the peer's, but summed in float64.
* Mismatched prediction/target shapes raise :class:`MetricInputError` (the peer broadcasts
  ``(n,)`` against ``(n, 1)`` into an ``(n, n)`` error matrix without complaint), as do
  ``natoms`` that do not add up, systems with no atoms and singular cells.
* Unknown tasks and metric names raise :class:`MetricConfigError` (the peer silently uses an
  empty table for an unknown task). A custom table that would emit the same key twice is
  rejected (the peer would count that batch twice).
* ``pbc`` may be one ``(3,)`` flag vector for the whole batch (the peer's contract) or one
  ``(n_systems, 3)`` row per system (an extension; the peer mis-handles that shape).
* With nothing accumulated for a key, ``metric`` is NaN with ``total = numel = 0`` (the peer
  raises ``ZeroDivisionError`` on an empty batch).

``primary_metric`` returns an *emitted key*. The peer names is2rs's primary metric
``average_distance_within_threshold`` but emits it as
``positions_average_distance_within_threshold``; we map the former to the latter explicitly
(:data:`PEER_PRIMARY_METRIC_NAME` keeps the peer's string).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from crucible.core.errors import ConfigError, DataValidationError

__all__ = [
    "ADWT_THRESHOLDS",
    "ENERGY_THRESHOLD",
    "FORCE_THRESHOLD",
    "METRIC_FUNCTIONS",
    "PEER_PRIMARY_METRIC_NAME",
    "PRIMARY_METRIC",
    "TASK_METRICS",
    "Evaluator",
    "MetricConfigError",
    "MetricInputError",
    "count_within_thresholds",
    "metric_key",
    "min_image_difference",
]


class MetricInputError(DataValidationError, ValueError):
    """Prediction/target arrays that cannot be scored (missing key, shape mismatch, natoms)."""


class MetricConfigError(ConfigError, ValueError):
    """An unknown task or metric function name, or a table that emits a key twice."""


TASK_METRICS: dict[str, dict[str, tuple[str, ...]]] = {
    "s2ef": {
        "energy": ("mae",),
        "forces": (
            "forcesx_mae",
            "forcesy_mae",
            "forcesz_mae",
            "mae",
            "cosine_similarity",
            "magnitude_error",
            "energy_forces_within_threshold",
        ),
    },
    "is2rs": {"positions": ("average_distance_within_threshold", "mae", "mse")},
    "is2re": {"energy": ("mae", "mse", "energy_within_threshold")},
}

# The peer's own primary-metric strings; is2rs's lacks the "positions_" prefix of the key the
# peer actually emits, so looking it up in the output would fail.
PEER_PRIMARY_METRIC_NAME: dict[str, str] = {
    "s2ef": "energy_forces_within_threshold",
    "is2rs": "average_distance_within_threshold",
    "is2re": "energy_mae",
}
# The emitted key for each task's primary metric.
PRIMARY_METRIC: dict[str, str] = {
    "s2ef": "energy_forces_within_threshold",
    "is2rs": "positions_average_distance_within_threshold",
    "is2re": "energy_mae",
}

ENERGY_THRESHOLD = 0.02  # eV, strict
FORCE_THRESHOLD = 0.03  # eV/Å, strict, per Cartesian component
# Built with arange on purpose: the peer's thresholds carry arange's accumulated float drift
# (the "0.1" threshold is 0.09999999999999992), and decimals would move systems sitting
# exactly on a grid value into the other bin.
ADWT_THRESHOLDS: np.ndarray = np.arange(0.01, 0.5, 0.001)
ADWT_THRESHOLDS.setflags(write=False)

_COSINE_EPS = np.float32(1e-8)


def metric_key(prop: str, fn: str) -> str:
    """Output key for metric function ``fn`` listed under property ``prop``.

    The property is not prefixed when its name already occurs *anywhere* inside the function
    name (a substring test, so ``forcesx_mae`` under ``forces`` stays ``forcesx_mae``) or when
    the property is ``"misc"``.
    """
    return fn if (prop in fn or prop == "misc") else f"{prop}_{fn}"


def count_within_thresholds(mean_distances: Sequence[float] | np.ndarray) -> int:
    """Σ over ADwT thresholds of the number of systems with mean distance strictly below it."""
    d = np.asarray(mean_distances, dtype=np.float64).reshape(-1)
    # thresholds are increasing, so "d < t" holds exactly for the thresholds to the right
    # of d's right insertion point; NaN sorts past the end and so counts nowhere.
    below = np.searchsorted(ADWT_THRESHOLDS, d, side="right")
    return int((ADWT_THRESHOLDS.size - below).sum())


def min_image_difference(pred: np.ndarray, ref: np.ndarray, cell: np.ndarray, pbc: Sequence[bool]) -> np.ndarray:
    """``pred - ref`` wrapped the way the peer's ``min_diff`` wraps it (quirks included).

    Rows of ``cell`` are lattice vectors. The difference is expressed in fractional
    coordinates; periodic axes are reduced modulo 1, then on *every* axis (periodic or not)
    components above 0.5 get 1 subtracted. So on a non-periodic axis +0.7 becomes −0.3 while
    −0.7 is left alone: a peer quirk we keep so that scores agree.
    """
    pred = np.asarray(pred, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    cell = np.asarray(cell, dtype=np.float64)
    frac = np.linalg.solve(cell.T, (pred - ref).T).T
    for axis, periodic in enumerate(pbc):
        if periodic:
            # mod of a tiny negative number rounds to exactly 1.0; a second pass maps it to 0.
            frac[:, axis] = np.mod(np.mod(frac[:, axis], 1.0), 1.0)
    frac[frac > 0.5] -= 1.0
    return frac @ cell


def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # torch tensor, without importing torch
        value = value.detach().cpu().numpy()
    return np.asarray(value)


class _Batch:
    """One ``update`` call's inputs, converted to numpy once and validated on access."""

    def __init__(self, prediction: Mapping[str, Any], target: Mapping[str, Any]):
        if not isinstance(prediction, Mapping) or not isinstance(target, Mapping):
            raise MetricInputError("prediction and target must be dicts of arrays/tensors")
        self.prediction = prediction
        self.target = target
        self._cache: dict[tuple[str, str], Any] = {}

    def _get(self, side: str, name: str) -> np.ndarray:
        source = self.prediction if side == "prediction" else self.target
        if name not in source:
            raise MetricInputError(f"{side} has no {name!r} array (keys: {sorted(map(str, source))})")
        return _to_numpy(source[name])

    def pair(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Prediction and target float64 arrays for ``name``, which must have equal shapes."""
        cache_key = ("pair", name)
        if cache_key not in self._cache:
            p = self._get("prediction", name)
            t = self._get("target", name)
            if p.shape != t.shape:
                raise MetricInputError(f"{name}: prediction shape {p.shape} differs from target shape {t.shape}")
            try:
                self._cache[cache_key] = (p.astype(np.float64), t.astype(np.float64))
            except (TypeError, ValueError) as exc:
                raise MetricInputError(f"{name}: values are not numeric ({exc})") from None
        return self._cache[cache_key]

    def shared(self, name: str) -> np.ndarray:
        """A per-batch input (natoms, cell, pbc) read from target, else from prediction.

        When both carry it they must agree, since the peer reads some of these from the
        prediction and others from the target.
        """
        cache_key = ("shared", name)
        if cache_key not in self._cache:
            in_p, in_t = name in self.prediction, name in self.target
            if not (in_p or in_t):
                raise MetricInputError(f"neither target nor prediction has a {name!r} array")
            value = self._get("target" if in_t else "prediction", name)
            if in_p and in_t:
                other = self._get("prediction", name)
                if other.shape != value.shape or not np.array_equal(other, value):
                    raise MetricInputError(f"{name}: prediction {other.tolist()} differs from target {value.tolist()}")
            self._cache[cache_key] = value
        return self._cache[cache_key]

    def natoms(self) -> np.ndarray:
        raw = self.shared("natoms")
        natoms = raw.reshape(-1)
        if raw.ndim > 1 and raw.size != raw.shape[0]:
            raise MetricInputError(f"natoms must be one count per system, got shape {raw.shape}")
        if natoms.size and not np.all(np.equal(np.mod(natoms, 1), 0)):
            raise MetricInputError(f"natoms must be integers, got {natoms.tolist()}")
        natoms = natoms.astype(np.int64)
        if np.any(natoms < 1):
            raise MetricInputError(f"natoms must be >= 1 for every system, got {natoms.tolist()}")
        return natoms


def _rows_per_system(batch: _Batch, name: str, rows: int, n_systems: int | None = None) -> np.ndarray:
    natoms = batch.natoms()
    if int(natoms.sum()) != rows:
        raise MetricInputError(f"natoms {natoms.tolist()} sum to {int(natoms.sum())} but {name} has {rows} rows")
    if n_systems is not None and natoms.size != n_systems:
        raise MetricInputError(f"natoms has {natoms.size} systems but energy has {n_systems} values")
    return natoms


def _elementwise(err: np.ndarray) -> tuple[float, int]:
    return float(err.sum()), int(err.size)


def _two_d(name: str, arr: np.ndarray, min_cols: int) -> None:
    if arr.ndim != 2 or arr.shape[1] < min_cols:
        raise MetricInputError(f"{name}: expected a 2-D array with at least {min_cols} columns, got shape {arr.shape}")


# Metric functions: (batch, property) -> (total, numel). The property argument is what the
# function was listed under; like the peer, some functions ignore it and read fixed arrays.


def _mae(batch: _Batch, prop: str) -> tuple[float, int]:
    p, t = batch.pair(prop)
    return _elementwise(np.abs(t - p))


def _mse(batch: _Batch, prop: str) -> tuple[float, int]:
    p, t = batch.pair(prop)
    return _elementwise((t - p) ** 2)


def _per_system_error(batch: _Batch, prop: str) -> np.ndarray:
    p, t = batch.pair(prop)
    natoms = batch.natoms()
    if p.size != natoms.size:
        raise MetricInputError(
            f"{prop}: per-atom metrics need one value per system ({natoms.size} from natoms), got shape {p.shape}"
        )
    return (t - p).reshape(-1) / natoms


def _per_atom_mae(batch: _Batch, prop: str) -> tuple[float, int]:
    return _elementwise(np.abs(_per_system_error(batch, prop)))


def _per_atom_mse(batch: _Batch, prop: str) -> tuple[float, int]:
    return _elementwise(_per_system_error(batch, prop) ** 2)


def _rmse(batch: _Batch, prop: str) -> tuple[float, int]:
    # Despite the name this is the peer's mean Euclidean error norm over the last axis (for a
    # 1-D energy array that collapses to one value per batch); kept for custom tables.
    p, t = batch.pair(prop)
    return _elementwise(np.sqrt(((t - p) ** 2).sum(axis=-1)))


def _component(fn: Callable[[np.ndarray], np.ndarray], column: int) -> Callable[[_Batch, str], tuple[float, int]]:
    def metric(batch: _Batch, prop: str) -> tuple[float, int]:
        p, t = batch.pair("forces")
        _two_d("forces", p, column + 1)
        return _elementwise(fn(t[:, column] - p[:, column]))

    return metric


def _cosine_similarity(batch: _Batch, prop: str) -> tuple[float, int]:
    p, t = batch.pair(prop)
    _two_d(prop, p, 1)
    # float32 with each row norm clamped at eps, as the peer's torch call does (a zero row
    # gives 0); only the sum over rows is done in float64.
    p32, t32 = p.astype(np.float32), t.astype(np.float32)
    pn = np.maximum(np.linalg.norm(p32, axis=1), _COSINE_EPS)
    tn = np.maximum(np.linalg.norm(t32, axis=1), _COSINE_EPS)
    cos = ((p32 / pn[:, None]) * (t32 / tn[:, None])).sum(axis=1, dtype=np.float32)
    return float(cos.astype(np.float64).sum()), int(cos.size)


def _magnitude_error(batch: _Batch, prop: str) -> tuple[float, int]:
    p, t = batch.pair(prop)
    _two_d(prop, p, 2)
    return _elementwise(np.abs(np.linalg.norm(p, axis=-1) - np.linalg.norm(t, axis=-1)))


def _energy_forces_within_threshold(batch: _Batch, prop: str) -> tuple[int, int]:
    pe, te = batch.pair("energy")
    pf, tf = batch.pair("forces")
    _two_d("forces", pf, 1)
    if pe.ndim == 0 or pe.size != pe.shape[0]:
        raise MetricInputError(f"energy: expected one value per system, got shape {pe.shape}")
    natoms = _rows_per_system(batch, "forces", pf.shape[0], n_systems=pe.shape[0])
    if natoms.size == 0:
        return 0, 0
    starts = np.concatenate(([0], np.cumsum(natoms)[:-1]))
    worst_force = np.maximum.reduceat(np.abs(tf - pf).max(axis=1), starts)
    energy_err = np.abs(te - pe).reshape(-1)
    success = (energy_err < ENERGY_THRESHOLD) & (worst_force < FORCE_THRESHOLD)
    return int(success.sum()), int(natoms.size)


def _energy_within_threshold(batch: _Batch, prop: str) -> tuple[int, int]:
    pe, te = batch.pair("energy")
    if pe.ndim == 0:
        raise MetricInputError("energy: expected one value per system, got a scalar")
    return int((np.abs(te - pe) < ENERGY_THRESHOLD).sum()), int(pe.shape[0])


def _average_distance_within_threshold(batch: _Batch, prop: str) -> tuple[int, int]:
    p, t = batch.pair("positions")
    _two_d("positions", p, 3)
    natoms = _rows_per_system(batch, "positions", p.shape[0])
    n = natoms.size
    cell = batch.shared("cell").astype(np.float64)
    if cell.shape != (n, 3, 3):
        raise MetricInputError(f"cell: expected shape {(n, 3, 3)} for {n} systems, got {cell.shape}")
    pbc = batch.shared("pbc").astype(bool)
    if pbc.shape == (3,):
        pbc_rows = [pbc.tolist()] * n
    elif pbc.shape == (n, 3):
        pbc_rows = pbc.tolist()
    else:
        raise MetricInputError(f"pbc: expected shape (3,) or {(n, 3)}, got {pbc.shape}")
    mean_distance = np.empty(n)
    start = 0
    for i, count in enumerate(natoms.tolist()):
        rows = slice(start, start + count)
        try:
            diff = min_image_difference(p[rows], t[rows], cell[i], pbc_rows[i])
        except np.linalg.LinAlgError:
            raise MetricInputError(f"cell of system {i} in the batch is singular: {cell[i].tolist()}") from None
        # np.mean per system (not a segmented sum) so the value matches the peer's bit for bit
        # where it matters: a system sitting exactly on a threshold.
        mean_distance[i] = np.mean(np.linalg.norm(diff, axis=1))
        start += count
    return count_within_thresholds(mean_distance), n * ADWT_THRESHOLDS.size


METRIC_FUNCTIONS: dict[str, Callable[[_Batch, str], tuple[float | int, int]]] = {
    "mae": _mae,
    "mse": _mse,
    "per_atom_mae": _per_atom_mae,
    "per_atom_mse": _per_atom_mse,
    "rmse": _rmse,
    "forcesx_mae": _component(np.abs, 0),
    "forcesy_mae": _component(np.abs, 1),
    "forcesz_mae": _component(np.abs, 2),
    "forcesx_mse": _component(np.square, 0),
    "forcesy_mse": _component(np.square, 1),
    "forcesz_mse": _component(np.square, 2),
    "cosine_similarity": _cosine_similarity,
    "magnitude_error": _magnitude_error,
    "energy_forces_within_threshold": _energy_forces_within_threshold,
    "energy_within_threshold": _energy_within_threshold,
    "average_distance_within_threshold": _average_distance_within_threshold,
}
# Totals of these are counts of successes; everything else sums float errors.
_COUNT_METRICS = frozenset(
    {"energy_forces_within_threshold", "energy_within_threshold", "average_distance_within_threshold"}
)


class Evaluator:
    """Pooled FAIRChem-style metrics accumulated over batches (``update`` / ``compute``).

    ``Evaluator("s2ef")`` uses the task table; ``metrics={"energy": ["mae"], ...}`` replaces it
    entirely (as the peer's ``eval_metrics`` does), with or without a task.
    """

    def __init__(self, task: str | None = None, metrics: Mapping[str, Sequence[str]] | None = None):
        if task is not None and task not in TASK_METRICS:
            raise MetricConfigError(f"unknown task {task!r}; known tasks: {', '.join(sorted(TASK_METRICS))}")
        if metrics:
            table = {str(prop): tuple(fns) for prop, fns in metrics.items()}
        elif task is not None:
            table = dict(TASK_METRICS[task])
        else:
            raise MetricConfigError(
                f"give a task ({', '.join(sorted(TASK_METRICS))}) or a {{property: [metric names]}} dict"
            )
        self.task = task
        self._plan: list[tuple[str, str, str]] = []  # (key, property, function name)
        seen: dict[str, tuple[str, str]] = {}
        for prop, fns in table.items():
            if isinstance(fns, str):
                raise MetricConfigError(f"metrics[{prop!r}] must be a list of names, got the string {fns!r}")
            for fn in fns:
                if fn not in METRIC_FUNCTIONS:
                    raise MetricConfigError(
                        f"unknown metric {fn!r} for {prop!r}; known: {', '.join(sorted(METRIC_FUNCTIONS))}"
                    )
                key = metric_key(prop, fn)
                if key in seen:
                    raise MetricConfigError(f"metric key {key!r} would come from both {seen[key]} and {(prop, fn)}")
                seen[key] = (prop, fn)
                self._plan.append((key, prop, fn))
        self.metrics: dict[str, tuple[str, ...]] = table
        self.reset()

    @property
    def keys(self) -> list[str]:
        """Output keys in emission order."""
        return [key for key, _, _ in self._plan]

    @property
    def primary_metric(self) -> str | None:
        """The task's primary metric as an output key (None without a task or if not emitted).

        For is2rs this is ``positions_average_distance_within_threshold``: the peer's name
        for it, ``average_distance_within_threshold``, is not a key it emits.
        """
        if self.task is None:
            return None
        key = PRIMARY_METRIC[self.task]
        return key if key in self.keys else None

    def reset(self) -> None:
        self._totals: dict[str, float | int] = {}
        self._numels: dict[str, int] = {}
        for key, _, fn in self._plan:
            self._totals[key] = 0 if fn in _COUNT_METRICS else 0.0
            self._numels[key] = 0

    def update(self, prediction: Mapping[str, Any], target: Mapping[str, Any]) -> None:
        """Add one batch. Arrays may be numpy arrays or torch tensors (any device, grads ok).

        All of the batch's metrics are computed before any is added, so a batch that raises
        leaves the accumulated state untouched.
        """
        batch = _Batch(prediction, target)
        stats = [(key, METRIC_FUNCTIONS[fn](batch, prop)) for key, prop, fn in self._plan]
        for key, (total, numel) in stats:
            self._totals[key] += total
            self._numels[key] += numel

    def compute(self) -> dict[str, dict[str, float | int]]:
        """``{key: {"metric": total / numel, "total": total, "numel": numel}}``, pooled."""
        out: dict[str, dict[str, float | int]] = {}
        for key in self.keys:
            total, numel = self._totals[key], self._numels[key]
            metric = total / numel if numel else math.nan
            out[key] = {"metric": float(metric), "total": total, "numel": numel}
        return out
