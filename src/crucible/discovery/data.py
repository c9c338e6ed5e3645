"""The leaderboard's files we read, each through its pinned role: the PBE dimer curves
(``discovery/diatomics/pbe-reference``) and the model cards (``discovery/cards/<model>``) whose
``metrics.diatomics`` block gives the published rows."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from crucible.core import strict_json
from crucible.core.errors import DataValidationError
from crucible.core.io import InFile
from crucible.discovery.metrics import METRICS

REFERENCE_ROLE = "discovery/diatomics/pbe-reference"
CARD_ROLE_PREFIX = "discovery/cards/"
FUNCTIONAL = "PBE"


def card_roles() -> list[str]:
    from crucible.sources.pinned_files import roles

    return list(roles(prefix=CARD_ROLE_PREFIX))


def read_reference(path: InFile | None = None) -> dict[str, dict[str, np.ndarray]]:
    """``{symbol: {distances, energies, forces}}`` of the PBE curves, read through their pin."""
    from crucible.sources.pinned_files import pinned

    return parse_reference(pinned(REFERENCE_ROLE, path))


def parse_reference(path: InFile) -> dict[str, dict[str, np.ndarray]]:
    """The PBE curves of a file of the reference's format (no pin checked: :func:`read_reference`)."""
    doc = strict_json.read_json(path)
    curves = doc.get(FUNCTIONAL) if isinstance(doc, dict) else None
    if not isinstance(curves, dict):
        raise DataValidationError(f"{path}: no {FUNCTIONAL} curves (a top-level object {FUNCTIONAL!r} is expected)")
    out = {}
    for key, curve in curves.items():
        symbol = key.partition("-")[0]
        try:
            out[symbol] = {
                "distances": np.asarray(curve["distances"], dtype=np.float64),
                "energies": np.asarray(curve["energies"], dtype=np.float64),
                "forces": np.asarray(curve.get("forces", []), dtype=np.float64),
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise DataValidationError(f"{path}: {FUNCTIONAL}.{key}: {exc}") from exc
    return out


_DATE = re.compile(r"(\d{4}-\d{2}-\d{2})-diatomics")


def published_row(path: InFile, role: str | None = None) -> dict[str, Any] | None:
    """A card's published diatomics row: ``model`` (its model_key), ``date`` (of its diatomics
    prediction file, else the date the model joined the benchmark) and each metric of
    :data:`~crucible.discovery.metrics.METRICS` (NaN where the card has none); None for a card
    without a diatomics block."""
    from crucible.core.yaml_files import load_mapping
    from crucible.sources.pinned_files import pinned

    path = pinned(role, path) if role else Path(path)
    card = load_mapping(path)
    block = ((card or {}).get("metrics") or {}).get("diatomics")
    if not isinstance(block, dict):
        return None
    pred = block.get("pred_file")
    name = pred.get("name") if isinstance(pred, dict) else pred
    found = _DATE.search(str(name or ""))
    date = found.group(1) if found else str((card.get("dates") or {}).get("benchmark_added", ""))
    row: dict[str, Any] = {"model": str(card.get("model_key") or Path(path).stem), "source": "published", "date": date}
    for m in METRICS:
        value = block.get(m)
        if value is not None and not isinstance(value, (int, float)):
            raise DataValidationError(f"{path}: metrics.diatomics.{m}: {value!r} is not a number")
        row[m] = float(value) if value is not None else math.nan
    row["hardware"] = str(block.get("hardware") or "")
    return row
