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
- Formula parsing follows pymatgen's ``Composition``: repeated elements are summed in order of
  appearance starting from 0.0; inside a parenthesised group each occurrence is multiplied by
  the group's factor and then summed, innermost group first; amounts below 1e-8 are dropped;
  negative amounts are an error; the isotope symbols D and T count as hydrogen. Formulas
  outside the plain grammar (whitespace, ``@``, brackets, exponents, ...) are handed to
  pymatgen itself so that they still agree.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from crucible.core.errors import DataValidationError

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

_N_Z = 118
# pymatgen's Composition.amount_tolerance: smaller amounts are dropped, more negative ones refused.
_AMOUNT_TOL = 1e-8
# np.isclose defaults, as used by matminer's PropertyStats.mode.
_MODE_RTOL, _MODE_ATOL = 1e-5, 1e-8

_NUM = r"(?:\d+\.?\d*|\.\d+)"
_PAREN_GRAMMAR_RE = re.compile(rf"(?:[A-Z][a-z]*{_NUM}?|\(|\){_NUM}?)+")
_PAREN_TOKEN_RE = re.compile(rf"([A-Z][a-z]*)({_NUM})?|(\()|\)({_NUM})?")


class FormulaError(DataValidationError):
    """A formula that cannot be featurized; ``row`` is its index in the input."""

    def __init__(self, row: int, formula: object, reason: str, more: int = 0) -> None:
        tail = f" (and {more} more bad formulas)" if more else ""
        super().__init__(f"row {row}: formula {formula!r}: {reason}{tail}")
        self.row = row
        self.formula = formula
        self.reason = reason
        self.more = more


# ---------------------------------------------------------------------------------------------
# element property tables


TABLE_ROLE = "features/magpie/{}"  # matminer's <property>.table files, pinned in config/sources.yaml


def _parse_table(text: str) -> np.ndarray:
    """Values for Z = 1..118 exactly as ``MagpieData`` reads them (before imputation)."""
    lines = text.splitlines(keepends=True)
    values = np.full(_N_Z, np.nan)
    for z in range(1, _N_Z + 1):
        try:
            values[z - 1] = float(lines[z - 1])
        except (ValueError, IndexError):
            pass
    return values


@lru_cache(maxsize=1)
def _tables() -> tuple[np.ndarray, str]:
    """(property table indexed [Z, feature], with row 0 unused; sha256 of the raw tables)."""
    digest = hashlib.sha256()
    table = np.full((_N_Z + 1, len(FEATURES)), np.nan)
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
# formula parsing


@lru_cache(maxsize=1)
def _symbol_to_z() -> dict[str, int]:
    from pymatgen.core.periodic_table import Element

    return {Element.from_Z(z).symbol: z for z in range(1, _N_Z + 1)}


def _resolve_symbol(symbol: str) -> int | None:
    """Atomic number pymatgen's ``get_el_sp`` gives ``symbol`` (D, T -> 1); None if not an element."""
    z = _symbol_to_z().get(symbol)
    if z is not None:
        return z
    from pymatgen.core.periodic_table import Element, get_el_sp

    try:
        el = get_el_sp(symbol)
    except (ValueError, KeyError, TypeError):
        return None
    return int(el.Z) if isinstance(el, Element) else None


def _amounts_by_z(sym_amounts: Iterable[tuple[str, float]]) -> tuple[list[int], list[float]]:
    """Composition(...).element_composition: drop tiny amounts, refuse negative ones, sum by element.

    Summing only matters for the isotopes D and T, which pymatgen keeps apart from H in the
    composition and adds to H in ``element_composition`` (in first-appearance order).
    """
    out: dict[int, float] = {}
    for symbol, amount in sym_amounts:
        if amount < -_AMOUNT_TOL:
            raise ValueError(f"negative amount {amount!r} for {symbol}")
        if abs(amount) >= _AMOUNT_TOL:
            z = _resolve_symbol(symbol)
            if z is None:
                raise ValueError(f"unknown element symbol {symbol!r}")
            out[z] = out.get(z, 0.0) + amount
    out = {z: a for z, a in out.items() if abs(a) >= _AMOUNT_TOL}
    if not out:
        raise ValueError("no element with a non-zero amount")
    return list(out.keys()), list(out.values())


