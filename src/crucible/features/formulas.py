"""Chemical formulas parsed as pymatgen's ``Composition`` parses them, for many rows at once.

Repeated elements are summed in order of appearance starting from 0.0; inside a parenthesised
group each occurrence is multiplied by the group's factor and then summed, innermost group
first; amounts below 1e-8 are dropped; negative amounts are an error; the isotope symbols D and
T count as hydrogen. Formulas outside the plain grammar (whitespace, ``@``, brackets, exponents,
...) are handed to pymatgen itself so that they still agree. The result is one long (row,
element, amount) table in each composition's element order, which
:mod:`crucible.features.magpie` reduces to its statistics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Sequence

import numpy as np

from crucible.core.errors import DataValidationError

N_Z = 118  # elements 1..118, as pymatgen and the Magpie tables know them
# pymatgen's Composition.amount_tolerance: smaller amounts are dropped, more negative ones refused.
_AMOUNT_TOL = 1e-8

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


@lru_cache(maxsize=1)
def _symbol_to_z() -> dict[str, int]:
    from pymatgen.core.periodic_table import Element

    return {Element.from_Z(z).symbol: z for z in range(1, N_Z + 1)}


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
class Parsed:
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


def parse_formulas(formulas: Sequence[object]) -> Parsed:
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
    return Parsed(z=np.concatenate(zs)[order], amount=np.concatenate(amounts)[order], counts=counts)
