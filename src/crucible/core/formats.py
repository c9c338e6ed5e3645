"""Every file format a user hands crucible, declared in one place and read through one reader.

A format is a :class:`Format`: its name, what it is, and a JSON schema (draft 2020-12, checked
with ``jsonschema``, the library that already checks the config) for each record it holds. The
readers here bound what they read, parse JSON strictly and validate each record against its
declaration, so that every family's reader gets typed records or a
:class:`~crucible.core.errors.DataValidationError` naming the file, the line (member, record) and the
field, never a traceback and never a silently dropped or rounded value:

* bytes: at most :func:`max_bytes` after decompression (gzip is read as it inflates, so a small
  file that inflates to gigabytes is refused at the bound, not in a ``MemoryError``); archives
  at most :func:`max_members` members; raise either with ``CRUCIBLE_MAX_INPUT_MB`` /
  ``CRUCIBLE_MAX_INPUT_MEMBERS`` in the environment the workflow runs in;
* text: UTF-8 (a byte-order mark is allowed and dropped); anything else is refused at its byte;
* JSON: a key given twice in one object, ``NaN``/``Infinity``, numbers that overflow to
  infinity (``1e309``) and lone surrogates (``"\\ud800"``, named by line and field) are refused,
  not resolved to the last value or to a float; every JSON a user gives is read with
  :func:`parse_json` (YAML: :mod:`crucible.core.yaml_files`);
* an integer is an integer: not ``true``, not ``3.0``; ranges as declared;
* numbers written in text (answers, sample numbers in file names): ASCII digits only, see
  :func:`whole_number`.

Why ``jsonschema`` rather than pydantic: it is already a direct dependency (the config schema),
the declarations are plain data that tests and the fuzz contract can walk field by field, and
its errors carry the path of the failing field, which is what the messages must name.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from crucible.core.errors import DataValidationError

MAX_BYTES_ENV = "CRUCIBLE_MAX_INPUT_MB"
MAX_MEMBERS_ENV = "CRUCIBLE_MAX_INPUT_MEMBERS"
# A CatBench dataset of every Catalysis-Hub reaction is ~100 MB of JSON; 1 GiB leaves room and
# still stops a gzip bomb long before the machine's memory does.
DEFAULT_MAX_MB = 1024
DEFAULT_MAX_MEMBERS = 1_000_000
# Sample numbers and option indices: int32 is far beyond any k a paper scores, and every table
# that stores them (int64) and every sum over them stays exact.
MAX_INDEX = 2**31 - 1


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if not re.fullmatch(r"[0-9]+", raw) or int(raw) < 1:
        raise DataValidationError(f"environment {name}={raw!r}: a positive whole number expected")
    return int(raw)


def max_bytes() -> int:
    """The most bytes a user file may hold once decompressed."""
    return _env_int(MAX_BYTES_ENV, DEFAULT_MAX_MB) * 2**20


def max_members() -> int:
    """The most members (files) an archive or folder of user files may hold."""
    return _env_int(MAX_MEMBERS_ENV, DEFAULT_MAX_MEMBERS)


def _too_big(where: str, limit: int) -> DataValidationError:
    return DataValidationError(
        f"{where}: more than {limit // 2**20} MB once decompressed; if that is meant, raise the bound "
        f"with {MAX_BYTES_ENV}=<MB> in the environment"
    )


def read_limited(fh: Any, where: str, limit: int | None = None) -> bytes:
    """All of a binary stream, refused past ``limit`` bytes (default :func:`max_bytes`)."""
    limit = max_bytes() if limit is None else limit
    try:
        data = fh.read(limit + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise DataValidationError(f"{where}: not readable ({type(exc).__name__}: {exc})") from None
    if len(data) > limit:
        raise _too_big(where, limit)
    return data


def read_bytes(path: str | os.PathLike, limit: int | None = None) -> bytes:
    """A user file's bytes, gunzipped when it is gzip (by its magic number, whatever its name)."""
    path = Path(path)
    try:
        with open(path, "rb") as raw:
            gz = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            if gz:
                with gzip.GzipFile(fileobj=raw) as fh:
                    return read_limited(fh, str(path), limit)
            return read_limited(raw, str(path), limit)
    except FileNotFoundError:
        raise DataValidationError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise DataValidationError(f"{path}: a folder, where a file is expected") from None
    except OSError as exc:
        raise DataValidationError(f"{path}: not readable ({exc.strerror or exc})") from None


