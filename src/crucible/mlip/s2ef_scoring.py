"""Scoring of an s2ef stage: single-point energies and forces against reference frames.

The prediction side (``predictions_table(frames, calculator_name, calc)``) lives with the
calculators; this module fixes the table contract both sides share
(:data:`S2EF_PREDICTION_SCHEMA`) and scores such a table with FAIRChem's s2ef metrics
(:class:`crucible.mlip.metrics.Evaluator`).

Frames whose ``status`` is not ``"ok"`` (the calculator failed, timed out, ...) are not
scored but always reported: ``n_frames`` counts every row and ``failures`` counts each
reason, so a model that fails on hard frames cannot look better by silently skipping them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from crucible.core.errors import DataValidationError
from crucible.mlip.metrics import Evaluator

__all__ = [
    "OK",
    "S2EF_BATCH_FRAMES",
    "S2EF_PREDICTION_SCHEMA",
    "s2ef_metric_table",
    "s2ef_table_from_files",
    "score_s2ef",
]

OK = "ok"

_FORCES = pa.list_(pa.list_(pa.float64()))
# One row per frame. energy_pred / forces_pred are null (or NaN) on failure rows; on "ok" rows
# they must be finite and forces must be natoms×3.
S2EF_PREDICTION_SCHEMA: pa.Schema = pa.schema(
    [
        pa.field("frame_id", pa.string(), nullable=False),
        pa.field("natoms", pa.int64(), nullable=False),
        pa.field("energy_ref", pa.float64(), nullable=False),
        pa.field("energy_pred", pa.float64(), nullable=True),
        pa.field("forces_ref", _FORCES, nullable=False),
        pa.field("forces_pred", _FORCES, nullable=True),
        pa.field("status", pa.string(), nullable=False),
    ]
)

# Frames per Evaluator.update. Pooled metrics do not depend on it beyond float summation
# order; it is fixed (and rows are sorted by frame_id) so that reruns give identical numbers.
S2EF_BATCH_FRAMES = 256


def _forces_array(value: Any, frame_id: str, field: str, natoms: int) -> np.ndarray:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        raise DataValidationError(f"s2ef table, frame {frame_id!r}, field {field!r}: missing on an 'ok' row")
    try:
        arr = np.array([np.asarray(row, dtype=np.float64) for row in value], dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DataValidationError(
            f"s2ef table, frame {frame_id!r}, field {field!r}: not a natoms×3 float array ({exc})"
        ) from None
    if arr.shape != (natoms, 3):
        raise DataValidationError(
            f"s2ef table, frame {frame_id!r}, field {field!r}: shape {arr.shape}, expected ({natoms}, 3) from natoms"
        )
    if not np.all(np.isfinite(arr)):
        raise DataValidationError(
            f"s2ef table, frame {frame_id!r}, field {field!r}: non-finite value on an 'ok' row "
            "(the predictions stage should mark such a frame with a failure status)"
        )
    return arr


def _check_columns(table: pd.DataFrame) -> None:
    missing = [name for name in S2EF_PREDICTION_SCHEMA.names if name not in table.columns]
    if missing:
        raise DataValidationError(f"s2ef table: missing column(s) {missing}; expected {S2EF_PREDICTION_SCHEMA.names}")
    ids = table["frame_id"]
    if ids.isna().any():
        raise DataValidationError(
            f"s2ef table: field 'frame_id' is null in row(s) {np.flatnonzero(ids.isna().to_numpy()).tolist()}"
        )
    duplicated = ids[ids.duplicated()].unique().tolist()
    if duplicated:
        raise DataValidationError(f"s2ef table: duplicate frame_id(s) {sorted(map(str, duplicated))[:10]}")
    status = table["status"]
    bad = [str(fid) for fid, s in zip(ids, status) if not isinstance(s, str) or not s]
    if bad:
        raise DataValidationError(f"s2ef table: field 'status' is empty or null for frame(s) {sorted(bad)[:10]}")


def score_s2ef(table: pd.DataFrame) -> dict[str, Any]:
    """Score one model's s2ef predictions table (see :data:`S2EF_PREDICTION_SCHEMA`).

    Returns ``{"metrics": Evaluator("s2ef").compute() over the "ok" rows, "n_frames": rows,
    "n_ok": scored rows, "failures": {status: count} for every other status, "n_implausible": "ok"
    rows beyond the physical bounds (:func:`crucible.potentials.spec.implausible_reason`: scored as
    the Evaluator scores them, counted beside)}``. With no "ok" row every metric is NaN with
    ``total = numel = 0``.
    """
    from crucible.potentials.spec import implausible_reason

    _check_columns(table)
    ordered = table.sort_values("frame_id", kind="stable")
    ok = ordered[ordered["status"] == OK]
    failures = ordered.loc[ordered["status"] != OK, "status"].value_counts()

    evaluator = Evaluator("s2ef")
    implausible = 0
    records = list(
        ok[["frame_id", "natoms", "energy_ref", "energy_pred", "forces_ref", "forces_pred"]].itertuples(index=False)
    )
    for start in range(0, len(records), S2EF_BATCH_FRAMES):
        chunk = records[start : start + S2EF_BATCH_FRAMES]
        natoms, e_ref, e_pred, f_ref, f_pred = [], [], [], [], []
        for frame_id, n, er, ep, fr, fp in chunk:
            if n is None or pd.isna(n) or int(n) != n or int(n) < 1:
                raise DataValidationError(
                    f"s2ef table, frame {frame_id!r}, field 'natoms': {n!r} is not a positive integer"
                )
            n = int(n)
            for field, value in (("energy_ref", er), ("energy_pred", ep)):
                if value is None or not np.isfinite(value):
                    raise DataValidationError(
                        f"s2ef table, frame {frame_id!r}, field {field!r}: {value!r} on an 'ok' row"
                    )
            natoms.append(n)
            e_ref.append(float(er))
            e_pred.append(float(ep))
            f_ref.append(_forces_array(fr, frame_id, "forces_ref", n))
            f_pred.append(_forces_array(fp, frame_id, "forces_pred", n))
            implausible += implausible_reason(float(ep), f_pred[-1], n) is not None
        natoms_arr = np.asarray(natoms, dtype=np.int64)
        evaluator.update(
            {"energy": np.asarray(e_pred), "forces": np.concatenate(f_pred), "natoms": natoms_arr},
            {"energy": np.asarray(e_ref), "forces": np.concatenate(f_ref), "natoms": natoms_arr},
        )
    return {
        "metrics": evaluator.compute(),
        "n_frames": int(len(table)),
        "n_ok": int(len(ok)),
        "failures": {str(reason): int(count) for reason, count in sorted(failures.items())},
        "n_implausible": implausible,
    }


def s2ef_metric_table(scores_by_model: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """One row per model (sorted by name): ``model``, each metric's value, ``n_frames``, ``n_failed``,
    ``n_implausible`` (scored frames beyond the physical bounds) and ``potential`` (the scores' provenance text, "" when they carry none).

    Metric columns follow the s2ef key order; a key some model lacks is NaN for it.
    """
    keys: list[str] = []
    for scores in scores_by_model.values():
        for key in scores["metrics"]:
            if key not in keys:
                keys.append(key)
    rows = []
    for model in sorted(scores_by_model):
        scores = scores_by_model[model]
        row: dict[str, Any] = {"model": model}
        for key in keys:
            record = scores["metrics"].get(key)
            row[key] = float(record["metric"]) if record is not None else np.nan
        row["n_frames"] = int(scores["n_frames"])
        row["n_failed"] = int(sum(scores["failures"].values()))
        row["n_implausible"] = int(scores.get("n_implausible", 0))
        row["potential"] = str(scores.get("potential", ""))
        rows.append(row)
    columns = ["model", *keys, "n_frames", "n_failed", "n_implausible", "potential"]
    table = pd.DataFrame(rows, columns=columns)
    table = table.astype(
        {
            "model": "string",
            **{k: "float64" for k in keys},
            "n_frames": "int64",
            "n_failed": "int64",
            "n_implausible": "int64",
            "potential": "string",
        }
    )
    return table


def s2ef_table_from_files(paths: Sequence[str | os.PathLike]) -> pd.DataFrame:
    """The s2ef metric table from prediction files laid out as ``.../{dataset}/{model}.parquet``:
    one block of rows per dataset (``s2ef_metric_table`` of its models), with a dataset column and
    the provenance of the potential stored with each file."""
    from crucible.core.io import read_parquet
    from crucible.potentials.provenance import provenance_text, read_provenance

    by_dataset: dict[str, dict[str, dict]] = {}
    for path in sorted(Path(p) for p in paths):
        models = by_dataset.setdefault(path.parent.name, {})
        if path.stem in models:
            raise DataValidationError(f"{path}: model {path.stem!r} given twice for dataset {path.parent.name!r}")
        try:
            models[path.stem] = {**score_s2ef(read_parquet(path)), "potential": provenance_text(read_provenance(path))}
        except DataValidationError as exc:
            raise DataValidationError(f"{path}: {exc}") from exc
    blocks = []
    for dataset in sorted(by_dataset):
        table = s2ef_metric_table(by_dataset[dataset])
        table.insert(0, "dataset", dataset)
        blocks.append(table)
    return pd.concat(blocks, ignore_index=True)
