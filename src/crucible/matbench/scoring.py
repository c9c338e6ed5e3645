"""Matbench v0.1 scoring, computed exactly as matbench 0.6 computes it.

Per-fold metrics (same functions, same order, same inputs as ``matbench.data_ops.score_array``;
scikit-learn's functions as crucible.matbench.metrics computes them, equal bit for bit):

* regression: ``mae``, ``rmse`` (sqrt of sklearn's MSE), ``mape`` (matbench's masked version:
  rows with ``|y_true| <= 1e-5`` are dropped; a fraction, not a percent; NaN when every row is
  masked), ``max_error``.
* classification: ``accuracy``, ``balanced_accuracy``, ``f1`` (binary, positive = True) and
  ``rocauc``. ``rocauc`` is matbench's value: matbench thresholds float predictions at
  ``> 0.5`` for accuracy and, because it overwrites its prediction array in place, computes the
  ROC AUC on those labels too. For binary labels that equals the balanced accuracy (up to
  rounding). We keep that value under ``rocauc`` so that our numbers sit on the leaderboard's
  scale, and add ``rocauc_proba``: the true ROC AUC from the probabilities, when given.

Fold statistics are ``mean``, ``max``, ``min`` and ``std`` (``np.std``, ddof=0, as matbench) over
the folds in fold order. The scaled error is MAE/MAD (regression) and (1 - rocauc)/0.5
(classification, matbench's label-based rocauc), per fold, with its mean and std.

Scores record (``results/matbench/scores/{model}/{task}.json``, written by :func:`write_scores`)::

    {
      "schema": "crucible.matbench.scores/1",
      "benchmark": "matbench_v0.1",
      "matbench_scoring_version": "0.6",    # the scorer we reproduce
      "task": "matbench_steels",
      "model": "dummy",                      # null if not given
      "task_type": "regression" | "classification",
      "task_input": "composition" | "structure",   # the task's native input (official metadata)
      "input_kind": "composition-only" | "structure" | null,  # what the model actually saw
      "metrics": ["mae", "rmse", "mape", "max_error"],        # matbench's metric order
      "leaderboard_metric": "mae" | "rocauc",
      "leaderboard_value": <mean of leaderboard_metric over the 5 folds>,
      "leaderboard_std": <std (ddof 0) of it>,
      "n_folds": 5,
      "n_test": <sum of the folds' n_test>,
      "folds": [{"fold": 0, "n_test": 63, "scores": {metric: float, ...}, "scaled_error": float}, ...],
      "stats": {metric: {"mean": f, "max": f, "min": f, "std": f}, ...},
      "scaled_error": {"definition": "mae/mad" | "(1-rocauc)/0.5",
                       "per_fold": [f, ...], "mean": f, "std": f},
      "mad": f        # regression: the task's mean absolute deviation (official metadata)
      "frac_true": f  # classification instead of "mad"
    }

``scores`` and ``stats`` carry the matbench metrics and, for classifiers that gave
probabilities on every fold, ``rocauc_proba`` too (it is then also listed in ``metrics`` after
the four matbench ones). Non-finite values (a fully masked ``mape``) are written as JSON ``NaN``.
"""

from __future__ import annotations

import math
import os
from typing import Any, Mapping, Sequence

import numpy as np

from crucible.core.errors import DataValidationError
from crucible.matbench.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    f1_score,
    max_error,
    mean_absolute_error,
    mean_squared_error,
    roc_auc_score,
)
from crucible.matbench.tasks import (
    BENCHMARK_NAME,
    CLASSIFICATION,
    COMPOSITION_TASKS,
    MATBENCH_VERSION,
    N_FOLDS,
    REGRESSION,
    TASK_TYPES,
)

REG_METRICS: tuple[str, ...] = ("mae", "rmse", "mape", "max_error")
CLF_METRICS: tuple[str, ...] = ("accuracy", "balanced_accuracy", "f1", "rocauc")
PROBA_METRIC = "rocauc_proba"
CLF_THRESHOLD = 0.5
MAPE_THRESHOLD = 1e-5
FOLD_STATS: tuple[str, ...] = ("mean", "max", "min", "std")
SCHEMA = "crucible.matbench.scores/1"

# The four composition tasks; the other nine take structures (official metadata).


def check_task_type(task_type: str) -> str:
    if task_type not in TASK_TYPES:
        raise DataValidationError(f"task_type must be one of {TASK_TYPES}, not {task_type!r}")
    return task_type


