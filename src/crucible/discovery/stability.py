"""The discovery task's stability metrics, by our own code with the conventions of
``matbench-discovery`` 1.3.1 (its ``metrics.stable_metrics`` and the pipeline of its ``preds``
module), against which ``tests/test_discovery_stability.py`` checks them.

A model's formation energies (eV/atom) are scored against the WBM summary:

* a prediction more than 5 eV/atom from the DFT formation energy is unrealistic and set missing
  (before rounding); a material with no prediction, or a missing one, is predicted unstable;
* the WBM columns and the predictions are rounded to 3 decimals before anything else (the
  leaderboard rounds its whole frame, the DFT columns too);
* predicted hull distance = DFT hull distance + predicted - DFT formation energy (the hull is the
  fixed DFT one), both from the summary's MP2020-corrected columns;
* stable at a hull distance ≤ 0; a material with no DFT hull distance is neither stable nor
  unstable (it counts in no class);
* subsets: ``full_test_set`` (every row), ``unique_prototypes`` (the summary's
  ``unique_prototype`` rows), ``most_stable_10k`` (of those, the 10,000 lowest predicted hull
  distances; ties by row order);
* on the last two, DAF is precision over the stable share of the unique prototypes by their
  unrounded DFT hull distance (a row without one counts as unstable there);
* accuracy divides by the rows where both hull distances are present (the TP…TN counts leave
  out only rows without a DFT one), as 1.3.1 does; MAE, RMSE and R² use those rows too.

Where 1.3.1 divides by zero (no stable or no unstable material in a subset) it raises; we give
NaN there.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from crucible.core.errors import DataValidationError

STABILITY_THRESHOLD = 0.0  # eV/atom above the hull
MAX_ERROR = 5.0  # eV/atom: a prediction further from DFT is treated as missing
DECIMALS = 3
MOST_STABLE_N = 10_000
SUBSETS = ("full_test_set", "unique_prototypes", "most_stable_10k")
METRICS = ("F1", "DAF", "Precision", "Recall", "Accuracy", "TPR", "TNR", "FPR", "FNR", "MAE", "RMSE", "R2")
COUNTS = ("TP", "FP", "TN", "FN")

# The WBM summary's columns (MP2020-corrected formation energy and hull distance against the MP
# hull), as the leaderboard names them.
ID_COLUMN = "material_id"
EACH_TRUE = "e_above_hull_mp2020_corrected_ppd_mp"
E_FORM_DFT = "e_form_per_atom_mp2020_corrected"
UNIQUE_PROTOTYPE = "unique_prototype"


def _ratio(num: float, den: float) -> float:
    return num / den if den else math.nan


def r2(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """R² as scikit-learn defines it, a constant truth included (1 if also predicted exactly, else 0)."""
    if len(y_true) < 2:
        return math.nan
    ss_res = float(((y_true - y_pred) ** 2).sum())
    ss_tot = float(((y_true - y_true.mean()) ** 2).sum())
    if ss_tot == 0:
        return 1.0 if ss_res == 0 else 0.0
    return 1.0 - ss_res / ss_tot


def stable_metrics(each_true: np.ndarray, each_pred: np.ndarray) -> dict[str, float]:
    """The classification and regression metrics of predicted against true hull distances
    (eV/atom, NaN for missing): those of :data:`METRICS` and the four counts."""
    each_true = np.asarray(each_true, dtype=np.float64)
    each_pred = np.asarray(each_pred, dtype=np.float64)
    if each_true.shape != each_pred.shape:
        raise ValueError(f"{len(each_true)} true hull distances against {len(each_pred)} predicted")
    known = ~np.isnan(each_true)
    actual_pos = known & (each_true <= STABILITY_THRESHOLD)
    actual_neg = known & (each_true > STABILITY_THRESHOLD)
    model_pos = ~np.isnan(each_pred) & (each_pred <= STABILITY_THRESHOLD)  # missing: unstable
    model_neg = ~model_pos
    tp = int((actual_pos & model_pos).sum())
    fn = int((actual_pos & model_neg).sum())
    fp = int((actual_neg & model_pos).sum())
    tn = int((actual_neg & model_neg).sum())
    pos, neg = tp + fn, tn + fp
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, pos)
    both = known & ~np.isnan(each_pred)
    err = each_pred[both] - each_true[both]
    return {
        "F1": _ratio(2 * precision * recall, precision + recall),
        "DAF": _ratio(precision, _ratio(pos, pos + neg)),
        "Precision": precision,
        "Recall": recall,
        "Accuracy": _ratio(tp + tn, int(both.sum())),
        "TPR": recall,
        "TNR": _ratio(tn, neg),
        "FPR": _ratio(fp, neg),
        "FNR": _ratio(fn, pos),
        "MAE": float(np.abs(err).mean()) if len(err) else math.nan,
        "RMSE": float(np.sqrt((err**2).mean())) if len(err) else math.nan,
        "R2": r2(each_true[both], each_pred[both]),
        "TP": tp,
        "FP": fp,
        "TN": tn,
        "FN": fn,
    }


def align(wbm: pd.DataFrame, preds: pd.Series, where: str = "predictions") -> pd.Series:
    """The predictions in the summary's row order, NaN where a material has none; a material
    the summary does not hold, or one predicted twice, is refused (naming ``where``)."""
    dup = preds.index[preds.index.duplicated()]
    if len(dup):
        raise DataValidationError(f"{where}: {ID_COLUMN} {dup[0]!r} predicted more than once ({len(dup)} repeats)")
    unknown = preds.index.difference(wbm.index)
    if len(unknown):
        raise DataValidationError(
            f"{where}: {len(unknown)} {ID_COLUMN}(s) not in the WBM summary, e.g. {', '.join(map(repr, unknown[:3]))}"
        )
    return preds.reindex(wbm.index).astype(np.float64)


def discovery_metrics(wbm: pd.DataFrame, preds: pd.Series, where: str = "predictions") -> dict[str, Any]:
    """Every subset's metrics of one model's formation energies ``preds`` (indexed by
    ``material_id``) against ``wbm`` (indexed by ``material_id``, with the columns
    :data:`EACH_TRUE`, :data:`E_FORM_DFT`, :data:`UNIQUE_PROTOTYPE`). Each subset also counts its
    missing predictions (``missing_preds``: absent or unrealistic) and the unrealistic ones; over
    the whole summary, ``absent`` (no prediction in the file, or an empty one) and ``unrealistic``."""
    pred = align(wbm, preds, where)
    each_true_raw = wbm[EACH_TRUE].to_numpy(dtype=np.float64)
    e_form_raw = wbm[E_FORM_DFT].to_numpy(dtype=np.float64)
    uniq = wbm[UNIQUE_PROTOTYPE].astype(bool).to_numpy()
    p = pred.to_numpy(dtype=np.float64)
    absent = int(np.isnan(p).sum())
    with np.errstate(invalid="ignore"):
        bad = np.abs(p - e_form_raw) > MAX_ERROR
    p = np.where(bad, np.nan, p)
    each_true = np.round(each_true_raw, DECIMALS)
    each_pred = each_true + np.round(p, DECIMALS) - np.round(e_form_raw, DECIMALS)

    uniq_rows = np.flatnonzero(uniq)
    ranked = uniq_rows[~np.isnan(each_pred[uniq_rows])]
    ranked = ranked[np.argsort(each_pred[ranked], kind="stable")][:MOST_STABLE_N]
    rows = {"full_test_set": np.arange(len(wbm)), "unique_prototypes": uniq_rows, "most_stable_10k": ranked}
    out: dict[str, Any] = {s: stable_metrics(each_true[r], each_pred[r]) for s, r in rows.items()}
    with np.errstate(invalid="ignore"):
        uniq_prevalence = float((each_true_raw[uniq_rows] <= STABILITY_THRESHOLD).mean()) if len(uniq_rows) else 0
    for subset in ("unique_prototypes", "most_stable_10k"):
        out[subset]["DAF"] = _ratio(out[subset]["Precision"], uniq_prevalence)
    for subset, r in rows.items():
        out[subset]["missing_preds"] = int(np.isnan(p[r]).sum())  # absent or unrealistic
        out[subset]["unrealistic"] = int(bad[r].sum())
    out["absent"] = absent
    out["unrealistic"] = int(bad.sum())
    out["n_materials"] = len(wbm)
    return out
