"""Prediction files: ``results/matbench/predictions/{model}/{task}/fold_{k}.parquet``, their schema, validation and writing.

Columns:

* ``mbid`` (string): exactly the fold's test ids, each once (any order in the file).
* ``prediction``: float64 for regression, bool for classification (the predicted label).
* ``probability`` (float64, P(True), in [0, 1]): classifiers. Our own models always write it
  when they have ``predict_proba``; it is optional in user-supplied files, and then
  ``rocauc_proba`` is simply not reported.

What :func:`read_predictions` coerces and what it refuses (a refusal raises
:class:`~crucible.core.errors.PredictionFileError` naming the file, the fold, the column and the
first offending ids with their count):

* coerced (lossless): ``mbid`` stored as large_string or dictionary/categorical of strings;
  ``prediction``/``probability`` stored as float16/float32 (widened exactly to float64).
* refused: missing, extra, null or duplicated ids; NaN, +-inf or null values; a probability
  outside [0, 1]; integers or bools where a float is required (an int column in a regression
  file usually means labels or rounding went wrong, and matbench itself rejects ints); anything
  but bool for a classification ``prediction`` (0/1 ints and 0-1 floats are ambiguous: put
  probabilities in ``probability``); strings or other types anywhere a number is required;
  a regression file with a ``probability`` column. Columns other than these three are ignored.

The returned frame is ordered like the expected ids, with a fresh RangeIndex.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from crucible.core.errors import ConfigError, PredictionFileError
from crucible.core.io import InFile, write_parquet
from crucible.matbench.scoring import CLF_THRESHOLD, REGRESSION, check_task_type

log = logging.getLogger(__name__)

SHOW_IDS = 5


def prediction_schema(task_type: str, with_probability: bool) -> pa.Schema:
    check_task_type(task_type)
    fields = [
        pa.field("mbid", pa.string(), nullable=False),
        pa.field("prediction", pa.float64() if task_type == REGRESSION else pa.bool_(), nullable=False),
    ]
    if with_probability:
        fields.append(pa.field("probability", pa.float64(), nullable=False))
    return pa.schema(fields)


def _ids_text(ids: Sequence[Any]) -> str:
    ids = list(ids)
    shown = ", ".join(str(i) for i in ids[:SHOW_IDS])
    more = f", ... ({len(ids) - SHOW_IDS} more)" if len(ids) > SHOW_IDS else ""
    return f"{len(ids)} id(s): {shown}{more}"


class _Ctx:
    """Formats errors as '<file> (fold k): column 'c': problem; N id(s): a, b, ...'."""

    def __init__(self, path: Any, fold: Any) -> None:
        self.where = f"{path} (fold {fold})"

    def error(self, msg: str, ids: Sequence[Any] | None = None) -> PredictionFileError:
        text = f"{self.where}: {msg}"
        if ids is not None:
            text += f"; {_ids_text(ids)}"
        return PredictionFileError(text)


def _string_ids(ctx: _Ctx, col: pa.ChunkedArray) -> np.ndarray:
    typ = col.type
    if pa.types.is_dictionary(typ) and (pa.types.is_string(typ.value_type) or pa.types.is_large_string(typ.value_type)):
        col = col.cast(typ.value_type)
        typ = col.type
    if not (pa.types.is_string(typ) or pa.types.is_large_string(typ)):
        raise ctx.error(f"column 'mbid' must be strings, found {typ}")
    if col.null_count:
        raise ctx.error(f"column 'mbid' has {col.null_count} null value(s)")
    return np.asarray(col.to_pylist(), dtype=object)


def _float_column(ctx: _Ctx, name: str, col: pa.ChunkedArray, ids: np.ndarray) -> np.ndarray:
    typ = col.type
    if not pa.types.is_floating(typ):
        hint = " (integers are not accepted where floats are required)" if pa.types.is_integer(typ) else ""
        raise ctx.error(f"column {name!r} must be float64, found {typ}{hint}")
    if col.null_count:
        nulls = np.asarray(col.is_null().to_pylist(), dtype=bool)
        raise ctx.error(f"column {name!r} has missing (null/NaN) values", ids[nulls])
    values = col.to_numpy().astype(np.float64)  # float16/32 widen exactly
    bad = ~np.isfinite(values)
    if bad.any():
        raise ctx.error(f"column {name!r} has NaN or infinite values", ids[bad])
    return values


def _bool_column(ctx: _Ctx, name: str, col: pa.ChunkedArray, ids: np.ndarray) -> np.ndarray:
    typ = col.type
    if not pa.types.is_boolean(typ):
        hint = ""
        if pa.types.is_floating(typ):
            hint = " (put P(True) in a 'probability' column and the label here)"
        elif pa.types.is_integer(typ):
            hint = " (0/1 integers are not accepted: use bool)"
        raise ctx.error(f"column {name!r} must be bool for a classification task, found {typ}{hint}")
    if col.null_count:
        nulls = np.asarray(col.is_null().to_pylist(), dtype=bool)
        raise ctx.error(f"column {name!r} has missing (null/NaN) values", ids[nulls])
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=bool)


def validate_predictions_table(
    table: pa.Table, task_type: str, expected_mbids: Sequence[str] | None, fold: Any, path: Any
) -> pd.DataFrame:
    """Check a predictions table (see the module docstring); return it as a typed frame.

    With ``expected_mbids`` the rows are checked against and reordered like them.
    """
    check_task_type(task_type)
    ctx = _Ctx(path, fold)
    names = table.column_names
    for required in ("mbid", "prediction"):
        if required not in names:
            raise ctx.error(f"missing column {required!r} (found {names})")
    ids = _string_ids(ctx, table.column("mbid"))
    if task_type == REGRESSION:
        if "probability" in names:
            raise ctx.error("a regression predictions file must not have a 'probability' column")
        pred = _float_column(ctx, "prediction", table.column("prediction"), ids)
        proba = None
    else:
        pred = _bool_column(ctx, "prediction", table.column("prediction"), ids)
        proba = None
        if "probability" in names:
            proba = _float_column(ctx, "probability", table.column("probability"), ids)
            outside = (proba < 0.0) | (proba > 1.0)
            if outside.any():
                raise ctx.error("column 'probability' has values outside [0, 1]", ids[outside])

    dup_mask = pd.Series(ids).duplicated(keep=False).to_numpy()
    if dup_mask.any():
        raise ctx.error("duplicated mbids", sorted(set(ids[dup_mask])))

    df = pd.DataFrame({"mbid": ids, "prediction": pred})
    if proba is not None:
        df["probability"] = proba
        disagree = (proba > CLF_THRESHOLD) != pred
        if disagree.any():
            log.warning(
                "%s: %d label(s) differ from probability > %.1f; labels are scored for 'rocauc', "
                "probabilities for 'rocauc_proba'",
                ctx.where,
                int(disagree.sum()),
                CLF_THRESHOLD,
            )

    if expected_mbids is not None:
        expected = list(expected_mbids)
        if len(set(expected)) != len(expected):
            raise ValueError(f"fold {fold}: the expected mbids contain duplicates")
        have = set(ids)
        missing = [m for m in expected if m not in have]
        wanted = set(expected)
        extra = sorted(m for m in ids if m not in wanted)
        if missing and extra:
            raise ctx.error(
                f"mbids do not match the fold's test set: missing {_ids_text(missing)}; extra {_ids_text(extra)}"
            )
        if missing:
            raise ctx.error("mbids missing from the fold's test set", missing)
        if extra:
            raise ctx.error("mbids not in the fold's test set", extra)
        df = df.set_index("mbid").loc[expected].reset_index()
    df["mbid"] = df["mbid"].astype(object)
    return df


def read_predictions(path: str | os.PathLike, task_type: str, expected_mbids: Sequence[str], fold: int) -> pd.DataFrame:
    """Read and validate one predictions file; rows come back in ``expected_mbids`` order."""
    ctx = _Ctx(path, fold)
    if not Path(path).is_file():
        raise ctx.error("predictions file not found")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise ctx.error(
            f"not a readable parquet file ({exc}); rebuild it: delete it and run `snakemake {path}` "
            "(it is made by `crucible matbench predict` or `crucible matbench import-predictions`)"
        ) from None
    return validate_predictions_table(table, task_type, expected_mbids, fold, path)


def write_predictions(df: pd.DataFrame, path: str | os.PathLike, task_type: str) -> None:
    """Validate ``df`` (same rules as reading, without a fold) and write it atomically.

    The explicit schema is ``mbid: string, prediction: float64|bool[, probability: float64]``;
    a failed validation or write leaves any existing file untouched.
    """
    check_task_type(task_type)
    # A regression frame with 'probability' keeps it, so that validation refuses it as on reading.
    with_proba = "probability" in df.columns
    cols = ["mbid", "prediction"] + (["probability"] if with_proba else [])
    missing = [c for c in cols[:2] if c not in df.columns]
    if missing:
        raise PredictionFileError(f"{path}: cannot write predictions without column(s) {missing}")
    try:
        table = pa.Table.from_pandas(df[cols], preserve_index=False)
    except (pa.ArrowException, ValueError, TypeError) as exc:
        raise PredictionFileError(f"{path}: cannot convert predictions to arrow ({exc})") from None
    clean = validate_predictions_table(table, task_type, None, "n/a (writing)", path)
    write_parquet(clean, path, schema=prediction_schema(task_type, with_proba))


def import_predictions(
    task: str,
    fold: int,
    card: InFile,
    folds: InFile,
    predictions: InFile,
    out: str | os.PathLike,
) -> None:
    """Take in a user-supplied prediction file for one fold of ``task``: validated against the
    fold's test ids (from the folds file) and the task type (from the card), written in our schema.

    Args:
        fold: the test fold the file predicts (0-4)
        predictions: the predictions made elsewhere: parquet with mbid, prediction[, probability]
        out: the checked copy to write: results/matbench/predictions/{model}/{task}/fold_{k}.parquet
        task: as in :func:`crucible.matbench.clean.write_clean_task`
        card: as in :func:`crucible.matbench.folds.write_task_folds`
        folds: as in :func:`crucible.matbench.predict.predict_folds`
    """
    from crucible.core.io import read_json, read_parquet

    task_card = read_json(card)
    if task_card.get("task", task) != task:
        raise ConfigError(f"import-predictions: {card} is the card of {task_card['task']}, not of --task {task}")
    task_type = task_card["task_type"]
    table = read_parquet(folds, columns=["mbid", "fold"])
    expected = table.loc[table["fold"] == fold, "mbid"].tolist()
    write_predictions(read_predictions(predictions, task_type, expected, fold), out, task_type)
