"""Every whole reply held to the schema its request asked the model to follow.

A constraint is checked, not assumed: a server can pass the structured-output canary and then
answer prose (``"… answer: 2"``), and an engine can drop a keyword it does not enforce. Such a
reply is *off-schema*: the stage writes why beside it in the response file (``off_schema``), and
every benchmark scores it invalid, counted apart from malformed and cut-off answers, whatever a
lenient parser could still read out of its text. A reply cut off at ``max_tokens`` is not
checked here: it is unfinished, its own outcome.
"""

from __future__ import annotations

import json
from typing import Any

from crucible.llm.files import Completion, Prompt

# How much of a schema error's text a reason keeps: enough to say what broke, never the whole reply.
REASON_CHARS = 200


def _clip(text: str) -> str:
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def schema_mismatch(validator: Any, reply: str) -> str | None:
    """Why ``reply`` is not a JSON value that ``validator``'s schema accepts; None when it is one."""
    from crucible.core.strict_json import RepeatedKey, unique_keys
    from crucible.llm.json_text import DECODE_ERRORS

    try:  # strict: a key given twice is no schema's answer
        value = json.loads(reply, object_pairs_hook=unique_keys)
    except RepeatedKey as exc:
        return _clip(f"not one JSON answer: {exc}")
    except DECODE_ERRORS as exc:
        return _clip(f"not JSON as a whole ({type(exc).__name__}: {exc})")
    error = next(iter(sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))), None)
    if error is None:
        return None
    at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path) or "(the whole reply)"
    return _clip(f"at {at.lstrip('.')}: {error.message}")


def check_replies(prompts: list[Prompt], results: list[Completion]) -> dict[str, str]:
    """``{id: reason}`` for each whole reply (not cut off) that does not follow its prompt's
    schema; each such completion gets its ``off_schema`` set to the reason as well."""
    from jsonschema import Draft202012Validator

    validators: dict[str, Any] = {}
    broken: dict[str, str] = {}
    for p, c in zip(prompts, results, strict=True):
        c.off_schema = None
        if c.response is None or c.finish_reason == "length" or p.response_schema is None:
            continue
        key = json.dumps(p.response_schema, sort_keys=True)
        if key not in validators:
            validators[key] = Draft202012Validator(p.response_schema)
        why = schema_mismatch(validators[key], c.response)
        if why is not None:
            c.off_schema = why
            broken[p.id] = why
    return dict(sorted(broken.items()))


def schema_violations(prompts: list[Prompt], results: list[Completion]) -> list[str]:
    """Ids of the whole replies that are not JSON following their prompt's schema."""
    return sorted(check_replies(prompts, results))
