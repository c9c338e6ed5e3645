"""Turn a model's response text into lattice parameters and fractional coordinates.

Exactly the extraction of OpenCompass's ``MP20Evaluator`` (``opencompass/datasets/mp20/mp20.py`` in
open-compass/opencompass; PyPI ``opencompass==0.5.4``: ``_extract_last_large_json`` called with
``min_length=50``, then the tag patterns and the forgiving parse):

1. look for ``<material>…</material>`` (m1), ``output:\\n…\\n </think>`` (m2) and a
   ````` ```json…``` ````` block (m3), first occurrence each, non-greedy;
2. none found: the last JSON value in the text whose source is at least 50 characters long;
3. otherwise the captured text, m3 before m2 before m1, goes through a forgiving parse
   (strict JSON of the leading value, then a Python literal of the first-``{``-to-last-``}`` span,
   then the span with quotes and keywords rewritten);
4. lattice from a, b, c (default 0), alpha, beta, gamma (default 90), each through ``float``;
   coordinates ``[float(x) for x in site["coordinate"]]``. Element labels are ignored: the
   scorer takes species from the reference.

Instead of raising, every failure returns a :class:`ParseFailure` with a reason, so that the
benchmark can say *why* an item did not match (OpenCompass only counts it as unmatched).

One check goes beyond OpenCompass: the six numbers must make a cell (:func:`cell_problem`, reason
``bad_cell``). OpenCompass builds the matrix from any six floats, so negative lengths (a mirror
image of the right cell) and angles of -90 are scored as matches there, and a flat cell is
unmatched only when the matcher happens to fail on it.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from crucible.core.strict_json import RepeatedKey, unique_keys
from crucible.llm.json_text import DECODE_ERRORS, decode_prefix, embedded_json

if TYPE_CHECKING:
    import numpy as np

MIN_JSON_CHARS = 50  # OpenCompass passes 50 (the helper's own default is 100)

_M1 = re.compile(r"<material>(.*?)</material>", re.DOTALL)
_M2 = re.compile(r"output:\n(.*?)\n </think>", re.DOTALL)
_M3 = re.compile(r"```json(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder(object_pairs_hook=unique_keys)
_TAGS = ("<lattice>", "</lattice>", "<sites>", "</sites>", "<material>", "</material>", "</think>")
_KEYWORDS = re.compile(r"\b(True|False|None)\b")

# Failure reasons, in the order the report lists them.
NO_JSON = "no_json"
BAD_JSON = "bad_json"
BAD_FIELDS = "bad_fields"
WRONG_SITE_COUNT = "wrong_site_count"
BAD_STRUCTURE = "bad_structure"
# The six numbers do not make a cell: a length not positive, an angle outside (0, 180), angles
# that close no parallelepiped, or a (near-)zero volume (:func:`cell_problem`)
BAD_CELL = "bad_cell"
# A CIF answer holding more than one data block: which crystal is the answer is not said
SEVERAL_BLOCKS = "several_blocks"
TIMEOUT = "timeout"
NO_MATCH = "no_match"
NO_RESPONSE = "no_response"
# A reply that stopped at max_tokens before its answer was whole: counted apart from malformed
# answers, since the cure is a larger limit (or structured output), not a better model.
CUT_OFF = "cut_off"
# A whole reply that does not follow the schema its request asked the model to follow (structured
# output, crucible.llm.schema_check): unmatched, whatever a lenient reading of its text finds.
OFF_SCHEMA = "off_schema"
REASONS = (
    NO_RESPONSE,
    CUT_OFF,
    OFF_SCHEMA,
    NO_JSON,
    BAD_JSON,
    BAD_FIELDS,
    WRONG_SITE_COUNT,
    BAD_CELL,
    SEVERAL_BLOCKS,
    BAD_STRUCTURE,
    TIMEOUT,
    NO_MATCH,
)
# The failures a reply cut off at max_tokens is relabelled from: its answer's format is unfinished.
FORMAT_FAILURES = (NO_JSON, BAD_JSON, BAD_FIELDS, WRONG_SITE_COUNT)


# A cell below either bound is degenerate: V / (a b c) (1 for a right-angled cell) under 1e-3 is
# a cell flattened onto a plane; 0.1 Å^3 is OpenCompass's own volume floor of a valid structure
# (``_structure_validity`` in its mp20.py), which its match rate does not apply.
MIN_VOLUME_FACTOR = 1e-3
MIN_VOLUME = 0.1  # Å^3


def cell_problem(a: float, b: float, c: float, alpha: float, beta: float, gamma: float) -> str | None:
    """Why six lattice parameters (Å, degrees) make no cell, or None when they make one."""
    for name, value in (("a", a), ("b", b), ("c", c)):
        if not (math.isfinite(value) and value > 0):
            return f"lattice length {name} = {value:g} is not positive"
    angles = {"alpha": alpha, "beta": beta, "gamma": gamma}
    for name, value in angles.items():
        if not (math.isfinite(value) and 0 < value < 180):
            return f"angle {name} = {value:g} is not between 0 and 180 degrees"
    total = alpha + beta + gamma
    if total >= 360 or any(2 * value >= total for value in angles.values()):
        shown = ", ".join(f"{k} = {v:g}" for k, v in angles.items())
        return f"angles {shown} make no cell (each must be less than the sum of the other two, all three under 360)"
    ca, cb, cg = (math.cos(math.radians(x)) for x in (alpha, beta, gamma))
    factor = math.sqrt(max(0.0, 1.0 - ca * ca - cb * cb - cg * cg + 2.0 * ca * cb * cg))
    volume = a * b * c * factor
    if factor < MIN_VOLUME_FACTOR or volume < MIN_VOLUME:
        return f"degenerate cell: volume {volume:.3g} Å^3 (V/abc = {factor:.3g})"
    return None


# "data_" opens a block at the start of a line (CIF words are case-insensitive)
_CIF_BLOCK = re.compile(r"^[ \t]*data_", re.IGNORECASE | re.MULTILINE)


def cif_blocks(text: str) -> int:
    """How many data blocks a CIF text holds (pymatgen reads the first and drops the others)."""
    return len(_CIF_BLOCK.findall(text))


@dataclass(frozen=True)
class ParsedCrystal:
    lattice_parameters: tuple[float, float, float, float, float, float]
    coordinates: list[list[float]]


@dataclass(frozen=True)
class ParseFailure:
    reason: str
    detail: str


def last_large_json(text: str, min_chars: int = MIN_JSON_CHARS):
    """The last JSON value (object or array) in ``text`` whose source spans ``min_chars`` or more.

    Values nested in an already-decoded one are never candidates, large or not (the scan of
    :func:`crucible.llm.json_text.embedded_json`).
    """
    found = None
    for value, start, end in embedded_json(text, "{["):
        if end - start >= min_chars:
            found = value
    return found


def _no_repeated_keys(span: str) -> str:
    """``span`` unchanged, unless a dict literal in it gives a key twice (literal_eval keeps the last)."""
    try:
        tree = ast.parse(span, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return span  # literal_eval refuses it too
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
            repeated = next((k for k in keys if keys.count(k) > 1), None)
            if repeated is not None:
                raise RepeatedKey(f"key {repeated!r} is given twice in one object (which one is meant?)")
    return span


def robust_parse(text: str):
    """OpenCompass's forgiving parse of captured text; raises ValueError when nothing works."""
    for tag in _TAGS:
        text = text.replace(tag, "")
    first = text.find("{")
    if first < 0:
        raise ValueError("no '{' in the captured text")
    text = text[first:]
    decoded = decode_prefix(text, 0)
    if decoded is not None:
        value = decoded[0]
    else:
        span = text[: text.rfind("}") + 1]
        try:
            value = ast.literal_eval(_no_repeated_keys(span))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, OverflowError):
            rewritten = _KEYWORDS.sub(
                lambda m: {"True": "true", "False": "false", "None": "null"}[m.group(1)], span.replace("'", '"')
            )
            try:
                value = _DECODER.decode(rewritten)
            except RepeatedKey:
                raise
            except DECODE_ERRORS as exc:
                raise ValueError(f"neither JSON nor a Python literal: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"top-level value is a {type(value).__name__}, not an object")
    return value


def extract(response: str):
    """The decoded object the scorer reads, or a :class:`ParseFailure`."""
    m1, m2, m3 = _M1.search(response), _M2.search(response), _M3.search(response)
    if not (m1 or m2 or m3):
        try:
            value = last_large_json(response)
        except RepeatedKey as exc:
            return ParseFailure(BAD_JSON, str(exc))
        if value is None:
            return ParseFailure(NO_JSON, f"no tagged block and no JSON value of >= {MIN_JSON_CHARS} characters")
        if not isinstance(value, dict):
            return ParseFailure(BAD_JSON, f"the last large JSON value is a {type(value).__name__}, not an object")
        return value
    captured = (m3 or m2 or m1).group(1)
    try:
        return robust_parse(captured)
    except ValueError as exc:
        return ParseFailure(BAD_JSON, str(exc))


def _as_float(value, field: str) -> float:
    # float() exactly as OpenCompass calls it: "4.2" and True are numbers, "4.2 Å" is not
    try:
        return float(value)
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValueError(f"{field}: {exc}") from None


def parse_crystal_response(response: str | None):
    """:class:`ParsedCrystal` or :class:`ParseFailure` for one response text (None: no response)."""
    if response is None:
        return ParseFailure(NO_RESPONSE, "the generator returned no response")
    if not isinstance(response, str):
        return ParseFailure(NO_RESPONSE, f"response is a {type(response).__name__}, not text")
    data = extract(response)
    if isinstance(data, ParseFailure):
        return data
    try:
        lp = data.get("lattice_parameters", {})
        if not isinstance(lp, dict):
            raise ValueError(f"lattice_parameters is a {type(lp).__name__}")
        params = tuple(_as_float(lp.get(k, 0), k) for k in ("a", "b", "c")) + tuple(
            _as_float(lp.get(k, 90), k) for k in ("alpha", "beta", "gamma")
        )
        coords = []
        for i, site in enumerate(data["atomic_sites"]):
            coords.append([_as_float(x, f"atomic_sites[{i}].coordinate") for x in site["coordinate"]])
    except KeyError as exc:
        return ParseFailure(BAD_FIELDS, f"missing field {exc}")
    except (ValueError, TypeError, AttributeError) as exc:
        return ParseFailure(BAD_FIELDS, str(exc))
    problem = cell_problem(*params)
    if problem is not None:
        return ParseFailure(BAD_CELL, problem)
    return ParsedCrystal(params, coords)


def lattice_matrix(a: float, b: float, c: float, alpha: float, beta: float, gamma: float) -> np.ndarray:
    """Rows = lattice vectors; an impossible angle set gives a flat (zero-volume) cell, not NaN."""
    al, be, ga = (math.radians(x) for x in (alpha, beta, gamma))
    v = (math.cos(al) - math.cos(be) * math.cos(ga)) / math.sin(ga)
    z2 = max(0.0, 1.0 - math.cos(be) ** 2 - v**2)
    import numpy as np  # here: the crystal commands import this module for its names

    return np.array(
        [
            [a, 0.0, 0.0],
            [b * math.cos(ga), b * math.sin(ga), 0.0],
            [c * math.cos(be), c * v, c * math.sqrt(z2)],
        ]
    )
