"""Clean stage: one raw source file of a task -> ``results/matbench/data/{task}.parquet``.

The output has ``mbid``, ``formula``, ``structure`` (pymatgen JSON, null for the composition
mirror) and ``target`` (float64, or bool for classification) in the official row order. The row
count and the mean absolute deviation (regression) or fraction true (classification) must equal
the official metadata: a mirror that drifted from upstream stops here, not in a score.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from crucible import __version__
from crucible.core.errors import ConfigError, DataValidationError
from crucible.core.hashes import file_sha256
from crucible.core.io import InFile, write_json, write_parquet
from crucible.matbench.tasks import make_mbids, mirror_role, task_metadata
from crucible.sources.pinned_files import pinned

log = logging.getLogger(__name__)

TOLERANCE = 1e-6

# The values of matbench.source: where a task's raw table comes from (SOURCES elsewhere is the
# sources file, config/sources.yaml).
RAW_ORIGINS = ("composition-mirror", "matminer")


def data_schema(task_type: str) -> pa.Schema:
    target = pa.bool_() if task_type == "classification" else pa.float64()
    return pa.schema([("mbid", pa.string()), ("formula", pa.string()), ("structure", pa.string()), ("target", target)])


def _as_target(values: pd.Series, task_type: str, source_file: str, column: str) -> pd.Series:
    if task_type == "classification":
        if values.dtype == bool:
            return values.astype(bool)
        numeric = pd.to_numeric(values, errors="coerce")
        bad = ~numeric.isin([0, 1])
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise DataValidationError(
                f"{source_file}: row {i}, field {column!r}: {values.iloc[i]!r} is not a boolean label (0/1)"
            )
        return numeric.astype(bool)
    numeric = pd.to_numeric(values, errors="coerce").astype("float64")
    bad = ~np.isfinite(numeric.to_numpy())
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataValidationError(
            f"{source_file}: row {i}, field {column!r}: {values.iloc[i]!r} is not a finite number"
        )
    return numeric


def read_mirror(task: str, csv_path: str | os.PathLike, meta: dict[str, Any]) -> pd.DataFrame:
    """The crabnet wheel's ``formula,target`` CSV (upstream row order, formulas only)."""
    raw = pd.read_csv(csv_path, dtype={"formula": "string"}, keep_default_na=False, na_values=[""])
    for column in ("formula", "target"):
        if column not in raw.columns:
            raise DataValidationError(f"{csv_path}: missing column {column!r} (has {list(raw.columns)})")
    empty = raw["formula"].isna() | (raw["formula"].str.strip() == "")
    if empty.any():
        i = int(np.flatnonzero(empty.to_numpy())[0])
        raise DataValidationError(f"{csv_path}: row {i}, field 'formula': empty")
    return pd.DataFrame(
        {
            "formula": raw["formula"].astype(str).to_numpy(),
            "structure": pd.Series([None] * len(raw), dtype="object"),
            "target": _as_target(raw["target"], meta["task_type"], str(csv_path), "target").to_numpy(),
        }
    )


def _formula_of(value: Any) -> str:
    # Structure tasks get the unreduced formula of the cell without spaces ("K4Mn4O8"), the
    # same form the composition mirror carries.
    if isinstance(value, str):
        return value
    composition = getattr(value, "composition", value)
    return composition.formula.replace(" ", "")


def read_matminer(task: str, json_path: str | os.PathLike, meta: dict[str, Any]) -> pd.DataFrame:
    """The upstream matminer ``.json.gz`` (a pandas frame with pymatgen objects)."""
    from matminer.utils.io import load_dataframe_from_json

    frame = load_dataframe_from_json(str(json_path), pbar=False)
    input_column = meta["input_type"]
    for column in (input_column, meta["target"]):
        if column not in frame.columns:
            raise DataValidationError(f"{json_path}: missing column {column!r} (has {list(frame.columns)})")
    inputs = frame[input_column]
    formulas, structures = [], []
    for i, value in enumerate(inputs):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            raise DataValidationError(f"{json_path}: row {i}, field {input_column!r}: missing")
        if input_column == "structure":
            if not hasattr(value, "lattice"):
                raise DataValidationError(f"{json_path}: row {i}, field 'structure': not a pymatgen Structure")
            structures.append(value.to_json())
        else:
            structures.append(None)
        formulas.append(_formula_of(value))
    return pd.DataFrame(
        {
            "formula": formulas,
            "structure": pd.Series(structures, dtype="object"),
            "target": _as_target(frame[meta["target"]], meta["task_type"], str(json_path), meta["target"]).to_numpy(),
        }
    )


def mean_absolute_deviation(values: np.ndarray) -> float:
    return float(np.mean(np.abs(values - np.mean(values))))


