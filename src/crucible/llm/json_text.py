"""JSON values embedded in a language model's free text: the scan both answer parsers share.

A reply is prose with JSON somewhere in it (``Sure! {"answer": 2} Hope this helps``). Each
benchmark decides which of the embedded values is the answer (crystal: the last one of at least
50 characters, as OpenCompass's MP-20 evaluator; reactions: the last object with an ``answer``
key); finding them is one scan, here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from crucible.core.strict_json import RepeatedKey, unique_keys

# A key given twice in one object is no answer (json.loads keeps the last: {"answer": 1, "answer":
# 2} was option 2): the scan raises RepeatedKey and the benchmark counts the reply invalid.
_DECODER = json.JSONDecoder(object_pairs_hook=unique_keys)
_CLOSER = {"{": "}", "[": "]"}

# What a strict decode of hostile text can raise besides JSONDecodeError: a 10^5-deep nest
# (RecursionError), an integer past Python's 4300-digit limit (ValueError), a huge value.
DECODE_ERRORS = (ValueError, RecursionError, MemoryError, OverflowError)


def decode_prefix(text: str, start: int = 0) -> tuple[Any, int] | None:
    """``(value, end)`` of the strict JSON value that starts at ``start`` (trailing text
    ignored), or None when none starts there; :class:`~crucible.core.strict_json.RepeatedKey` (a
    ValueError) when that value gives a key twice."""
    try:
        return _DECODER.raw_decode(text, start)
    except RepeatedKey:
        raise
    except DECODE_ERRORS:
        return None


def embedded_json(text: str, openers: str = "{[") -> Iterator[tuple[Any, int, int]]:
    """``(value, start, end)`` of each JSON value in ``text`` that starts at one of ``openers``
    (``{`` objects, ``[`` arrays), left to right.

    A decoded value moves the scan past its end, so values nested in an already-decoded one are
    never reported; an opener where no value decodes is skipped by one character.
    """
    if not openers or set(openers) - set(_CLOSER):
        raise ValueError(f"openers must be a non-empty subset of '{{[', got {openers!r}")
    # No value can start after the last closing bracket: stopping there gives the same values and
    # keeps texts like "[[[[…" (10^5 openers) linear instead of quadratic.
    last = max(text.rfind(_CLOSER[o]) for o in openers)
    pos = 0
    while pos < last:
        starts = [i for i in (text.find(o, pos) for o in openers) if i >= 0]
        if not starts:
            return
        start = min(starts)
        decoded = decode_prefix(text, start)
        if decoded is None:
            pos = start + 1
            continue
        value, end = decoded
        yield value, start, end
        pos = end
