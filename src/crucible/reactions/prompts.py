"""Prompts for language models and the parser from a response text back to a prediction.

``prompts.jsonl`` follows the shared LLM contract: one object per line, sorted by id, with
``id``, ``messages`` (system + user) and ``meta``. The LLM stage writes
``responses/{model}.jsonl`` (``{"id", "response", "error"}``); :func:`parse_conditions_answer` turns each
response into the same prediction a baseline writes, so one scorer serves both.

The model is asked to end its answer with a JSON object: ``{"answer": <option index>}`` for
multiple choice, ``{"answer": {"<key>": <candidate index>, ...}}`` for fill in the blank.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from typing import Any

from crucible.errors import DataValidationError
from crucible.llm.json_text import embedded_json

SYSTEM_PROMPT = (
    "You are an expert synthetic chemist. You choose reaction conditions that give the best outcome "
    "(yield, and selectivity where it is reported) for the given substrate. Think briefly, then end your "
    "reply with one JSON object as instructed."
)

MC_INSTRUCTION = (
    "Which option gives the best outcome? End your reply with exactly one JSON object: "
    '{"answer": <0-based option index>}'
)
FB_INSTRUCTION = (
    "For every condition key, choose one candidate by its index. End your reply with exactly one JSON "
    'object mapping each key to a 0-based candidate index: {"answer": {"key": index, ...}}'
)


def _items(items: list[dict[str, str]]) -> str:
    out = []
    for it in items:
        content, smiles = it.get("content", ""), it.get("SMILES", "")
        out.append(content if not smiles or smiles == content else f"{content} ({smiles})")
    return " + ".join(out)


def _conditions(conds: dict[str, list[dict[str, str]]]) -> str:
    return "; ".join(f"{k}: {_items(v)}" for k, v in conds.items())


def _outcome(ref: dict[str, Any]) -> str:
    parts = []
    if ref.get("yield") is not None:
        parts.append(f"yield {ref['yield']:.1f} %")
    if ref.get("ee") is not None:
        parts.append(f"ee {ref['ee']:.0f} %")
    if ref.get("dr") is not None:
        parts.append(f"dr {ref['dr']:g}:1")
    return ", ".join(parts) or "outcome not reported"


def user_prompt(q: dict[str, Any]) -> str:
    inp = q["input"]
    lines = ["Reactants: " + _items(inp["reactants"])]
    if inp.get("constant_conditions"):
        lines.append("Fixed conditions: " + _conditions(inp["constant_conditions"]))
    refs = inp.get("reference_conditions") or []
    if refs:
        lines.append("")
        lines.append("Results already measured (for reference):")
        for ref in refs:
            who = f"substrate {_items(ref['reactants'])} with " if "reactants" in ref else ""
            lines.append(f"- {who}{_conditions(ref['conditions'])} -> {_outcome(ref)}")
    lines.append("")
    if "query_keys" in q:
        lines.append("Choose conditions for: " + ", ".join(q["query_keys"]))
        for key in q["query_keys"]:
            lines.append(f"Candidates for {key}:")
            lines += [f"  {c['index']}: {_items([c])}" for c in inp["candidate_values"][key]]
        lines += ["", FB_INSTRUCTION]
    else:
        lines.append("Options (" + ", ".join(q["varying_keys"]) + "):")
        lines += [f"  {i}: {_conditions(opt)}" for i, opt in enumerate(q["options"])]
        lines += ["", MC_INSTRUCTION]
    return "\n".join(lines)


def prompt_records(questions: list[dict[str, Any]], system_prompt: str = SYSTEM_PROMPT) -> list[dict[str, Any]]:
    records = [
        {
            "id": q["id"],
            "messages": [{"role": "system", "content": system_prompt}, {"role": "user", "content": user_prompt(q)}],
            "meta": {"question_type": q["question_type"], "dataset": q["meta"].get("dataset")},
        }
        for q in questions
    ]
    return sorted(records, key=lambda r: r["id"])


def prompts_jsonl(questions: list[dict[str, Any]], system_prompt: str = SYSTEM_PROMPT) -> str:
    return "".join(
        json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in prompt_records(questions, system_prompt)
    )


def parse_conditions_answer(text: str | None, fill_in_blank: bool) -> Any:
    """The conditions a response chooses: the ``answer`` of the last JSON object that has one
    (an option index, or ``{key: candidate index}`` for fill in the blank); else, for multiple
    choice, the last ``answer: N`` phrase. None when nothing is found (scored as invalid)."""
    if not text:
        return None
    objects = [value for value, _, _ in embedded_json(text, "{")]
    for obj in reversed(objects):
        if isinstance(obj, dict) and "answer" in obj:
            return obj["answer"]
    if not fill_in_blank:
        hits = re.findall(r"answer(?:\s+is)?\W{0,5}(\d+)", text, flags=re.IGNORECASE)
        if hits:
            return int(hits[-1])
    return None


def predictions_from_responses(
    responses: Iterable[tuple[int, dict[str, Any]]], questions: list[dict[str, Any]], source: str = "responses"
) -> dict[str, Any]:
    """``{id: prediction}`` from ``(line number, response record)`` pairs (as
    :func:`crucible.llm.files.iter_responses` gives them); an id outside the question set is an
    error naming ``source`` and the line."""
    ids = {q["id"]: q for q in questions}
    out: dict[str, Any] = {}
    for lineno, rec in responses:
        q = ids.get(rec["id"])
        if q is None:
            raise DataValidationError(f"{source}: line {lineno}: id {rec['id']!r} is not a question of this set")
        pred = parse_conditions_answer(rec.get("response"), "query_keys" in q)
        if pred is not None:
            out[rec["id"]] = pred
    return out


def read_predictions_from_responses(responses_path: str | os.PathLike, questions: list[dict[str, Any]]) -> dict:
    """:func:`predictions_from_responses` of a response file, read through the LLM stage's reader."""
    from crucible.llm.files import iter_responses

    return predictions_from_responses(iter_responses(responses_path), questions, source=str(responses_path))


def write_response_predictions(
    model: str, questions_path: str | os.PathLike, responses_path: str | os.PathLike, out: str | os.PathLike
) -> None:
    """A language model's response file turned into a prediction file for one question file."""
    from crucible.io import write_json
    from crucible.reactions.scoring import load_questions, prediction_record

    predictions = read_predictions_from_responses(responses_path, load_questions(questions_path))
    write_json(prediction_record(model, questions_path, predictions), out)
