"""Per-model figures of one task: parity plot (regression) or ROC curve (classification)."""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from crucible.core.errors import PredictionFileError
from crucible.core.io import InFile, read_parquet


def model_figure(
    model: str, card: dict[str, Any], data_path: str | os.PathLike, prediction_paths: Sequence[str | os.PathLike]
):
    """The figure of ``model``'s five fold predictions against the task's truth."""
    import pandas as pd

    from crucible.report.figures import parity_figure, roc_figure

    data = read_parquet(data_path, columns=["mbid", "target"]).set_index("mbid")["target"]
    preds = pd.concat([_checked(read_parquet(p), p, data.index) for p in prediction_paths], ignore_index=True)
    y_true = data.loc[preds["mbid"]].to_numpy()
    title = f"{model} on {card['task'].removeprefix('matbench_')}: {card['target']}"
    if card["task_type"] == "regression":
        return parity_figure(
            y_true.astype(float),
            preds["prediction"].to_numpy(dtype=float),
            title,
            card.get("unit") or "",
            quantity=card["target"],
            pooled_over=f"{len(prediction_paths)} test fold{'' if len(prediction_paths) == 1 else 's'}",
        )
    from_labels = "probability" not in preds
    score = preds["prediction" if from_labels else "probability"].to_numpy(dtype=float)
    return roc_figure(y_true.astype(bool), score, title, from_labels)


def _checked(preds, path: str | os.PathLike, ids):
    """``preds`` if every row is an id of the task with a finite prediction; a figure of a NaN
    would print "MAE nan" and exit 0."""
    unknown = preds.loc[~preds["mbid"].isin(ids), "mbid"]
    if len(unknown):
        raise PredictionFileError(f"{path}: {len(unknown)} id(s) not in the task's data, first {unknown.iloc[0]!r}")
    for column in ("prediction", "probability"):
        if column in preds:
            values = preds[column].to_numpy(dtype=float)
            bad = ~np.isfinite(values)
            if bad.any():
                raise PredictionFileError(
                    f"{path}: column {column!r}: {int(bad.sum())} non-finite value(s), "
                    f"first at id {preds['mbid'].iloc[int(np.argmax(bad))]!r}"
                )
    return preds


def write_model_figure(
    model: str,
    card: InFile,
    data: InFile,
    predictions: Sequence[InFile],
    out_png: str | os.PathLike,
    out_pdf: str | os.PathLike,
) -> None:
    """The parity plot (regression) or ROC curve (classification) of one model on one task.

    Args:
        model: the model's name (figure title)
        predictions: fold_0 .. fold_4 prediction files of the model on the task
        out_png: the parity plot (regression) or ROC curve (classification), PNG
        out_pdf: the same figure, PDF
        card: as in :func:`crucible.matbench.folds.write_task_folds`
        data: as in :func:`crucible.matbench.folds.write_task_folds`
    """
    from crucible.core.io import read_json
    from crucible.report.figures import save_figure

    save_figure(model_figure(model, read_json(card), data, predictions), out_png, out_pdf)
