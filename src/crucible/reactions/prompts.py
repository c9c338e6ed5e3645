"""Prompts for language models and the parser from a response text back to a prediction.

``prompts.jsonl`` follows the shared LLM contract: one object per line, sorted by id, with
``id``, ``messages`` (system + user), ``meta`` and ``response_schema`` (the reply's JSON Schema,
which a model with ``structured_output`` is held to). The LLM stage writes
``responses/{model}.jsonl`` (``{"id", "response", "error"}``); :func:`read_conditions_answer` turns
each response into the same prediction a baseline writes, so one scorer serves both, or into the
reason it gives none.

The model is asked to end its answer with a JSON object: ``{"answer": <option index>}`` for
multiple choice, ``{"answer": {"<key>": <candidate index>, ...}}`` for fill in the blank.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from typing import Any

from crucible.core.errors import DataValidationError
from crucible.core.io import InFile
from crucible.core.strict_json import RepeatedKey
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


def _index_schema(indices: list[int]) -> dict[str, Any]:
    """An integer that is one of ``indices``, as an enum even where they are 0..n-1: a range
    (minimum/maximum) is not enforced by every engine (llama-cpp-python 0.3.36's grammar drops
    it, so its server let {"answer": 0} through a schema of 7..7), an enum is."""
    return {"type": "integer", "enum": sorted(int(i) for i in indices)}


def answer_schema(q: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a reply to question ``q`` (the object the instruction asks for):
    ``{"answer": option index 0..n-1}`` for multiple choice, ``{"answer": {key: candidate
    index}}`` with every query key for fill in the blank. A model with ``structured_output``
    can write nothing else."""
    if "query_keys" in q:
        candidates = q["input"]["candidate_values"]
        answer: dict[str, Any] = {
            "type": "object",
            "properties": {k: _index_schema([c["index"] for c in candidates[k]]) for k in q["query_keys"]},
            "required": list(q["query_keys"]),
            "additionalProperties": False,
        }
    else:
        answer = _index_schema(list(range(len(q["options"]))))
    return {
        "type": "object",
        "properties": {"answer": answer},
        "required": ["answer"],
        "additionalProperties": False,
    }


def prompt_records(questions: list[dict[str, Any]], system_prompt: str = SYSTEM_PROMPT) -> list[dict[str, Any]]:
    records = [
        {
            "id": q["id"],
            "messages": [{"role": "system", "content": system_prompt}, {"role": "user", "content": user_prompt(q)}],
            "meta": {"question_type": q["question_type"], "dataset": q["meta"].get("dataset")},
            "response_schema": answer_schema(q),
        }
        for q in questions
    ]
    return sorted(records, key=lambda r: r["id"])


def prompts_jsonl(questions: list[dict[str, Any]], system_prompt: str = SYSTEM_PROMPT) -> str:
    return "".join(
        json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in prompt_records(questions, system_prompt)
    )


# "answer: 3", "The answer is 3", "**Answer:** 3", "answer = 3", "answer #3", "Answer – 3": the
# number is captured whole, sign, fraction, exponent and base included, so that "-3" or "2.5"
# is refused as written instead of read as 3 or 2. Digits of any script are captured (and then
# refused by crucible.core.formats' rule for numbers in text), with any decimal separator after them
# (Arabic ٫ included), and what follows: "3 or 4", "3-4", "3, 4" name two options, not one.
_NUMBER = r"[-+]?(?:0[xob][0-9a-f]+|\d*\.\d+|\d+(?:\.\d+)?)(?:e[-+]?\d+)?(?:\s*/\s*\d+)?"
_SEPARATED = r"(?:[\u066b\u066c,\u060c\u3001\uff0c\uff0e]\d+)*"
_SECOND = r"(?:\s*(?:or|and|to|,|/|-|\u2013|\u2014|~)\s*[-+]?\d+)?"
_ANSWER_PHRASE = re.compile(
    r"answer(?:\s+is)?(?:[\s:=*\"'`(\[#\u2013\u2014]|\s-(?=\s)){0,5}("
    + _NUMBER
    + ")("
    + _SEPARATED
    + ")("
    + _SECOND
    + r")(?!\w|\.\d)",
    re.IGNORECASE,
)


def _integer_token(token: str, separated: str = "", second: str = "") -> tuple[int | None, str | None]:
    """The option index a phrase writes, or why it is not a plain non-negative integer."""
    from crucible.core.formats import non_ascii_digits

    why = non_ascii_digits(token + separated + second)
    if why:
        return None, why
    if separated:
        return None, f"{token + separated!r} is not a plain integer (a separator inside the number)"
    if second:
        return None, f"{token + second!r} names more than one option (or a range); give one option index"
    t = token.lower()
    if t[0] in "+-":
        return None, f"{token!r} has a sign; an option index is written as a plain integer"
    if "/" in t:
        return None, f"{token!r} is a fraction, not an option index"
    if re.match(r"0[xob]", t):
        return None, f"{token!r} is written in another base, not as a decimal integer"
    if "." in t:
        return None, f"{token!r} is a fraction, not an option index"
    if "e" in t:
        return None, f"{token!r} has an exponent; an option index is written as a plain integer"
    return int(t), None