def check_against_metadata(df: pd.DataFrame, task: str, meta: dict[str, Any], source_file: str) -> dict[str, float]:
    if len(df) != meta["n_samples"]:
        raise DataValidationError(
            f"{source_file}: {task} has {len(df)} rows, official metadata says {meta['n_samples']}"
        )
    y = df["target"].to_numpy()
    if meta["task_type"] == "regression":
        measured, official, name = mean_absolute_deviation(y.astype(float)), float(meta["mad"]), "mad"
    else:
        measured, official, name = float(np.mean(y.astype(float))), float(meta["frac_true"]), "frac_true"
    if abs(measured - official) > TOLERANCE:
        raise DataValidationError(
            f"{source_file}: {task} {name} = {measured!r} differs from the official {official!r} by more than {TOLERANCE}"
        )
    return {name: measured}


def clean_task(
    task: str, source: str, raw_path: str | os.PathLike, metadata: dict[str, Any], sources: Any = None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read, type, id and check one task; return the table and its task card.

    The composition mirror's table is checked against its pin in ``config/sources.yaml``
    (``sources``: another sources file or document); a matminer download against the pin of its
    catalogue, by the caller that knows it (``crucible matbench clean --raw-sha256``).
    """
    meta = task_metadata(metadata, task)
    reader = {"composition-mirror": read_mirror, "matminer": read_matminer}.get(source)
    if reader is None:
        raise DataValidationError(f"unknown source {source!r}; known: {', '.join(RAW_ORIGINS)}")
    if source == "composition-mirror":
        raw_path = pinned(mirror_role(task), raw_path, sources=sources)
    body = reader(task, raw_path, meta)
    df = pd.DataFrame({"mbid": make_mbids(task, len(body)), **{c: body[c] for c in body.columns}})
    stats = check_against_metadata(df, task, meta, str(raw_path))
    card = {
        "task": task,
        "task_type": meta["task_type"],
        "input_type": meta["input_type"],
        "target": meta["target"],
        "unit": meta.get("unit"),
        "n": int(len(df)),
        **stats,
        "official": {k: meta[k] for k in ("n_samples", "mad", "frac_true") if k in meta},
        "source": source,
        # What a model built on this table can see: structures, or formulas only.
        "inputs_available": "structure" if df["structure"].notna().any() else "composition",
        "raw_file": {"path": Path(raw_path).name, "sha256": file_sha256(raw_path)},
        "crucible_version": __version__,
    }
    return df, card


def provenance(metadata_path: str | os.PathLike, artifacts: list[str] | None = None) -> dict[str, Any]:
    """The task card's ``provenance``: the metadata file's hash and, given as ``name=sha256``
    pairs, the artifact the raw file came from."""
    bad = [kv for kv in artifacts or [] if "=" not in kv]
    if bad:
        raise ConfigError(f"--artifact takes name=sha256 pairs, got {bad}")
    return {
        "metadata_file": {"path": Path(metadata_path).name, "sha256": file_sha256(metadata_path)},
        **({"artifact": dict(kv.split("=", 1) for kv in artifacts)} if artifacts else {}),
    }


def write_clean(
    df: pd.DataFrame, card: dict[str, Any], out_data: str | os.PathLike, out_card: str | os.PathLike
) -> None:
    write_parquet(df, out_data, schema=data_schema(card["task_type"]))
    write_json(card, out_card)


def write_clean_task(
    task: str,
    source: str,
    raw: InFile,
    metadata: InFile,
    out_data: str | os.PathLike,
    out_card: str | os.PathLike,
    raw_sha256: str | None = None,
    artifact: list[str] | None = None,
) -> None:
    """The clean stage: ``raw`` (from ``source``) -> the typed task table and its card, with the
    metadata file's and the artifact's provenance. A matminer download is checked against
    ``raw_sha256`` here (the mirror's table by its role, in :func:`clean_task`).

    Args:
        source: where --raw comes from: the composition mirror (formulas) or matminer's upstream file
            (structures)
        raw: crabnet CSV (mirror) or matminer .json.gz
        metadata: the official dataset metadata (checked against its pin)
        out_data: the clean task table to write: results/matbench/data/{task}.parquet
        out_card: the task card to write: results/matbench/data/{task}.json
        raw_sha256: pinned SHA-256 of --raw: refuse the file if it differs
        artifact: provenance as name=sha256 pairs
        task: Matbench task, e.g. matbench_steels
    """
    from crucible.matbench.tasks import load_metadata
    from crucible.sources.pinned_files import verify_pinned

    if raw_sha256 and source == "matminer":
        verify_pinned(raw, raw_sha256, "raw task file", "matminer's catalogue (or matbench.matminer.sha256)")
    df, card = clean_task(task, source, raw, load_metadata(metadata))
    card["provenance"] = provenance(metadata, artifact)
    write_clean(df, card, out_data, out_card)