def check_size(path: str | os.PathLike, limit: int | None = None) -> None:
    """Refuse a file past the bound once decompressed, reading it in chunks (for files that
    another library then parses itself, such as matminer's datasets)."""
    path = Path(path)
    limit = max_bytes() if limit is None else limit
    total = 0
    try:
        with open(path, "rb") as raw:
            gz = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            fh = gzip.GzipFile(fileobj=raw) if gz else raw
            while chunk := fh.read(2**20):
                total += len(chunk)
                if total > limit:
                    raise _too_big(str(path), limit)
    except (OSError, EOFError, zlib.error) as exc:
        raise DataValidationError(f"{path}: not readable ({type(exc).__name__}: {exc})") from None


def decode(data: bytes, where: str) -> str:
    """UTF-8 text (a leading byte-order mark dropped); a byte that is not UTF-8 is named."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataValidationError(f"{where}: line {line}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None


def read_text(path: str | os.PathLike, limit: int | None = None) -> str:
    return decode(read_bytes(path, limit), str(path))


# --------------------------------------------------------------------------------- strict JSON


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


def read_csv(path: str | os.PathLike, encoding: str = "utf-8", limit: int | None = None, **pandas_kwargs: Any):
    """A user's CSV table as a pandas DataFrame: bounded, decoded (``encoding``, a BOM dropped),
    every column named once (pandas would rename a repeated ``yield`` to ``yield.1`` and read
    the wrong one)."""
    import csv

    import pandas as pd

    where = str(path)
    data = read_bytes(path, limit)
    if encoding.replace("-", "").lower() in ("utf8", "utf8sig"):
        text = decode(data, where)
    else:
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError as exc:
            raise DataValidationError(f"{where}: not {encoding} text (byte {exc.start}: {exc.reason})") from None
    header = next(csv.reader(io.StringIO(text)), [])
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:
        raise DataValidationError(f"{where}: line 1: column(s) {', '.join(map(repr, repeated))} named twice")
    try:
        return pd.read_csv(io.StringIO(text), **pandas_kwargs)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise DataValidationError(f"{where}: cannot read as CSV ({type(exc).__name__}: {exc})") from None


# --------------------------------------------------------------------------------- declarations


def _strict_types():
    """jsonschema's types, but an integer is an int (not a bool, not 3.0) and a number is not a bool."""
    import jsonschema

    base = jsonschema.Draft202012Validator.TYPE_CHECKER

    def is_integer(_checker, value):
        return isinstance(value, int) and not isinstance(value, bool)

    def is_number(_checker, value):
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

    return base.redefine_many({"integer": is_integer, "number": is_number})


_VALIDATORS: dict[int, Any] = {}


def _validator(schema: Mapping[str, Any]):
    key = id(schema)
    if key not in _VALIDATORS:
        import jsonschema

        cls = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=_strict_types())
        _VALIDATORS[key] = cls(schema)
    return _VALIDATORS[key]


def field_path(parts: Any) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def validate(instance: Any, schema: Mapping[str, Any], where: str) -> Any:
    """``instance`` if it matches ``schema``; else the first error, naming the field at fault."""
    import jsonschema

    errors = list(_validator(schema).iter_errors(instance))
    if not errors:
        return instance
    error = jsonschema.exceptions.best_match(errors)
    name = field_path(error.absolute_path)
    value = json.dumps(error.instance, default=str)
    value = value if len(value) <= 60 else value[:57] + "..."
    message = error.message if len(error.message) <= 160 else f"{value} does not match the declared format"
    if error.validator == "required":
        missing = next(r for r in error.validator_value if r not in error.instance)
        name, message = f"{name}.{missing}" if name else str(missing), "missing"
    elif (
        error.validator in ("type", "minimum", "maximum", "minLength", "const", "enum")
        and "description" in error.schema
    ):
        message = f"must be {error.schema['description']}, got {value}"
    elif error.validator == "additionalProperties":
        message = f"unexpected field(s) in {value}"
    elif (
        error.validator in ("anyOf", "oneOf")
        and error.context
        and all(e.validator == "required" for e in error.context)
    ):
        wanted = sorted({str(r) for e in error.context for r in e.validator_value})
        message = f"field {' or '.join(repr(w) for w in wanted)} missing"
    raise DataValidationError(f"{where}: field {name or '(the record)'}: {message}")