def _parse_parens(formula: str) -> list[tuple[str, float]]:
    """(symbol, amount) in pymatgen's order for formulas with (nested) parentheses."""
    stack: list[list[tuple[str, float]]] = [[]]
    for m in _PAREN_TOKEN_RE.finditer(formula):
        symbol, amount, opening, factor = m.groups()
        if symbol is not None:
            stack[-1].append((symbol, float(amount) if amount else 1.0))
        elif opening is not None:
            stack.append([])
        else:
            if len(stack) == 1:
                raise ValueError("unbalanced ')'")
            members = stack.pop()
            if not members:
                raise ValueError("empty parentheses")
            f = float(factor) if factor else 1.0
            group: dict[str, float] = {}
            for s, a in members:
                group[s] = group.get(s, 0.0) + a * f
            stack[-1].extend(group.items())
    if len(stack) != 1:
        raise ValueError("unbalanced '('")
    total: dict[str, float] = {}
    for s, a in stack[0]:
        total[s] = total.get(s, 0.0) + a
    return list(total.items())


def _parse_one(formula: str) -> tuple[list[int], list[float]]:
    """Slow path for one formula: own parser for parentheses, pymatgen for anything else."""
    if _PAREN_GRAMMAR_RE.fullmatch(formula):
        return _amounts_by_z(_parse_parens(formula))
    if not formula.strip():
        raise ValueError("empty formula")
    from pymatgen.core import Composition

    comp = Composition(formula)  # ValueError for what pymatgen refuses (negative amounts, ...)
    pairs = []
    for sp, amount in comp.element_composition.items():
        pairs.append((getattr(sp, "symbol", str(sp)), float(amount)))
    return _amounts_by_z(pairs)


@dataclass
class _Parsed:
    """Long format: for row r, entries offsets[r]:offsets[r+1] of z/amount, in composition order."""

    z: np.ndarray
    amount: np.ndarray
    counts: np.ndarray


def _symbol_codes(symbols: Iterable[str]) -> np.ndarray:
    """Symbols of up to 3 ASCII letters as one integer each (bytes, big-endian, zero-padded)."""
    return np.array([int.from_bytes(s.encode("ascii").ljust(3, b"\0"), "big") for s in symbols], dtype=np.int64)


@lru_cache(maxsize=1)
def _code_lookup() -> tuple[np.ndarray, np.ndarray]:
    """(sorted symbol codes, atomic numbers) of the 118 plain element symbols."""
    table = _symbol_to_z()
    codes = _symbol_codes(table)
    zs = np.array(list(table.values()), dtype=np.int64)
    order = np.argsort(codes)
    return codes[order], zs[order]


