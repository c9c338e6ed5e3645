"""Reading prompt sets and replay files, writing response files: the stage's file contract.

Every line is checked as it is read, and a bad one raises an error naming the file, line and
field, so that a benchmark's prompt builder and this stage cannot drift apart silently.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crucible.core.errors import DataValidationError
from crucible.core.formats import LLM_RESPONSE, check
from crucible.core.io import atomic_path
from crucible.core.strict_json import iter_json_lines

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Prompt:
    id: str
    messages: tuple[dict[str, str], ...]
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # The JSON Schema an answer must follow (the benchmark's answer format); a model with
    # ``structured_output: true`` is constrained to it.
    response_schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)


@dataclass
class Completion:
    """One item's outcome: ``response`` text, or ``error`` with the reason (never both)."""

    id: str
    response: str | None = None
    error: str | None = None
    model_id: str | None = None  # what the server says it ran
    usage: dict[str, int] = field(default_factory=dict)
    finish_reason: str | None = None  # "stop", or "length": cut off at max_tokens
    # why a whole reply does not follow the schema its request asked for (crucible.llm.schema_check)
    off_schema: str | None = None


def _read_jsonl(path: Path) -> Iterable[tuple[int, dict]]:
    # strict JSON, bounded, UTF-8: crucible.core.strict_json's one reader of JSON-lines files
    yield from iter_json_lines(path)


def _check_id(path: Path, lineno: int, obj: dict) -> str:
    value = obj.get("id")
    if not isinstance(value, str) or not value:
        raise DataValidationError(f"{path}: line {lineno}: field 'id' must be a non-empty string, got {value!r}")
    return value


def _duplicates(lines: Iterable[tuple[int, str]]) -> list[str]:
    """Each id given on more than one line, with those lines: ``"a (lines 1, 4)"``."""
    where: dict[str, list[int]] = {}
    for lineno, rid in lines:
        where.setdefault(rid, []).append(lineno)
    return [f"{rid} (lines {', '.join(map(str, ls))})" for rid, ls in sorted(where.items()) if len(ls) > 1]


def _name_ids(ids: Iterable[str], limit: int = 10) -> str:
    ids = sorted(ids)
    shown = ", ".join(ids[:limit])
    return f"{shown} (and {len(ids) - limit} more)" if len(ids) > limit else shown


def _check_schema(schema: dict, checked: set[str], where: str) -> None:
    """``schema`` must be a valid JSON Schema: one that is not (``{"type": "objekt"}``) would be sent
    to the server and then fail the answers' check with a traceback. Each distinct schema once."""
    key = json.dumps(schema, sort_keys=True)
    if key in checked:
        return
    from jsonschema import Draft202012Validator, SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        at = "/".join(map(str, exc.path))
        raise DataValidationError(
            f"{where}: not a valid JSON Schema{f' at {at}' if at else ''}: {exc.message}"
        ) from None
    checked.add(key)


def _checked_prompt_lines(path: Path) -> list[tuple[int, dict, Prompt]]:
    """(line number, the whole record, its :class:`Prompt`) per line; ids unique, messages checked."""
    rows: list[tuple[int, dict, Prompt]] = []
    checked: set[str] = set()
    for lineno, obj in _read_jsonl(path):
        pid = _check_id(path, lineno, obj)
        messages = obj.get("messages")
        if not isinstance(messages, list) or not messages:
            raise DataValidationError(f"{path}: line {lineno} (id {pid}): field 'messages' must be a non-empty list")
        for k, msg in enumerate(messages):
            if not isinstance(msg, dict) or msg.get("role") not in ROLES or not isinstance(msg.get("content"), str):
                raise DataValidationError(
                    f"{path}: line {lineno} (id {pid}): messages[{k}] must be {{'role': one of {list(ROLES)}, "
                    f"'content': str}}, got {msg!r}"
                )
        clean = tuple({"role": m["role"], "content": m["content"]} for m in messages)
        meta = obj.get("meta") if isinstance(obj.get("meta"), dict) else {}
        schema = obj.get("response_schema")
        if schema is not None and (not isinstance(schema, dict) or not schema):
            raise DataValidationError(
                f"{path}: line {lineno} (id {pid}): field 'response_schema' must be a JSON Schema object, got {schema!r}"
            )
        if schema is not None:
            _check_schema(schema, checked, f"{path}: line {lineno} (id {pid}): field 'response_schema'")
        rows.append((lineno, obj, Prompt(pid, clean, meta, schema)))
    dup = _duplicates((lineno, p.id) for lineno, _, p in rows)
    if dup:
        raise DataValidationError(f"{path}: duplicated id(s): {_name_ids(dup)}")
    return rows