def metric_names(task_type: str) -> tuple[str, ...]:
    return REG_METRICS if check_task_type(task_type) == REGRESSION else CLF_METRICS


def leaderboard_metric(task_type: str) -> str:
    return "mae" if check_task_type(task_type) == REGRESSION else "rocauc"


def masked_mape(y_true: np.ndarray, y_pred: np.ndarray, threshold: float = MAPE_THRESHOLD) -> float:
    """matbench's MAPE: mean |(t - p) / t| over rows with |t| > threshold, as a fraction."""
    mask = np.abs(y_true) > threshold
    if not mask.any():
        return math.nan  # matbench gets NaN (with a RuntimeWarning) from np.mean([])
    t, p = y_true[mask], y_pred[mask]
    return float(np.mean(np.fabs((t - p) / t)))


def _as_1d(name: str, values: Any) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise DataValidationError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


def _finite_floats(name: str, arr: np.ndarray) -> np.ndarray:
    if arr.dtype.kind not in "fiu":
        raise DataValidationError(f"{name} must be numeric, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        raise DataValidationError(
            f"{name} has {int(bad.sum())} non-finite value(s), first at row {int(np.argmax(bad))}"
        )
    return arr


def _labels(name: str, arr: np.ndarray) -> np.ndarray:
    if arr.dtype.kind == "b":
        return arr
    if arr.dtype == object and all(isinstance(v, (bool, np.bool_)) for v in arr):
        return arr.astype(bool)
    raise DataValidationError(f"{name} must be bool labels, got dtype {arr.dtype}")


def _probabilities(name: str, arr: np.ndarray) -> np.ndarray:
    arr = _finite_floats(name, arr)
    outside = (arr < 0.0) | (arr > 1.0)
    if outside.any():
        raise DataValidationError(f"{name} has {int(outside.sum())} value(s) outside [0, 1]")
    return arr


def score_fold(task_type: str, y_true: Any, y_pred: Any, y_proba: Any = None) -> dict[str, Any]:
    """Score one fold the way matbench 0.6 ``record()`` does; returns metrics plus ``n_test``.

    Regression: ``y_true``/``y_pred`` numeric (ints are widened to float64, NaN/inf refused).
    Classification: ``y_true`` bool; ``y_pred`` bool labels, or float probabilities that are
    thresholded at ``> 0.5`` exactly as matbench does (and then also used as ``y_proba`` when
    none is given); ``y_proba`` = P(True), enables ``rocauc_proba``.
    The keys come in matbench's metric order, then ``rocauc_proba`` if any, then ``n_test``.
    """
    check_task_type(task_type)
    t = _as_1d("y_true", y_true)
    p = _as_1d("y_pred", y_pred)
    if len(t) != len(p):
        raise DataValidationError(f"y_true and y_pred differ in length: {len(t)} != {len(p)}")
    if len(t) == 0:
        raise DataValidationError("cannot score an empty fold")
    out: dict[str, Any] = {}
    if task_type == REGRESSION:
        t = _finite_floats("y_true", t)
        p = _finite_floats("y_pred", p)
        if y_proba is not None:
            raise DataValidationError("y_proba is only meaningful for classification")
        out["mae"] = float(mean_absolute_error(t, p))
        out["rmse"] = math.sqrt(mean_squared_error(t, p))
        out["mape"] = masked_mape(t, p)
        out["max_error"] = float(max_error(t, p))
    else:
        t = _labels("y_true", t)
        if p.dtype.kind == "f":
            proba_from_pred = _probabilities("y_pred", p)
            labels = proba_from_pred > CLF_THRESHOLD
        else:
            proba_from_pred = None
            labels = _labels("y_pred", p)
        proba = None
        if y_proba is not None:
            proba = _probabilities("y_proba", _as_1d("y_proba", y_proba))
            if len(proba) != len(t):
                raise DataValidationError(f"y_true and y_proba differ in length: {len(t)} != {len(proba)}")
        elif proba_from_pred is not None:
            proba = proba_from_pred
        if np.unique(t).size < 2:
            raise DataValidationError("y_true holds a single class: ROC AUC is undefined on this fold")
        out["accuracy"] = float(accuracy_score(t, labels))
        out["balanced_accuracy"] = float(balanced_accuracy_score(t, labels))
        out["f1"] = float(f1_score(t, labels))
        # matbench's order-of-operations quirk: AUC of the thresholded labels.
        out["rocauc"] = float(roc_auc_score(t, labels))
        if proba is not None:
            out[PROBA_METRIC] = float(roc_auc_score(t, proba))
    out["n_test"] = int(len(t))
    return out


