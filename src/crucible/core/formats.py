"""Every record format a user hands crucible, declared in one place and checked the same way.

A format is a :class:`Format`: its name, what it is, and a JSON schema (draft 2020-12, checked
with ``jsonschema``, the library that already checks the config) for each record it holds.
Records come from the bounded reader (:mod:`crucible.core.reading`) and the strict JSON parser
(:mod:`crucible.core.strict_json`) and are validated here against their declaration, so that
every family's reader gets typed records or a :class:`~crucible.core.errors.DataValidationError`
naming the file, the line (member, record) and the field, never a traceback and never a
silently dropped or rounded value:

* an integer is an integer: not ``true``, not ``3.0``; ranges as declared;
* numbers written in text (answers, sample numbers in file names): ASCII digits only, see
  :func:`whole_number`.

Why ``jsonschema`` rather than pydantic: it is already a direct dependency (the config schema),
the declarations are plain data that tests and the fuzz contract can walk field by field, and
its errors carry the path of the failing field, which is what the messages must name.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

from crucible.core.errors import DataValidationError
from crucible.core.strict_json import field_path

# that stores them (int64) and every sum over them stays exact.
MAX_INDEX = 2**31 - 1


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