def _next_index(positions: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """For each query q, the smallest p in sorted ``positions`` with p > q."""
    return positions[np.searchsorted(positions, queries, side="right")]


def _parse_fast(formulas: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Vectorized parse of formulas that are plain ``([A-Z][a-z]*(\\d+\\.?\\d*|\\.\\d+)?)+``.

    Works on the bytes of all formulas joined by newlines. Returns (row, z, amount) in
    composition order for the rows it handled, and a mask of rows left to the slow path (any
    other character or shape, and symbols that are not one of the 118 plain element symbols).
    """
    n = len(formulas)
    slow = np.zeros(n, dtype=bool)
    big = "\n".join(formulas)
    b = np.frombuffer(big.encode("ascii", errors="replace"), dtype=np.uint8)
    length = len(b)
    is_nl = b == 10
    nl_pos = np.flatnonzero(is_nl)
    if len(nl_pos) != n - 1 or n == 0:  # a formula holding a newline: no shortcut
        slow[:] = True
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0), slow
    is_upper = (b >= 65) & (b <= 90)
    is_lower = (b >= 97) & (b <= 122)
    is_digit = (b >= 48) & (b <= 57)
    is_dot = b == 46
    byte_row = np.cumsum(is_nl) - is_nl

    # Shape checks: only letters/digits/dots, each formula non-empty and starting with a capital,
    # lowercase only right after a letter.
    bad = ~(is_upper | is_lower | is_digit | is_dot | is_nl)
    prev_letter = np.zeros(length, dtype=bool)
    prev_letter[1:] = is_upper[:-1] | is_lower[:-1]
    bad |= is_lower & ~prev_letter
    slow[byte_row[bad]] = True
    row_start = np.concatenate([[0], nl_pos + 1])
    padded_upper = np.append(is_upper, False)
    slow[~padded_upper[row_start]] = True

    starts = np.flatnonzero(is_upper)
    row = byte_row[starts]
    ends = _next_index(np.append(np.flatnonzero(is_upper | is_nl), length), starts)
    sym_end = _next_index(np.append(np.flatnonzero(~is_lower), length), starts)
    # An amount is digits with at most one dot, not a lone dot.
    cum_dot = np.concatenate([[0], np.cumsum(is_dot)])
    cum_digit = np.concatenate([[0], np.cumsum(is_digit)])
    has_amount = sym_end < ends
    n_dot = cum_dot[ends] - cum_dot[sym_end]
    n_digit = cum_digit[ends] - cum_digit[sym_end]
    slow[row[(n_dot > 1) | (has_amount & (n_digit == 0))]] = True

    # Element symbol -> Z through 3-byte integer codes.
    sym_len = sym_end - starts
    bpad = np.append(b, np.zeros(3, dtype=np.uint8)).astype(np.int64)
    code = bpad[starts] << 16
    code |= np.where(sym_len >= 2, bpad[starts + 1], 0) << 8
    code |= np.where(sym_len >= 3, bpad[starts + 2], 0)
    known_codes, known_z = _code_lookup()
    pos = np.minimum(np.searchsorted(known_codes, code), len(known_codes) - 1)
    found = (known_codes[pos] == code) & (sym_len <= 3)
    slow[row[~found]] = True
    z = known_z[pos]

    keep = ~slow[row]
    row, z, sym_end, ends, has_amount = row[keep], z[keep], sym_end[keep], ends[keep], has_amount[keep]
    amount = np.ones(len(row))
    # numpy's str -> float64 is correctly rounded, the same as Python's float().
    amount[has_amount] = np.array(
        [big[i:j] for i, j in zip(sym_end[has_amount].tolist(), ends[has_amount].tolist())],
        dtype=np.float64,
    )

    # Sum repeated elements in token order (0.0 + a1 + a2, like pymatgen), keep first positions.
    key = row * 128 + z
    if len(key):
        # Only rows with a repeated element need the (slower) grouped sum.
        uniq, first, inverse, counts = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
        if (counts > 1).any():
            acc = np.zeros(len(uniq))
            np.add.at(acc, inverse, amount)
            order = np.sort(first)
            pos_first = np.searchsorted(uniq, key[order])
            row, z, amount = row[order], z[order], acc[pos_first]
    present = np.abs(amount) >= _AMOUNT_TOL
    return row[present], z[present], amount[present], slow


def parse_formulas(formulas: Sequence[object]) -> _Parsed:
    """Parse every formula; raise :class:`FormulaError` naming the first bad row."""
    formulas = list(formulas)
    n = len(formulas)
    if all(isinstance(f, str) for f in formulas):
        fast_idx = np.arange(n, dtype=np.int64)
        r, z, amount, slow_mask = _parse_fast(formulas)
    else:
        fast_idx = np.array([i for i, f in enumerate(formulas) if isinstance(f, str)], dtype=np.int64)
        r, z, amount, slow_mask = _parse_fast([formulas[i] for i in fast_idx.tolist()])
    handled = np.zeros(n, dtype=bool)
    handled[fast_idx] = True
    handled[fast_idx[slow_mask]] = False
    rows = [fast_idx[r]]
    zs = [z]
    amounts = [amount]

    errors: list[tuple[int, object, str]] = []
    s_rows: list[int] = []
    s_z: list[int] = []
    s_amt: list[float] = []
    for i in np.flatnonzero(~handled).tolist():
        f = formulas[i]
        if not isinstance(f, str):
            errors.append((i, f, f"not a string ({type(f).__name__})"))
            continue
        try:
            zz, aa = _parse_one(f)
        except (ValueError, KeyError, TypeError, IndexError) as exc:  # whatever pymatgen raises
            errors.append((i, f, str(exc)))
            continue
        s_rows.extend([i] * len(zz))
        s_z.extend(zz)
        s_amt.extend(aa)
    rows.append(np.asarray(s_rows, dtype=np.int64))
    zs.append(np.asarray(s_z, dtype=np.int64))
    amounts.append(np.asarray(s_amt, dtype=np.float64))
    row_all = np.concatenate(rows)
    counts = np.bincount(row_all, minlength=n)
    # Fast-path rows whose amounts were all below tolerance (e.g. "Fe0").
    for i in np.flatnonzero(handled & (counts == 0)).tolist():
        errors.append((i, formulas[i], "no element with a non-zero amount"))
    if errors:
        errors.sort(key=lambda e: e[0])
        i, f, why = errors[0]
        raise FormulaError(i, f, why, more=len(errors) - 1)
    # Stable sort by row keeps each formula's composition order.
    order = np.argsort(row_all, kind="stable")
    return _Parsed(z=np.concatenate(zs)[order], amount=np.concatenate(amounts)[order], counts=counts)


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


def _featurize_parsed(parsed: _Parsed, chunk_rows: int = 16384) -> np.ndarray:
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
