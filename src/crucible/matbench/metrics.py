"""The scikit-learn metrics that matbench 0.6 scores with, without importing scikit-learn.

A score job reads five small prediction files and computes a handful of numbers; importing
scikit-learn (and through it scipy.stats) cost it ~1.4 of its ~2 CPU-seconds (issue 32). Each
function here performs the same floating-point operations, in the same order, as the
scikit-learn 1.9 function of the same name does on one-dimensional inputs without sample
weights, so the values are equal bit for bit (tests/test_matbench_metrics.py compares them with
scikit-learn on every fold of real tasks and on generated cases):

* regression: the inputs reshaped to one column, as ``_check_reg_targets`` does, and averaged
  with ``np.average`` along it, then over the one output;
* counts (accuracy, balanced accuracy, F1) are exact integers in float64, so each ratio is one
  correctly rounded division, whatever the order of the additions before it;
* ROC AUC: the curve's corners from the counts at each distinct score (``roc_curve`` with
  ``drop_intermediate=True``), integrated as ``scipy.integrate.trapezoid`` does.

Inputs are checked by the caller (crucible.matbench.scoring): finite floats, bool labels, both
classes present where a ROC AUC is asked for.
"""

from __future__ import annotations

import numpy as np


def _column(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).reshape((-1, 1))


def mean_absolute_error(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    errors = np.average(np.abs(_column(y_pred) - _column(y_true)), axis=0)
    return float(np.average(errors))


def mean_squared_error(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    errors = np.average((_column(y_true) - _column(y_pred)) ** 2, axis=0)
    return float(np.average(errors))


def max_error(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.max(np.abs(_column(y_true) - _column(y_pred))))


def _confusion(y_true: np.ndarray, y_pred: np.ndarray) -> tuple[int, int, int, int]:
    """(true negatives, false positives, false negatives, true positives) of bool labels."""
    t, p = np.asarray(y_true, dtype=bool), np.asarray(y_pred, dtype=bool)
    tp = int(np.count_nonzero(t & p))
    fp = int(np.count_nonzero(~t & p))
    fn = int(np.count_nonzero(t & ~p))
    return len(t) - tp - fp - fn, fp, fn, tp


def accuracy_score(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.average(np.asarray(y_true) == np.asarray(y_pred)))


def balanced_accuracy_score(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """The mean recall of the two classes (both must occur in ``y_true``)."""
    tn, fp, fn, tp = _confusion(y_true, y_pred)
    per_class = np.array([tn, tp], dtype=np.int64) / np.array([tn + fp, fn + tp], dtype=np.int64)
    return float(np.mean(per_class))


def f1_score(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """F1 of the positive class (True); 0.0 where it is undefined (no positive, true or predicted),
    as scikit-learn's ``zero_division="warn"``."""
    _, fp, fn, tp = _confusion(y_true, y_pred)
    denominator = 1.0 * float(tp + fn) + float(tp + fp)
    return float(2.0 * tp / denominator) if denominator else 0.0


def roc_auc_score(y_true: np.ndarray, y_score: np.ndarray) -> float:
    """Area under the ROC curve of ``y_score`` (bool labels or probabilities of True)."""
    truth = np.asarray(y_true, dtype=bool).astype(np.float64)
    score = np.asarray(y_score).astype(np.float64)
    # descending; the order within a tie does not matter: only the counts at its end are used
    order = np.argsort(score, kind="stable")[::-1]
    score, truth = score[order], truth[order]
    thresholds = np.concatenate([np.flatnonzero(np.diff(score)), [truth.size - 1]])
    tps = np.cumsum(truth, dtype=np.float64)[thresholds]
    fps = 1 + thresholds.astype(np.float64) - tps
    if fps.shape[0] > 2:
        corners = np.concatenate([[True], np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), [True]])
        keep = np.where(corners)[0]
        fps, tps = fps[keep], tps[keep]
    fpr = np.concatenate([[0.0], fps]) / fps[-1]
    tpr = np.concatenate([[0.0], tps]) / tps[-1]
    return float(np.sum((fpr[1:] - fpr[:-1]) * (tpr[1:] + tpr[:-1]) / 2.0, axis=-1, dtype=np.float64))