def read_prompts(path: str | os.PathLike) -> list[Prompt]:
    """The prompt set at ``path``, checked: ids unique, messages a non-empty list of role/content."""
    return [prompt for _, _, prompt in _checked_prompt_lines(Path(path))]


def read_prompt_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The prompt set's records whole, checked as :func:`read_prompts` checks them.

    For a benchmark whose prompt lines carry more than the stage reads (crystal's items hold
    their reference structure): the benchmark reads its own fields, the contract stays checked
    in one place.
    """
    return [obj for _, obj, _ in _checked_prompt_lines(Path(path))]


def prompt_set_hash(prompts: list[Prompt]) -> str:
    """SHA-256 of the ids, messages and answer schemas: what the stage can send, independent of
    ``meta``. A prompt without a schema hashes as before schemas existed."""
    canon = json.dumps(
        [[p.id, list(p.messages)] + ([p.response_schema] if p.response_schema is not None else []) for p in prompts],
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def schema_in_answer_order(schema: Any) -> Any:
    """``schema`` with each object's ``properties`` in the order of its ``required`` list.

    Prompt files are written with sorted keys, which puts properties in alphabetical order;
    constrained decoders (xgrammar, in vLLM and SGLang too) make the model write them in the
    schema's order. ``required`` is a list, so it keeps the order the prompt shows (crystal:
    the lattice, then the sites); the schema means the same either way."""
    if isinstance(schema, list):
        return [schema_in_answer_order(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: schema_in_answer_order(v) for k, v in schema.items()}
    props, required = out.get("properties"), out.get("required")
    if isinstance(props, dict) and isinstance(required, list):
        first = [k for k in required if k in props]
        out["properties"] = {k: props[k] for k in first + [k for k in props if k not in first]}
    return out


def schema_sha256(schema: dict[str, Any] | None) -> str | None:
    """SHA-256 of a JSON Schema in canonical form (key order and spacing do not count)."""
    if schema is None:
        return None
    canon = json.dumps(schema, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def read_replay(path: str | os.PathLike, expected_ids: list[str]) -> dict[str, Completion]:
    """Responses produced elsewhere, one ``{"id", "response"}`` per line (optionally ``"error"``).

    The file must answer exactly the prompt set: missing, extra and duplicated ids are refused,
    each named, because a silently shorter response file would score as a different benchmark.
    """
    path = Path(path)
    rows: list[Completion] = []
    lines: list[tuple[int, str]] = []
    for lineno, obj in _read_jsonl(path):
        rid = _check_id(path, lineno, obj)
        check(LLM_RESPONSE, obj, f"{path}: line {lineno} (id {rid})")
        lines.append((lineno, rid))
        if "response" not in obj:
            raise DataValidationError(f"{path}: line {lineno} (id {rid}): field 'response' is missing")
        response, error = obj["response"], obj.get("error")
        if response is not None and not isinstance(response, str):
            raise DataValidationError(f"{path}: line {lineno} (id {rid}): field 'response' must be a string or null")
        if error is not None and not isinstance(error, str):
            raise DataValidationError(f"{path}: line {lineno} (id {rid}): field 'error' must be a string or null")
        if response is None and not error:
            error = "replay file has no response for this item"
        finish = obj.get("finish_reason")
        if finish is not None and not isinstance(finish, str):
            raise DataValidationError(
                f"{path}: line {lineno} (id {rid}): field 'finish_reason' must be a string or null"
            )
        rows.append(
            Completion(
                rid,
                response,
                None if response is not None else error,
                model_id=obj.get("model") if isinstance(obj.get("model"), str) else None,
                finish_reason=finish if response is not None else None,
                # a response file of this stage is a replay file: its verdict travels with it
                off_schema=obj.get("off_schema") if response is not None else None,
            )
        )
    ids = [r.id for r in rows]
    problems = []
    dup = _duplicates(lines)
    if dup:
        problems.append(f"duplicated id(s): {_name_ids(dup)}")
    missing = set(expected_ids) - set(ids)
    if missing:
        problems.append(f"missing id(s) (in the prompt set, not in the replay file): {_name_ids(missing)}")
    extra = set(ids) - set(expected_ids)
    if extra:
        problems.append(f"extra id(s) (not in the prompt set): {_name_ids(extra)}")
    if problems:
        raise DataValidationError(f"{path}: " + "; ".join(problems))
    return {r.id: r for r in rows}


def response_line(c: Completion) -> dict[str, Any]:
    """``{"id", "response", "error", "finish_reason", "completion_tokens"}``: the last two say
    whether, and after how many tokens, the reply was cut off (``finish_reason: "length"``);
    ``off_schema`` (only on such a line) why the reply does not follow the schema its request
    asked for."""
    line = {
        "id": c.id,
        "response": c.response,
        "error": c.error,
        "finish_reason": c.finish_reason if c.response is not None else None,
        "completion_tokens": c.usage.get("completion_tokens") if c.response is not None else None,
    }
    if c.response is not None and c.off_schema:
        line["off_schema"] = c.off_schema
    return line


def write_responses(completions: list[Completion], path: str | os.PathLike) -> None:
    """One :func:`response_line` per item, in the given (prompt-set) order."""
    lines = [json.dumps(response_line(c), ensure_ascii=False, sort_keys=True) for c in completions]
    with atomic_path(path, ".jsonl") as tmp:
        tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def iter_responses(path: str | os.PathLike) -> Iterable[tuple[int, dict]]:
    """``(line number, {"id", "response", "error", "finish_reason", "completion_tokens",
    "off_schema"})`` per line of a response file, in file order (the last three None where a
    file has none).

    Only the contract is checked here (a JSON object with a non-empty string id): what a
    benchmark does with repeated, unknown or missing ids is the benchmark's decision.
    """
    path = Path(path)
    for lineno, obj in _read_jsonl(path):
        rid = _check_id(path, lineno, obj)
        check(LLM_RESPONSE, obj, f"{path}: line {lineno} (id {rid})")
        yield (
            lineno,
            {
                "id": obj["id"],
                "response": obj.get("response"),
                "error": obj.get("error"),
                "finish_reason": obj.get("finish_reason"),
                "completion_tokens": obj.get("completion_tokens"),
                "off_schema": obj.get("off_schema"),
            },
        )


def cut_off_reason(row: dict[str, Any], max_tokens: int | None = None) -> str | None:
    """ "cut off at max_tokens=N" for a response line whose reply hit the token limit, else None.

    N is the limit when given, else the reply's token count (the same number: a reply is cut
    off exactly at the limit)."""
    if row.get("response") is None or row.get("finish_reason") != "length":
        return None
    n = max_tokens if max_tokens is not None else row.get("completion_tokens")
    return f"cut off at max_tokens={n}" if isinstance(n, int) else "cut off at max_tokens"


def off_schema_reason(row: dict[str, Any]) -> str | None:
    """ "off-schema: <why>" for a response line whose whole reply does not follow the schema its
    request asked the model to follow, else None (an invalid answer in every benchmark)."""
    if row.get("response") is None or not row.get("off_schema"):
        return None
    return f"off-schema: {row['off_schema']}"


def once_per_id(rows: Iterable[tuple[int, dict]], source: str | os.PathLike) -> Iterable[tuple[int, dict]]:
    """``rows`` as they come, refusing an id seen on an earlier line: the error names ``source``
    and both lines. Both benchmarks score a response file this way, because keeping either line
    of a repeated id would silently pick one of two answers."""
    first: dict[str, int] = {}
    for lineno, row in rows:
        if row["id"] in first:
            raise DataValidationError(
                f"{source}: id {row['id']!r} appears on line {first[row['id']]} and again on line {lineno}; "
                f"each item must be answered once"
            )
        first[row["id"]] = lineno
        yield lineno, row


def read_responses(path: str | os.PathLike) -> list[dict]:
    """A response file as written by :func:`write_responses` (for scorers and tests)."""
    return [row for _, row in iter_responses(path)]
