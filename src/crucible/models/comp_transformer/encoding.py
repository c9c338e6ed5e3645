"""comp-transformer inputs: formulas -> padded element-index and molar-fraction tensors, and
the element embedding table (a CSV: header row, element symbols in the first column).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

from crucible.core.errors import ConfigError, DataValidationError


@lru_cache(maxsize=None)
def parse_formula(formula: str) -> tuple[tuple[str, float], ...]:
    """(element, molar fraction) pairs of a formula, largest fraction first.

    Cached: Matbench tasks repeat formulas (up to 98% of perovskites rows share one) and
    pymatgen's parser dominates the cost of preparing a batch otherwise.
    """
    from pymatgen.core import Composition

    comp = Composition(formula)
    amounts = {str(el): float(amt) for el, amt in comp.get_el_amt_dict().items() if amt > 0}
    total = sum(amounts.values())
    if not amounts or total <= 0:
        raise ValueError("no element with a positive amount")
    # Sorted so that the token order (and the float summation order) is fixed per formula.
    return tuple(sorted(((el, amt / total) for el, amt in amounts.items()), key=lambda t: (-t[1], t[0])))


def _as_series(X: Any) -> pd.Series:
    if isinstance(X, pd.DataFrame):
        if "formula" in X.columns:
            return X["formula"]
        if X.shape[1] == 1:
            return X.iloc[:, 0]
        raise DataValidationError("comp-transformer: X must be formulas (a Series or a one-column frame)")
    if isinstance(X, pd.Series):
        return X
    return pd.Series(list(X))


def resolve_table_path(element_table: str | Path) -> Path:
    """The element CSV's path. A pinned table's name ('mat2vec', 'magpie') is read where the
    fetch stage extracts it, checked against its pin; anything else is a path."""
    from crucible.models.element_tables import builtin_tables, checked_table

    if str(element_table) in builtin_tables():
        return checked_table(str(element_table), None)
    path = Path(str(element_table))
    if not path.suffix and not path.exists():
        raise ConfigError(
            f"comp-transformer: element_table {str(element_table)!r} is neither a pinned table "
            f"({', '.join(builtin_tables())}) nor a file"
        )
    return path


def load_element_table(path: str | Path) -> tuple[list[str], np.ndarray, str]:
    """Symbols, standardised float32 feature matrix and SHA-256 of an element table CSV.

    Layout of the crabnet tables: header row, first column the element symbol (``element``),
    the other columns the features. Columns are standardised over the elements so that the
    Magpie table (melting points in K next to valence counts) and mat2vec share one scale.
    """
    path = resolve_table_path(path)
    if not path.is_file():
        raise ConfigError(f"comp-transformer: element table {str(path)!r} not found (run the fetch stage)")
    from crucible.core.reading import read_csv

    raw = path.read_bytes()
    table = read_csv(path, index_col=0)  # bounded, a feature column named twice refused
    if table.shape[1] == 0 or table.index.has_duplicates:
        raise DataValidationError(f"{path}: expected one row per element symbol and at least one feature column")
    values = table.to_numpy(dtype=np.float64)
    if not np.isfinite(values).all():
        bad = table.index[~np.isfinite(values).all(axis=1)].tolist()
        raise DataValidationError(f"{path}: non-finite features for elements {bad}")
    std = values.std(axis=0)
    std[std == 0] = 1.0
    values = (values - values.mean(axis=0)) / std
    return [str(s) for s in table.index], values.astype(np.float32), hashlib.sha256(raw).hexdigest()


class _Encoded:
    """Padded element indices and fractions for a set of formulas."""

    def __init__(self, idx: torch.Tensor, frac: torch.Tensor):
        self.idx = idx  # (n, L) int64, 0 = padding, table row + 1 otherwise
        self.frac = frac  # (n, L) float32, 0 for padding
        self.lengths = (idx > 0).sum(dim=1)

    def __len__(self) -> int:
        return self.idx.shape[0]

    def batch(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        width = int(self.lengths[rows].max())
        return self.idx[rows, :width], self.frac[rows, :width]


def encode_formulas(X: Any, symbols: Sequence[str]) -> _Encoded:
    """Turn formulas into padded index/fraction tensors; unknown elements are refused."""
    series = _as_series(X)
    lookup = {s: i + 1 for i, s in enumerate(symbols)}
    parsed: list[tuple[tuple[str, float], ...]] = []
    for label, formula in zip(series.index.tolist(), series.to_numpy()):
        if not isinstance(formula, str) or not formula.strip():
            raise DataValidationError(
                f"comp-transformer: row {label!r}: formula is missing or not a string ({formula!r})"
            )
        try:
            pairs = parse_formula(formula)
        except Exception as exc:  # pymatgen raises several types for bad formulas
            raise DataValidationError(
                f"comp-transformer: row {label!r}: cannot parse formula {formula!r}: {exc}"
            ) from None
        for el, _ in pairs:
            if el not in lookup:
                raise DataValidationError(
                    f"comp-transformer: row {label!r}: formula {formula!r} contains element {el!r}, "
                    f"which is not in the element embedding table ({len(symbols)} elements)"
                )
        parsed.append(pairs)
    width = max((len(p) for p in parsed), default=1)
    idx = np.zeros((len(parsed), width), dtype=np.int64)
    frac = np.zeros((len(parsed), width), dtype=np.float32)
    for i, pairs in enumerate(parsed):
        for j, (el, f) in enumerate(pairs):
            idx[i, j] = lookup[el]
            frac[i, j] = f
    return _Encoded(torch.from_numpy(idx), torch.from_numpy(frac))
