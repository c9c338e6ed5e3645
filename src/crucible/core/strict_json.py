"""The strict JSON parser every JSON a user gives goes through.

A key given twice in one object, ``NaN``/``Infinity``, numbers that overflow to infinity
(``1e309``) and lone surrogates (``"\\ud800"``, named by line and field) are refused, not
resolved to the last value or to a float: a :class:`~crucible.core.errors.DataValidationError`
naming the file, the line and the field. The text comes through the bounded reader
(:func:`crucible.core.reading.read_text`).
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any, Iterator

from crucible.core.errors import DataValidationError
from crucible.core.reading import read_text


class _Refused(ValueError):
    pass


class RepeatedKey(_Refused):
    """A key given twice in one JSON object (``json.loads`` keeps the last one)."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` of every JSON a user gives: a repeated key is :class:`RepeatedKey`."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise RepeatedKey(f"key {key!r} is given twice in one object (which one is meant?)")
        out[key] = value
    return out


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {text[:40]} does not fit a float (it overflows to infinity)")
    return value


def _long_int(text: str) -> int:
    if len(text) > 400:  # int() of a long digit string is quadratic; no field of ours is that long
        raise _Refused(f"the integer {text[:20]}... has {len(text)} digits")
    return int(text)


# \uD800-\uDFFF escapes: a pair is one character, one alone is no character at all
_ESCAPE = re.compile(r"(\\+)u([dD][89a-fA-F][0-9a-fA-F]{2})")
_SURROGATES = re.compile("[\ud800-\udfff]")
_NOT_UNICODE = "a lone surrogate, which is not valid Unicode"


def _lone_surrogate(value: Any, text: str) -> str | None:
    """Where ``value`` (parsed from ``text``) holds a lone surrogate, else None; walked only when
    the text has such an escape."""
    line, low_at = None, -1
    for m in _ESCAPE.finditer(text):
        start = m.end(1) - 1
        if len(m.group(1)) % 2 == 0 or start == low_at:  # an escaped backslash, or a pair's second half
            continue
        if int(m.group(2), 16) < 0xDC00 and re.match(r"\\u[dD][c-fC-F]", text[m.end() : m.end() + 4]):
            low_at = m.end()
            continue
        line = text.count("\n", 0, start) + 1
        break
    at = f"line {line}: " if "\n" in text.strip() else ""
    stack: list[tuple[tuple, Any]] = [((), value)] if line else []
    while stack:
        here, item = stack.pop()
        if isinstance(item, str) and _SURROGATES.search(item):
            return f"{at}field {field_path(here) or '(the record)'}: text holds {_NOT_UNICODE}"
        pairs = (
            list(item.items()) if isinstance(item, dict) else list(enumerate(item)) if isinstance(item, list) else []
        )
        for k, _ in pairs:
            if isinstance(k, str) and _SURROGATES.search(k):
                return f"{at}field {field_path(here) or '(the record)'}: the key {ascii(k)} holds {_NOT_UNICODE}"
        stack.extend(((*here, k), v) for k, v in reversed(pairs))
    return None


def parse_json(text: str, where: str) -> Any:
    """``json.loads`` that refuses repeated keys, NaN/Infinity, overflowing numbers and lone
    surrogates (``"\\ud800"``: text no file can hold, which failed later as a bare UnicodeEncodeError)."""
    try:
        value = json.loads(
            text,
            object_pairs_hook=unique_keys,
            parse_constant=_constant,
            parse_float=_finite_float,
            parse_int=_long_int,
        )
    except _Refused as exc:
        raise DataValidationError(f"{where}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise DataValidationError(
            f"{where}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise DataValidationError(f"{where}: JSON nested too deeply") from None
    why = _lone_surrogate(value, text) if "\\u" in text else None
    if why:
        raise DataValidationError(f"{where}: {why}")
    return value


def read_json(path: str | os.PathLike, limit: int | None = None) -> Any:
    """A whole JSON (or gzipped JSON) file, strictly parsed."""
    return parse_json(read_text(path, limit), str(path))


def iter_json_lines(path: str | os.PathLike, limit: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` per non-blank line of a JSON-lines file, strictly parsed."""
    path = Path(path)
    text = read_text(path, limit)
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        obj = parse_json(line, f"{path}: line {lineno}")
        if not isinstance(obj, dict):
            raise DataValidationError(f"{path}: line {lineno}: expected a JSON object, got {type(obj).__name__}")
        yield lineno, obj


def field_path(parts: Any) -> str:
    """A field's place in a parsed record, as messages name it: ``a.b[2].c``."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text