def fold_stats(values: Sequence[float]) -> dict[str, float]:
    """mean/max/min/std (np.std, ddof=0) over the folds in the given order, as matbench."""
    arr = list(values)
    return {op: float(getattr(np, op)(arr)) for op in FOLD_STATS}


def scaled_error_of(task_type: str, value: float, mad: float | None) -> float:
    """The leaderboard metric's value (MAE or ROC AUC) as matbench's scaled error: MAE/MAD for
    regression, (1 - ROC AUC)/0.5 for classification; 0 is perfect, 1 is the Dummy's level."""
    if check_task_type(task_type) == REGRESSION:
        if mad is None or not mad > 0:
            raise DataValidationError(f"the scaled error needs a positive MAD, got {mad!r}")
        return float(value) / float(mad)
    return (1.0 - float(value)) / 0.5


def scaled_error(task_type: str, fold_scores: Mapping[str, Any], mad: float | None) -> float:
    return scaled_error_of(task_type, fold_scores[leaderboard_metric(task_type)], mad)


def score_task(
    task_name: str,
    task_type: str,
    folds: list[dict],
    mad_or_frac_true: float | None,
    *,
    model: str | None = None,
    input_kind: str | None = None,
) -> dict[str, Any]:
    """Build the scores record (see the module docstring) from the five :func:`score_fold` dicts.

    ``folds[k]`` is fold k's ``score_fold`` output (its ``n_test`` key is required).
    ``mad_or_frac_true`` is the official MAD (regression; used for the scaled error) or the
    fraction of True targets (classification; recorded only).
    """
    check_task_type(task_type)
    if len(folds) != N_FOLDS:
        raise DataValidationError(f"{task_name}: Matbench scores need {N_FOLDS} folds, got {len(folds)}")
    names = list(metric_names(task_type))
    for k, fold in enumerate(folds):
        missing = [m for m in names + ["n_test"] if m not in fold]
        if missing:
            raise DataValidationError(f"{task_name}: fold {k} scores lack {missing}")
    if task_type == CLASSIFICATION and all(PROBA_METRIC in f for f in folds):
        names.append(PROBA_METRIC)
    mad = mad_or_frac_true if task_type == REGRESSION else None
    per_fold_scaled = [scaled_error(task_type, f, mad) for f in folds]
    lb = leaderboard_metric(task_type)
    stats = {m: fold_stats([f[m] for f in folds]) for m in names}
    record: dict[str, Any] = {
        "schema": SCHEMA,
        "benchmark": BENCHMARK_NAME,
        "matbench_scoring_version": MATBENCH_VERSION,
        "task": task_name,
        "model": model,
        "task_type": task_type,
        "task_input": "composition" if task_name in COMPOSITION_TASKS else "structure",
        "input_kind": input_kind,
        "metrics": names,
        "leaderboard_metric": lb,
        "leaderboard_value": stats[lb]["mean"],
        "leaderboard_std": stats[lb]["std"],
        "n_folds": len(folds),
        "n_test": int(sum(int(f["n_test"]) for f in folds)),
        "folds": [
            {
                "fold": k,
                "n_test": int(f["n_test"]),
                "scores": {m: float(f[m]) for m in names},
                "scaled_error": per_fold_scaled[k],
            }
            for k, f in enumerate(folds)
        ],
        "stats": stats,
        "scaled_error": {
            "definition": "mae/mad" if task_type == REGRESSION else "(1-rocauc)/0.5",
            "per_fold": per_fold_scaled,
            "mean": float(np.mean(per_fold_scaled)),
            "std": float(np.std(per_fold_scaled)),
        },
    }
    record["mad" if task_type == REGRESSION else "frac_true"] = (
        None if mad_or_frac_true is None else float(mad_or_frac_true)
    )
    return record


def write_scores(record: Mapping[str, Any], path: str | os.PathLike) -> None:
    """Write a :func:`score_task` record atomically (sorted keys, as every crucible JSON)."""
    from crucible.core.io import write_json

    write_json(dict(record), path)
