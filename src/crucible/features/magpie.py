"""Vectorized Magpie composition features, equal to matminer's ``ElementProperty`` "magpie" preset.

matminer featurizes one ``pymatgen.Composition`` at a time (about a millisecond each). Here all
formulas are parsed into one long (row, element, amount) table and the 22 properties x 6
statistics are computed with numpy over all rows at once.

What has to agree with matminer 0.10.1, and why it is done the way it is:

- Element data: ``MagpieData(impute_nan=True)`` reads line ``Z`` of each
  ``utils/data_files/magpie_elementdata/<property>.table`` for Z = 1..118 with ``float()``;
  unreadable or missing lines become NaN and are then replaced by the ``np.nanmean`` of that
  property over the 118 elements. We read the same installed files at run time, each pinned by
  SHA-256 (roles ``features/magpie/<property>`` of config/sources.yaml).
- Weights are the raw amounts of ``Composition(formula).element_composition``, in that
  composition's element order (first appearance in the formula), not fractions. They matter
  beyond ``np.average``'s normalisation: ``mode`` takes the minimum value among elements whose
  amount ``np.isclose``-matches the largest amount, and ``isclose``'s absolute tolerance acts on
  the raw amounts.
- ``mean`` and ``avg_dev`` use ``np.average``; numpy's summation order (sequential below 8
  terms, eight accumulators above) decides the last bit. Rows are therefore grouped by their
  number of elements and reduced along a contiguous last axis of exactly that length, which
  makes numpy run the same summation as it does for matminer's 1-D arrays: the values come out
  bit-identical, not just close (an ``avg_dev`` of 1e-16 vs 0 would fail any relative test).
- Formula parsing follows pymatgen's ``Composition`` (:mod:`crucible.features.formulas`).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from functools import lru_cache
from typing import TYPE_CHECKING, Sequence

import numpy as np

from crucible.core.errors import DataValidationError
from crucible.features.formulas import N_Z, FormulaError, Parsed, parse_formulas

if TYPE_CHECKING:  # imported by magpie_features: the Snakemake process imports this module for
    import pandas as pd  # MAGPIE_VERSION at start-up and must not pay for pandas there

# Bump when our own code changes in a way that can change output.
_ALGORITHM_REVISION = "1"

FEATURES: tuple[str, ...] = (
    "Number",
    "MendeleevNumber",
    "AtomicWeight",
    "MeltingT",
    "Column",
    "Row",
    "CovalentRadius",
    "Electronegativity",
    "NsValence",
    "NpValence",
    "NdValence",
    "NfValence",
    "NValence",
    "NsUnfilled",
    "NpUnfilled",
    "NdUnfilled",
    "NfUnfilled",
    "NUnfilled",
    "GSvolume_pa",
    "GSbandgap",
    "GSmagmom",
    "SpaceGroupNumber",
)
STATS: tuple[str, ...] = ("minimum", "maximum", "range", "mean", "avg_dev", "mode")
COLUMNS: tuple[str, ...] = tuple(f"MagpieData {stat} {feat}" for feat in FEATURES for stat in STATS)

# np.isclose defaults, as used by matminer's PropertyStats.mode.
_MODE_RTOL, _MODE_ATOL = 1e-5, 1e-8


# ---------------------------------------------------------------------------------------------
# element property tables


TABLE_ROLE = "features/magpie/{}"  # matminer's <property>.table files, pinned in config/sources.yaml


def _parse_table(text: str) -> np.ndarray:
    """Values for Z = 1..118 exactly as ``MagpieData`` reads them (before imputation)."""
    lines = text.splitlines(keepends=True)
    values = np.full(N_Z, np.nan)
    for z in range(1, N_Z + 1):
        try:
            values[z - 1] = float(lines[z - 1])
        except (ValueError, IndexError):
            pass
    return values


@lru_cache(maxsize=1)
def _tables() -> tuple[np.ndarray, str]:
    """(property table indexed [Z, feature], with row 0 unused; sha256 of the raw tables)."""
    digest = hashlib.sha256()
    table = np.full((N_Z + 1, len(FEATURES)), np.nan)
    from crucible.sources.pinned_files import pinned

    for j, name in enumerate(FEATURES):
        path = pinned(TABLE_ROLE.format(name))  # checked against its SHA-256 before it is read
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise DataValidationError(f"cannot read matminer's Magpie table {path}: {exc}") from exc
        digest.update(name.encode() + b"\0" + raw + b"\0")
        values = _parse_table(raw.decode("utf-8"))
        # MagpieData(impute_nan=True): NaN -> mean over the 118 elements, in Z order.
        values[np.isnan(values)] = np.nanmean(values)
        table[1:, j] = values
    return table, digest.hexdigest()


def _version() -> str:
    matminer_version = importlib.metadata.version("matminer")
    pymatgen_version = importlib.metadata.version("pymatgen")
    _, table_hash = _tables()
    key = f"{_ALGORITHM_REVISION}|pymatgen {pymatgen_version}|numpy {np.__version__}|{table_hash}"
    return f"{matminer_version}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


MAGPIE_VERSION: str = _version()


# ---------------------------------------------------------------------------------------------
# statistics


def _numpy_sum(terms: Sequence[np.ndarray]) -> np.ndarray:
    """Elementwise sum of ``terms`` in the order numpy's ``sum`` adds a 1-D array of that length.

    Below 8 terms numpy adds sequentially from 0.0; from 8 on (up to 127; a formula has at most
    118 elements) it keeps 8 running sums, combines them pairwise and adds the remainder.
    """
    k = len(terms)
    if k < 8:
        total = terms[0] + 0.0
        for t in terms[1:]:
            total += t
        return total
    acc = [t + 0.0 for t in terms[:8]]
    i = 8
    while i + 8 <= k:
        for j in range(8):
            acc[j] += terms[i + j]
        i += 8
    total = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
    for t in terms[i:]:
        total += t
    return total


def _stats_block(v: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:
    """The 6 statistics for m rows of k elements: v (k, m, P) values, w (k, m) amounts -> out (m, P, 6).

    Each is matminer's PropertyStats applied to a row's 1-D arrays, done slot by slot:
    ``np.average`` for mean/avg_dev (same summation order, see :func:`_numpy_sum`),
    ``min``/``max``, and ``mode`` = minimum value among elements whose amount is
    ``np.isclose`` to the largest amount.
    """
    k, m, p = v.shape
    wcol = [w[j][:, None] for j in range(k)]
    scl = _numpy_sum([w[j] for j in range(k)])[:, None]
    mean = _numpy_sum([v[j] * wcol[j] for j in range(k)]) / scl
    avg_dev = _numpy_sum([np.abs(v[j] - mean) * wcol[j] for j in range(k)]) / scl
    vmin = v[0].copy()
    vmax = v[0].copy()
    for j in range(1, k):
        np.minimum(vmin, v[j], out=vmin)
        np.maximum(vmax, v[j], out=vmax)
    wmax = w[0].copy()
    for j in range(1, k):
        np.maximum(wmax, w[j], out=wmax)
    mode = np.full((m, p), np.inf)
    for j in range(k):
        most = np.isclose(w[j], wmax, rtol=_MODE_RTOL, atol=_MODE_ATOL)
        np.minimum(mode, np.where(most[:, None], v[j], np.inf), out=mode)
    out[:, :, 0] = vmin
    out[:, :, 1] = vmax
    out[:, :, 2] = vmax - vmin
    out[:, :, 3] = mean
    out[:, :, 4] = avg_dev
    out[:, :, 5] = mode


def _featurize_parsed(parsed: Parsed, chunk_rows: int = 16384) -> np.ndarray:
    table, _ = _tables()
    counts = parsed.counts
    n = len(counts)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    # Rows with the same number of elements share one slot layout (and one summation order);
    # they are computed grouped by count, then put back in input order.
    by_count = np.argsort(counts, kind="stable")
    grouped = np.empty((n, len(FEATURES), len(STATS)))
    sorted_counts = counts[by_count]
    for start in range(0, n, chunk_rows):
        stop = min(start + chunk_rows, n)
        for k in np.unique(sorted_counts[start:stop]).tolist():
            lo = start + int(np.searchsorted(sorted_counts[start:stop], k, side="left"))
            hi = start + int(np.searchsorted(sorted_counts[start:stop], k, side="right"))
            rows = by_count[lo:hi]
            idx = offsets[rows][None, :] + np.arange(k)[:, None]  # (k, m)
            _stats_block(table[parsed.z[idx]], parsed.amount[idx], grouped[lo:hi])
    out = np.empty_like(grouped)
    out[by_count] = grouped
    return out.reshape(n, len(COLUMNS))


def magpie_features(formulas: Sequence[object] | pd.Series) -> pd.DataFrame:
    """Magpie features (132 float64 columns, matminer's names and order), one row per formula.

    Each distinct formula is parsed and featurized once. Raises
    :class:`~crucible.core.errors.DataValidationError` (a :class:`FormulaError`) naming the row and
    formula of the first malformed entry: empty, unknown element, negative amount, non-string.
    """
    import pandas as pd

    values = list(formulas)
    codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=False)
    try:
        parsed = parse_formulas(list(uniques))
    except FormulaError as exc:
        # Report the first input row carrying the bad formula, not its index among distinct ones.
        row = int(np.flatnonzero(codes == exc.row)[0])
        value = values[row]
        reason = exc.reason if isinstance(value, str) else f"not a string ({type(value).__name__})"
        raise FormulaError(row, value, reason, more=exc.more) from None
    feats = _featurize_parsed(parsed)
    return pd.DataFrame(feats[codes], columns=list(COLUMNS))


def print_version() -> None:
    """``crucible features version``: the featurizer version (part of the cache file name)."""
    print(MAGPIE_VERSION)
