"""A model's scores on one task from its five fold prediction files: the ``crucible matbench
score`` command. The metrics are :mod:`crucible.matbench.scoring`'s, the truth and test ids of
the task :class:`crucible.matbench.taskdata.TaskData`'s.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from crucible.core.errors import DataValidationError
from crucible.core.io import InFile
from crucible.matbench.scoring import score_fold, score_task, write_scores
from crucible.matbench.taskdata import TaskData, card_values, check_fold_paths, input_kind_of, structures_used


def score_prediction_files(
    task: str,
    data_path: str | os.PathLike,
    folds_path: str | os.PathLike,
    prediction_paths: Sequence[str | os.PathLike],
    *,
    task_type: str,
    mad: float | None,
    model: str | None,
    inputs_given: str | None = None,
) -> dict[str, Any]:
    """Score one model's five fold prediction files on one task (matbench 0.6's scorer).

    ``inputs_given`` is recorded under the record's ``input_kind`` key; by default it is what
    the fold jobs' sidecars say (``structures_used``), else read from the data (structures
    present or not). When the sidecars say, the record also carries ``structures_used``.
    """
    from crucible.matbench.prediction_files import read_predictions

    td = TaskData(task, data_path, folds_path)
    if task_type != td.task_type:
        raise DataValidationError(f"--task-type {task_type} disagrees with {data_path} ({td.task_type})")
    folds = []
    for k, path in enumerate(check_fold_paths(prediction_paths)):
        df = read_predictions(path, td.task_type, td.test_ids[k], k)
        y_true = td.truth.loc[td.test_ids[k]].to_numpy()
        proba = df["probability"].to_numpy() if "probability" in df.columns else None
        try:
            folds.append(score_fold(td.task_type, y_true, df["prediction"].to_numpy(), proba))
        except DataValidationError as exc:
            raise DataValidationError(f"{path} (fold {k}): {exc}") from None
    used = structures_used(prediction_paths)
    record = score_task(task, td.task_type, folds, mad, model=model, input_kind=inputs_given or input_kind_of(td, used))
    if used is not None:
        record["structures_used"] = used
    return record


def score_task_files(
    task: str,
    data: InFile,
    folds: InFile,
    predictions: Sequence[InFile],
    out: str | os.PathLike,
    *,
    card: InFile | None = None,
    task_type: str | None = None,
    mad: float | None = None,
    model: str | None = None,
    input_kind: str | None = None,
) -> dict[str, Any]:
    """:func:`score_prediction_files` written to ``out``; task type and MAD from the task card,
    unless given (an explicit value wins over the card's).

    Args:
        data: results/matbench/data/{task}.parquet
        folds: results/matbench/folds/{task}.parquet
        predictions: fold_0.parquet .. fold_4.parquet, in fold order
        out: results/matbench/scores/{model}/{task}.json
        card: task card (results/matbench/data/{task}.json): gives task type and MAD
        task_type: instead of --card
        mad: instead of --card: official MAD (regression) or fraction of True (classification)
        model: the model's name, as recorded in the scores
        input_kind: what the model was given; default: 'structure' if the data has structures, else
            composition-only
        task: as in :func:`crucible.matbench.clean.write_clean_task`
    """
    from crucible.core.io import read_json

    if card:
        card_type, card_mad = card_values(read_json(card), task, card)
        task_type = task_type or card_type
        mad = card_mad if mad is None else mad
    elif task_type is None or mad is None:
        raise DataValidationError("score needs --card, or both --task-type and --mad")
    record = score_prediction_files(
        task,
        data,
        folds,
        predictions,
        task_type=task_type,
        mad=mad,
        model=model,
        inputs_given=input_kind,
    )
    write_scores(record, out)
    return record