INDEX = {"type": "integer", "minimum": 0, "maximum": MAX_INDEX, "description": f"a whole number 0..{MAX_INDEX}"}
NUMBER = {"type": "number", "description": "a finite number"}
TEXT = {"type": "string", "description": "a string"}
NONEMPTY = {"type": "string", "minLength": 1, "description": "a non-empty string"}
OPTIONAL_TEXT = {"type": ["string", "null"], "description": "a string or null"}


@dataclass(frozen=True)
class Format:
    """A user-facing format: ``record`` declares one record (a line, a member, a reaction)."""

    name: str
    description: str
    record: Mapping[str, Any]


FORMATS: dict[str, Format] = {}


def declare(name: str, description: str, record: Mapping[str, Any]) -> Format:
    fmt = Format(name, description, {"$schema": "https://json-schema.org/draft/2020-12/schema", **record})
    FORMATS[name] = fmt
    return fmt


def check(fmt: Format | str, record: Any, where: str) -> Any:
    fmt = FORMATS[fmt] if isinstance(fmt, str) else fmt
    return validate(record, fmt.record, where)


SAMPLES_JSONL = declare(
    "samples-jsonl",
    "crystal samples, one JSON object per line: an item id, a sample number and a CIF or an answer text",
    {
        "type": "object",
        "required": ["id", "sample"],
        "properties": {
            "id": NONEMPTY,
            "sample": INDEX,
            "cif": OPTIONAL_TEXT,
            "response": OPTIONAL_TEXT,
            "error": OPTIONAL_TEXT,
        },
    },
)

SAMPLE_NAME = declare(
    "samples-cif-name",
    "a CIF sample's file name in a folder or tar archive: '<item id>__<sample number>.cif'",
    {"type": "object", "required": ["id", "sample"], "properties": {"id": NONEMPTY, "sample": INDEX}},
)

LLM_RESPONSE = declare(
    "llm-responses",
    "a language model's responses or a replay file: one {id, response, error} per line",
    {
        "type": "object",
        "required": ["id"],
        "properties": {
            "id": NONEMPTY,
            "response": OPTIONAL_TEXT,
            "error": OPTIONAL_TEXT,
            "model": OPTIONAL_TEXT,
            # why the reply ended ("stop", "length": cut off at max_tokens), and its token count
            "finish_reason": OPTIONAL_TEXT,
            "completion_tokens": {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_INDEX},
            "off_schema": OPTIONAL_TEXT,  # why a whole reply breaks its request's schema (llm.schema_check)
        },
    },
)

REACTION_PREDICTIONS = declare(
    "reactions-predictions",
    "crucible's wrapped reaction prediction file: {model, questions_file, questions_sha256, predictions: "
    "{id: index | {key: index}}, invalid: {id: reason}} (RxnOptBench's plain {id: prediction} map is read as is)",
    {
        "type": "object",
        "required": ["questions_sha256", "predictions"],
        "properties": {
            "model": TEXT,
            "questions_file": TEXT,
            "questions_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "predictions": {"type": "object"},
            "invalid": {"type": "object", "additionalProperties": TEXT},
            "cut_off": {"type": "array", "items": TEXT},  # the invalid answers: replies cut off at max_tokens
            "off_schema": {"type": "array", "items": TEXT},  # the invalid answers: replies off their schema
        },
    },
)

CIF_TABLE_ROW = declare(
    "crystal-cif-table-jsonl",
    "a user's crystal dataset as JSON lines: a 'cif' text per line, an id in 'material_id' or 'id', an optional split",
    {
        "type": "object",
        "required": ["cif"],
        "properties": {
            "cif": NONEMPTY,
            "material_id": {"type": ["string", "integer"], "description": "a string or an integer"},
            "id": {"type": ["string", "integer"], "description": "a string or an integer"},
            "split": OPTIONAL_TEXT,
        },
    },
)

