"""The discovery task's files, in the leaderboard's own formats, each read through its pinned role:
the WBM summary (``discovery/wbm-summary``), a model's ``*-discovery.csv.gz`` predictions
(``discovery/predictions/<model>``) and the ``metrics.discovery`` block of its model card (the
published rows, and the URL, size and MD5 its predictions file is published with)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crucible.core import reading
from crucible.core.errors import DataValidationError, HashMismatchError
from crucible.core.io import InFile
from crucible.discovery.stability import COUNTS, E_FORM_DFT, EACH_TRUE, ID_COLUMN, METRICS, SUBSETS, UNIQUE_PROTOTYPE

WBM_ROLE = "discovery/wbm-summary"
PREDICTIONS_ROLE_PREFIX = "discovery/predictions/"
PREDICTION_PREFIX = "e_form_per_atom"  # the leaderboard's name for a formation-energy column
_DATE = re.compile(r"(\d{4}-\d{2}-\d{2})-discovery")


def predictions_role(model: str) -> str:
    return PREDICTIONS_ROLE_PREFIX + model


def prediction_models() -> list[str]:
    """The models whose predictions file is pinned (one per card with a discovery block)."""
    from crucible.sources.pinned_files import roles

    return [r[len(PREDICTIONS_ROLE_PREFIX) :] for r in roles(prefix=PREDICTIONS_ROLE_PREFIX)]


def _numeric(df: pd.DataFrame, column: str, where: str) -> np.ndarray:
    values = pd.to_numeric(df[column], errors="coerce")
    bad = values.isna() & df[column].notna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise DataValidationError(f"{where}: line {row + 2}: field {column}: {df[column].iloc[row]!r} is not a number")
    return values.to_numpy(dtype=np.float64)


def parse_wbm_summary(path: InFile) -> pd.DataFrame:
    """The summary's hull distance, formation energy and prototype flag by ``material_id`` (no pin
    checked: :func:`read_wbm_summary`)."""
    where = str(path)
    columns = [ID_COLUMN, EACH_TRUE, E_FORM_DFT, UNIQUE_PROTOTYPE]
    df = reading.read_csv(path, usecols=lambda c: c in columns, dtype={ID_COLUMN: str, UNIQUE_PROTOTYPE: str})
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataValidationError(f"{where}: line 1: no column(s) {', '.join(missing)} (the WBM summary's own names)")
    ids = df[ID_COLUMN]
    if ids.isna().any():
        raise DataValidationError(
            f"{where}: line {int(np.flatnonzero(ids.isna().to_numpy())[0]) + 2}: empty {ID_COLUMN}"
        )
    dup = ids[ids.duplicated()]
    if len(dup):
        raise DataValidationError(f"{where}: line {dup.index[0] + 2}: {ID_COLUMN} {dup.iloc[0]!r} given twice")
    flags = df[UNIQUE_PROTOTYPE].str.strip().str.lower()
    odd = ~flags.isin(["true", "false"])
    if odd.any():
        row = int(np.flatnonzero(odd.to_numpy())[0])
        raise DataValidationError(
            f"{where}: line {row + 2}: field {UNIQUE_PROTOTYPE}: {df[UNIQUE_PROTOTYPE].iloc[row]!r} is not True or False"
        )
    out = pd.DataFrame(
        {
            EACH_TRUE: _numeric(df, EACH_TRUE, where),
            E_FORM_DFT: _numeric(df, E_FORM_DFT, where),
            UNIQUE_PROTOTYPE: (flags == "true").to_numpy(),
        },
        index=pd.Index(ids.to_numpy(), name=ID_COLUMN),
    )
    return out


def read_wbm_summary(path: InFile | None = None) -> pd.DataFrame:
    """:func:`parse_wbm_summary` of the pinned summary."""
    from crucible.sources.pinned_files import pinned

    return parse_wbm_summary(pinned(WBM_ROLE, path))


def parse_predictions(path: InFile, column: str | None = None) -> pd.Series:
    """A model's formation energies (eV/atom) by ``material_id``, NaN where a cell is empty:
    ``column``, else the file's one ``e_form_per_atom*`` column (no pin checked:
    :func:`read_predictions`)."""
    where = str(path)
    df = reading.read_csv(path, dtype={ID_COLUMN: str})
    if ID_COLUMN not in df.columns:
        raise DataValidationError(f"{where}: line 1: no column {ID_COLUMN}")
    if column is None:
        found = [c for c in df.columns if str(c).startswith(PREDICTION_PREFIX)]
        if len(found) != 1:
            raise DataValidationError(
                f"{where}: line 1: {len(found)} columns named {PREDICTION_PREFIX}* ({', '.join(found) or 'none'}; "
                f"columns: {', '.join(map(str, df.columns))}); name the prediction column"
            )
        column = found[0]
    elif column not in df.columns:
        raise DataValidationError(f"{where}: line 1: no column {column} (columns: {', '.join(map(str, df.columns))})")
    if df[ID_COLUMN].isna().any():
        raise DataValidationError(
            f"{where}: line {int(np.flatnonzero(df[ID_COLUMN].isna().to_numpy())[0]) + 2}: empty {ID_COLUMN}"
        )
    return pd.Series(_numeric(df, column, where), index=pd.Index(df[ID_COLUMN].to_numpy(), name=ID_COLUMN))


def read_predictions(model: str, path: InFile | None = None, column: str | None = None) -> pd.Series:
    """:func:`parse_predictions` of the pinned predictions file of ``model``."""
    from crucible.sources.pinned_files import pinned

    return parse_predictions(pinned(predictions_role(model), path), column)


def discovery_block(card: InFile) -> dict[str, Any] | None:
    from crucible.core.yaml_files import load_mapping

    block = ((load_mapping(Path(card)) or {}).get("metrics") or {}).get("discovery")
    return block if isinstance(block, dict) else None


def check_card_names_pin(card: InFile, model: str) -> None:
    """The card's ``metrics.discovery.pred_file`` (URL, size, MD5) must be what
    ``config/sources.yaml`` pins for ``model``'s predictions: the card is the publisher's word."""
    from crucible.sources.pinned_files import find_pin, get_artifact, load_sources

    pred = (discovery_block(card) or {}).get("pred_file")
    if not isinstance(pred, dict):
        raise DataValidationError(f"{card}: no metrics.discovery.pred_file block")
    spec = get_artifact(load_sources(), find_pin(predictions_role(model)).artifact)
    file_id = str(pred.get("url", "")).rsplit("/files/", 1)[-1]
    pinned = {"figshare file": spec["url"].rsplit("/", 1)[-1], "size": spec.get("size"), "md5": spec.get("md5")}
    given = {"figshare file": file_id, "size": pred.get("size"), "md5": str(pred.get("md5", "")).lower()}
    for key in pinned:
        if pinned[key] != given[key]:
            raise HashMismatchError(
                f"{card}: metrics.discovery.pred_file: {key} {given[key]!r}, but config/sources.yaml pins "
                f"{pinned[key]!r} for {predictions_role(model)}"
            )


def published_rows(card: InFile) -> list[dict[str, Any]]:
    """A card's published discovery rows, one per subset: ``model`` (its model_key), ``subset``,
    ``date`` (of its predictions file, else the date the model joined the benchmark) and the
    metrics and counts (NaN where the card has none); [] for a card without a discovery block."""
    from crucible.core.yaml_files import load_mapping

    doc = load_mapping(Path(card)) or {}
    block = discovery_block(card)
    if block is None:
        return []
    pred = block.get("pred_file")
    name = pred.get("name") if isinstance(pred, dict) else pred
    found = _DATE.search(str(name or ""))
    date = found.group(1) if found else str((doc.get("dates") or {}).get("benchmark_added", ""))
    rows = []
    for subset in SUBSETS:
        values = block.get(subset)
        if not isinstance(values, dict):
            continue
        row: dict[str, Any] = {"model": str(doc.get("model_key") or Path(card).stem), "subset": subset, "date": date}
        for key in (*METRICS, *COUNTS, "missing_preds"):
            value = values.get(key)
            if value is not None and not isinstance(value, (int, float)):
                raise DataValidationError(f"{card}: metrics.discovery.{subset}.{key}: {value!r} is not a number")
            row[key] = float(value) if value is not None else math.nan
        rows.append(row)
    return rows
