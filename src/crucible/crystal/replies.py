"""A language model's response file as crystal scores it: each item's reply text, and the
replies that are no answer to parse: cut off at the token limit, or off the schema their
request asked for (structured output). Both are counted apart from malformed answers."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from crucible.core.errors import DataValidationError
from crucible.crystal import parsing
from crucible.crystal.scoring import ItemScore


def item_responses(
    responses_path: str | os.PathLike, items: Iterable[dict[str, Any]], prompts_path: str | os.PathLike = "the prompts"
) -> dict[str, str | None]:
    """``{id: response text}`` of a response file (read through :mod:`crucible.llm.files`).

    An id that is not an item of the prompt set is refused naming the file and line, one given
    twice naming both lines; an item without a line is scored ``no_response``.
    """
    from crucible.llm.files import iter_responses, once_per_id

    known = {it["id"] for it in items}
    responses: dict[str, str | None] = {}
    for lineno, rec in once_per_id(iter_responses(responses_path), responses_path):
        if rec["id"] not in known:
            raise DataValidationError(
                f"{responses_path}: line {lineno}: id {rec['id']!r} is not an item of {prompts_path}"
            )
        responses[rec["id"]] = rec["response"]
    return responses


def cut_off_items(responses_path: str | os.PathLike) -> dict[str, str]:
    """``{id: "cut off at max_tokens=N"}`` for each reply of a response file that hit the
    token limit (``finish_reason: "length"``); files without the field have none."""
    from crucible.llm.files import cut_off_reason, iter_responses

    return {row["id"]: why for _, row in iter_responses(responses_path) if (why := cut_off_reason(row))}


def off_schema_items(responses_path: str | os.PathLike) -> dict[str, str]:
    """``{id: "off-schema: <why>"}`` for each whole reply of a response file that does not follow
    the schema its request asked for (crucible.llm.schema_check); files without the field have none."""
    from crucible.llm.files import iter_responses, off_schema_reason

    return {row["id"]: why for _, row in iter_responses(responses_path) if (why := off_schema_reason(row))}


def mark_off_schema(scores: list[ItemScore], off_schema: dict[str, str]) -> list[ItemScore]:
    """``scores`` with each off-schema reply unmatched, reason ``off_schema``, whatever it scored:
    structured output promised an answer in the schema, and this one is not."""
    return [
        ItemScore(s.id, False, None, parsing.OFF_SCHEMA, off_schema[s.id]) if s.id in off_schema else s for s in scores
    ]


def mark_cut_off(scores: list[ItemScore], cut_off: dict[str, str]) -> list[ItemScore]:
    """``scores`` with each unfinished answer of a cut-off reply counted as ``cut_off`` (the
    parse failure kept in the detail); a cut-off reply that still parsed keeps its score."""
    return [
        ItemScore(s.id, s.matched, s.rms_dist, parsing.CUT_OFF, f"{cut_off[s.id]}; {s.reason}: {s.detail}")
        if s.id in cut_off and s.reason in parsing.FORMAT_FAILURES
        else s
        for s in scores
    ]