_CATBENCH_SYSTEM = {
    "type": "object",
    "required": ["stoi", "energy_ref"],
    "properties": {"stoi": NUMBER, "energy_ref": NUMBER, "atoms_json": TEXT, "ref": TEXT},
    "anyOf": [{"required": ["atoms_json"]}, {"required": ["ref"]}],
}

CATBENCH_REACTION = declare(
    "catbench-json",
    "CatBench's {name}_adsorption.json(.gz): reaction id -> {raw: {key: {stoi, energy_ref, atoms_json | ref}}, "
    "ref_ads_eng, adsorbate_indices}, with a top-level '_structures' map in CatBench >= 1.1.1",
    {
        "type": "object",
        "required": ["raw", "ref_ads_eng"],
        "properties": {
            "raw": {"type": "object", "minProperties": 1, "additionalProperties": _CATBENCH_SYSTEM},
            "ref_ads_eng": NUMBER,
            # absent: detected from the geometry; given: the adsorbate's atoms, so never empty
            "adsorbate_indices": {"type": "array", "items": INDEX, "minItems": 1, "uniqueItems": True},
            "constraint_source": TEXT,
        },
    },
)

CATBENCH_STRUCTURES = declare(
    "catbench-json-structures",
    "CatBench >= 1.1.1's top-level '_structures': structure id -> ASE-JSON text",
    {"type": "object", "additionalProperties": TEXT},
)

CATHUB_CONSTRAINT = declare(
    "cathub-raw-constraint",
    "one entry of a Catalysis-Hub system's 'constraints': an atom index or an ASE constraint dict; "
    "FixAtoms carries kwargs.indices",
    {
        "anyOf": [
            INDEX,
            {
                "type": "object",
                "required": ["name"],
                "properties": {"name": TEXT},
                "if": {"properties": {"name": {"const": "FixAtoms"}}},
                "then": {
                    "required": ["kwargs"],
                    "properties": {
                        "kwargs": {
                            "type": "object",
                            "description": "an object holding 'indices'",
                            "required": ["indices"],
                            "properties": {"indices": {"type": "array", "items": INDEX}},
                        }
                    },
                },
            },
        ]
    },
)


# --------------------------------------------------------------------------------- numbers in text

# The one rule for numbers written in text (an option index after "answer:", a sample number in
# a file name): ASCII digits 0-9 only. Digits of other scripts (Arabic-Indic ٣, full-width ３),
# superscripts (²) and other decimal separators (٫) are refused with that reason, never read as
# some other number: a reader that took them would have to guess a script's decimal point.
ASCII_WHOLE = re.compile(r"[0-9]+")


def non_ascii_digits(text: str) -> str | None:
    """Why ``text`` is not written in ASCII digits, or None."""
    import unicodedata

    for ch in text:
        if not ch.isascii() and (ch.isdigit() or ch.isnumeric() or unicodedata.category(ch) in ("Nd", "No", "Nl")):
            return f"{text!r} is written with {unicodedata.name(ch, 'a non-ASCII digit').lower()!s} ({ch!r}); write numbers in ASCII digits 0-9"
        if not ch.isascii() and unicodedata.category(ch) == "Po" and unicodedata.name(ch, "").endswith("SEPARATOR"):
            return f"{text!r} uses {unicodedata.name(ch).lower()} ({ch!r}); write numbers in ASCII digits 0-9"
    return None


def whole_number(text: str, maximum: int = MAX_INDEX) -> tuple[int | None, str | None]:
    """``(n, None)`` for a whole number 0..maximum in ASCII digits, else ``(None, reason)``."""
    why = non_ascii_digits(text)
    if why:
        return None, why
    if not ASCII_WHOLE.fullmatch(text):
        return None, f"{text!r} is not a whole number written in digits 0-9"
    if len(text) > 12 or int(text) > maximum:
        return None, f"{text} is larger than {maximum}"
    return int(text), None