def _json_index(value: Any, what: str) -> str | None:
    """Why a JSON value is not an index written as an integer; None if it is one."""
    if isinstance(value, bool) or value is None:
        return f"{what} is {json.dumps(value)}, not an integer"
    if isinstance(value, float):
        return f"{what} is {value!r}, a number with a fraction or exponent, not an integer"
    if not isinstance(value, int):
        return f"{what} is a {type(value).__name__} ({value!r}), not an integer"
    if value < 0:
        return f"{what} is {value}, a negative number"
    return None


def read_conditions_answer(text: str | None, question: dict[str, Any]) -> tuple[Any, str | None]:
    """``(answer, None)``, or ``(None, reason)`` when the reply gives no usable answer.

    The answer is the ``answer`` of the last JSON object that has one: an option index, or for
    fill in the blank ``{key: candidate index}``; else, for multiple choice, the last
    ``answer: N`` phrase. Strict: an index is a non-negative integer written as one (no sign,
    fraction, exponent or other base) and, for multiple choice, one of the options; anything
    else is invalid with the reason, never rounded or stripped into another option.
    """
    fill_in_blank = "query_keys" in question
    if not text:
        return None, "empty reply"
    try:
        objects = [value for value, _, _ in embedded_json(text, "{")]
    except RepeatedKey as exc:
        return None, str(exc)
    answers = [obj["answer"] for obj in objects if isinstance(obj, dict) and "answer" in obj]
    if answers:
        answer = answers[-1]
        if fill_in_blank:
            if not isinstance(answer, dict):
                return None, f"the answer is {json.dumps(answer)[:60]}, not an object of condition key -> index"
            for key, value in answer.items():
                why = _json_index(value, f"the index for {key!r}")
                if why:
                    return None, why
            return answer, None
        why = _json_index(answer, "the answer")
        if why:
            return None, why
        index = answer
    elif fill_in_blank:
        return None, 'no JSON object with an "answer"'
    else:
        hits = _ANSWER_PHRASE.findall(text)
        if not hits:
            return None, 'no JSON object with an "answer" and no "answer: N" phrase'
        index, why = _integer_token(*hits[-1])
        if why:
            return None, why
    n = len(question.get("options") or [])
    if n and index >= n:
        return None, f"option {index} is out of range 0..{n - 1}"
    return index, None


def parse_conditions_answer(text: str | None, fill_in_blank: bool) -> Any:
    """The answer of :func:`read_conditions_answer`, or None when it is invalid (range unchecked)."""
    question: dict[str, Any] = {"query_keys": []} if fill_in_blank else {}
    return read_conditions_answer(text, question)[0]


def predictions_from_responses(
    responses: Iterable[tuple[int, dict[str, Any]]], questions: list[dict[str, Any]], source: str = "responses"
) -> dict[str, Any]:
    """``{id: prediction}`` from ``(line number, response record)`` pairs (as
    :func:`crucible.llm.files.iter_responses` gives them): a reply without a usable answer is an
    :class:`~crucible.reactions.scoring.InvalidAnswer` with its reason. An id outside the
    question set is an error naming ``source`` and the line; an id on two lines one naming both."""
    from crucible.llm.files import cut_off_reason, off_schema_reason, once_per_id
    from crucible.reactions.scoring import InvalidAnswer

    ids = {q["id"]: q for q in questions}
    out: dict[str, Any] = {}
    for lineno, rec in once_per_id(responses, source):
        q = ids.get(rec["id"])
        if q is None:
            raise DataValidationError(f"{source}: line {lineno}: id {rec['id']!r} is not a question of this set")
        if rec.get("response") is None:
            out[rec["id"]] = InvalidAnswer(f"no reply ({rec.get('error') or 'the response is null'})")
            continue
        off = off_schema_reason(rec)
        if off:  # not the answer format the request asked for: invalid, whatever its text says
            out[rec["id"]] = InvalidAnswer(off, off_schema=True)
            continue
        answer, why = read_conditions_answer(rec["response"], q)
        cut = cut_off_reason(rec)
        if why and cut:  # unfinished rather than malformed: the reply hit the token limit
            out[rec["id"]] = InvalidAnswer(f"{cut} ({why})", cut_off=True)
        else:
            out[rec["id"]] = InvalidAnswer(why) if why else answer
    return out


def read_predictions_from_responses(responses_path: str | os.PathLike, questions: list[dict[str, Any]]) -> dict:
    """:func:`predictions_from_responses` of a response file, read through the LLM stage's reader."""
    from crucible.llm.files import iter_responses

    return predictions_from_responses(iter_responses(responses_path), questions, source=str(responses_path))


def write_response_predictions(
    model: str,
    questions: list[InFile],
    responses: list[str | os.PathLike],
    out: list[str | os.PathLike],
) -> None:
    """A language model's response files turned into prediction files, one per question file.

    Args:
        model: the language model's name (config llm.models)
        responses: one per questions file, same order
        questions: as in :func:`crucible.reactions.predict.write_baseline_predictions`
        out: as in :func:`crucible.reactions.predict.write_baseline_predictions`
    """
    from crucible.core.io import write_json
    from crucible.reactions.scoring import load_questions, prediction_record

    for questions_path, responses_path, out_path in zip(questions, responses, out, strict=True):
        predictions = read_predictions_from_responses(responses_path, load_questions(questions_path))
        write_json(prediction_record(model, questions_path, predictions), out_path)
