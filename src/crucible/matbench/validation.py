"""Checks on what a model hands back, before it becomes a number in a table.

A classifier's labels must be booleans or exactly {0, 1}, its probabilities finite and in
[0, 1]; anything else (NaN, a regressor's floats, class names) stops the job with the model,
task, fold and the offending values named. Casting with ``astype(bool)`` would turn all of
those into ``True`` and score them silently.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from crucible.core.errors import CrucibleError

log = logging.getLogger(__name__)

SHOW_VALUES = 5


class ModelOutputError(CrucibleError):
    """A model returned predictions that cannot be scored as they are."""


class ModelFitError(CrucibleError):
    """A model raised while being fitted."""


def where(model: str, task: str | None, fold: int) -> str:
    return f"model {model!r}" + (f" on {task}" if task else "") + f" fold {fold}"


def _shown(values: np.ndarray) -> str:
    distinct = list(dict.fromkeys(values.tolist()))
    more = f", ... ({len(distinct) - SHOW_VALUES} more distinct)" if len(distinct) > SHOW_VALUES else ""
    return ", ".join(repr(v) for v in distinct[:SHOW_VALUES]) + more


def _check_length(values: np.ndarray, n_rows: int, what: str, context: str) -> None:
    if values.ndim == 0 or len(values) != n_rows:
        got = 1 if values.ndim == 0 else len(values)
        raise ModelOutputError(f"{context}: {what} returned {got} value(s) for {n_rows} test rows")


def classifier_labels(raw: Any, n_rows: int, context: str) -> np.ndarray:
    """``predict`` output of a classifier as bools; refuse anything but bools or exact 0/1."""
    values = np.asarray(raw)
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    _check_length(values, n_rows, "predict", context)
    if values.dtype == bool:
        return values
    if values.dtype.kind in "iuf":
        numeric = values.astype(np.float64)
        bad = ~np.isin(numeric, [0.0, 1.0])  # NaN is not in the set either
        if not bad.any():
            return numeric == 1.0
        raise ModelOutputError(
            f"{context}: a classification task needs boolean or 0/1 labels from predict, got "
            f"{int(bad.sum())} other value(s): {_shown(values[bad])} (is this a regressor?)"
        )
    raise ModelOutputError(
        f"{context}: a classification task needs boolean or 0/1 labels from predict, got "
        f"dtype {values.dtype}: {_shown(values)}"
    )


def classifier_probabilities(raw: Any, classes: list[Any], n_rows: int, context: str) -> np.ndarray:
    """P(True) from ``predict_proba`` output; refuse non-finite values or values outside [0, 1]."""
    proba = np.asarray(raw)
    if proba.dtype.kind not in "iuf":
        raise ModelOutputError(f"{context}: predict_proba returned dtype {proba.dtype}: {_shown(proba.ravel())}")
    proba = proba.astype(np.float64)
    if proba.ndim == 2:
        if True not in classes and 1 not in classes:
            raise ModelOutputError(f"{context}: predict_proba's classes_ {classes!r} have no True/1 class")
        proba = proba[:, classes.index(True)]
    _check_length(proba, n_rows, "predict_proba", context)
    bad = ~np.isfinite(proba) | (proba < 0.0) | (proba > 1.0)
    if bad.any():
        raise ModelOutputError(
            f"{context}: predict_proba must give probabilities in [0, 1], got {int(bad.sum())} "
            f"value(s) outside: {_shown(proba[bad])}"
        )
    return proba


def regression_values(raw: Any, n_rows: int, context: str) -> np.ndarray:
    values = np.asarray(raw)
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    _check_length(values, n_rows, "predict", context)
    if values.dtype.kind not in "iuf":
        raise ModelOutputError(f"{context}: predict returned dtype {values.dtype}: {_shown(values)}")
    values = values.astype(np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        raise ModelOutputError(f"{context}: predict returned {int(bad.sum())} NaN or infinite value(s)")
    return values
