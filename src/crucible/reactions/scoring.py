"""RxnOptBench's metrics for multiple-choice and fill-in-blank question files.

As RxnOptBench defines them (Hugging Face dataset songjhPKU/RxnOptBench, testsetV6: scoring in
``common_v6.py``, used by ``evaluate_multiple_choice.py`` and ``evaluate_fill_in_blank.py``; the
formulas below are from its README, the code itself was not available to check):

- effective = yield × (100 + ee)/200 × dr/(dr + 1); a missing ee or dr is a factor 1. A missing
  yield (a selectivity-only screen such as thiol-addition) counts as 100, so that the utility is
  the ee term alone.
- relative score of a prediction = its effective / the best effective among the question's
  options (``meta.best_effective_score``), i.e. ``meta.option_relative_scores[prediction]``.
- multiple choice: ``avg_relative_score`` (an invalid or missing prediction scores 0),
  ``exact_match_accuracy`` (prediction in ``answer``), ``avg_yield_ratio`` (predicted option's
  yield / best yield among the options; questions whose best yield is 0 or missing are left out).
- fill-in-blank: a prediction maps every query key to a candidate index; a combination found in
  ``meta.legal_combinations`` is *scored* with its relative score, one that is not is *unhit*
  (left out of the average), a malformed one is *invalid*. ``hit_rate`` = scored / questions;
  ``avg_relative_score`` over scored; ``best_hit_rate_among_scored`` = share of scored with
  relative score 1.

Invalid predictions (missing id, not an integer, out of range, unknown key, a reply without a
usable answer, a reply off the schema its request asked for) are counted and listed in the score file with their reason; they never stop the
run. A prediction file that belongs to another
question set is refused (:class:`PredictionFileError`).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from crucible.core.errors import DataValidationError, PredictionFileError
from crucible.core.hashes import file_sha256
from crucible.core.io import InFile

MC_TYPES = (
    "single_varying",
    "all_varying",
    "single_varying_reference",
    "single_varying_reference_control",
    "all_varying_reference",
    "all_varying_reference_control",
    "cross_substrate_reference",
)
FB_TYPES = ("all_blank", "all_blank_reference")
QUESTION_TYPES = MC_TYPES + FB_TYPES
# Paired designs: (with references, its control without).
PAIRS = (
    ("single_varying_reference", "single_varying_reference_control"),
    ("all_varying_reference", "all_varying_reference_control"),
    ("cross_substrate_reference", "all_varying"),
)
RELATIVE_ONE = 1.0 - 1e-12


def _factor_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def parse_dr(dr: Any) -> float | None:
    """dr as one number: ``20``, ``"20:1"`` -> 20 (major over minor)."""
    if _factor_missing(dr):
        return None
    if isinstance(dr, str):
        if ":" in dr:
            major, minor = (float(x) for x in dr.split(":", 1))
            return major / minor
        return float(dr)
    return float(dr)


def effective_score(yield_: Any = None, ee: Any = None, dr: Any = None) -> float:
    """yield × (100+ee)/200 × dr/(dr+1); missing ee, dr -> factor 1; missing yield -> 100."""
    y = 100.0 if _factor_missing(yield_) else float(yield_)
    ee_factor = 1.0 if _factor_missing(ee) else (100.0 + float(ee)) / 200.0
    d = parse_dr(dr)
    dr_factor = 1.0 if d is None else d / (d + 1.0)
    return y * ee_factor * dr_factor


def relative_score(predicted_effective: float, best_effective: float) -> float:
    if best_effective <= 0:
        raise DataValidationError("relative score undefined: the best effective score is not positive")
    return predicted_effective / best_effective


# ---------------------------------------------------------------- question files


def load_questions(path: str | os.PathLike) -> list[dict[str, Any]]:
    """A question file: a JSON list, ``{"samples"|"questions": [...]}``, or JSON lines."""
    from crucible.core import reading, strict_json

    path = Path(path)
    text = reading.read_text(path)
    try:
        json.loads(text)
    except json.JSONDecodeError:  # JSON lines, each line strictly parsed
        doc = [
            strict_json.parse_json(line, f"{path}: line {n}")
            for n, line in enumerate(text.split("\n"), 1)
            if line.strip()
        ]
    except RecursionError:
        raise DataValidationError(f"{path}: JSON nested too deeply") from None
    else:
        doc = strict_json.parse_json(text, str(path))
    if isinstance(doc, dict):
        doc = doc.get("samples", doc.get("questions"))
    if not isinstance(doc, list):
        raise DataValidationError(f"{path}: expected a list of question records")
    for i, rec in enumerate(doc):
        if not isinstance(rec, dict) or "id" not in rec or "question_type" not in rec:
            raise DataValidationError(f"{path}: record {i} has no 'id' or 'question_type'")
    return doc


def questions_fingerprint(path: str | os.PathLike) -> str:
    return file_sha256(path)


def load_predictions(
    path: str | os.PathLike, questions: list[dict[str, Any]], questions_sha256: str | None = None
) -> dict[str, Any]:
    """``{id: prediction}`` from RxnOptBench's plain map or crucible's wrapped form.

    The wrapped form ``{"questions_sha256", "predictions"}`` is refused when it names another
    question file; a plain map is refused when none of its ids is a question of this set.
    """
    from crucible.core import formats, strict_json

    path = Path(path)
    try:
        doc = strict_json.read_json(path)
    except DataValidationError as exc:
        raise PredictionFileError(str(exc)) from None
    if not isinstance(doc, dict):
        raise PredictionFileError(f"{path}: expected a JSON object mapping question id to prediction")
    if "predictions" in doc and "questions_sha256" in doc:
        try:
            formats.check(formats.REACTION_PREDICTIONS, doc, str(path))
        except DataValidationError as exc:
            raise PredictionFileError(str(exc)) from None
        if questions_sha256 and doc["questions_sha256"] != questions_sha256:
            raise PredictionFileError(
                f"{path}: predictions were made for question file {doc.get('questions_file', '?')} "
                f"(sha256 {doc['questions_sha256'][:12]}…), not this one ({questions_sha256[:12]}…)"
            )
        invalid = doc.get("invalid") or {}
        kinds = {kind: set(map(str, doc.get(kind) or [])) for kind in ("cut_off", "off_schema")}
        doc = doc["predictions"]
        for kind, ids in kinds.items():
            if not ids <= set(invalid):
                raise PredictionFileError(f"{path}: {kind!r} must be a list of ids that are also under 'invalid'")
        both = sorted(set(doc) & set(invalid))
        if both:
            raise PredictionFileError(f"{path}: {both[0]!r} is both a prediction and invalid")
        doc = {
            **doc,
            **{
                k: InvalidAnswer(str(v), k in kinds["cut_off"], off_schema=k in kinds["off_schema"])
                for k, v in invalid.items()
            },
        }
    ids = {q["id"] for q in questions}
    if doc and not ids.intersection(doc):
        example = next(iter(sorted(doc)))
        raise PredictionFileError(
            f"{path}: none of its {len(doc)} ids is a question of this set "
            f"(e.g. {example!r}); is it a prediction file for another dataset?"
        )
    return doc


class InvalidAnswer:
    """A prediction that is known to be invalid and why: a language model's reply that gives no
    usable answer (``crucible.reactions.prompts``). Scored like any invalid prediction, with
    this reason in the score file instead of "missing"; stored in a prediction file as
    ``"invalid": {id: reason}`` beside ``"predictions"``. ``cut_off``: the reply stopped at
    max_tokens before its answer (listed under ``"cut_off"``, and counted apart from malformed
    answers as ``num_cut_off``). ``off_schema``: the reply does not follow the schema its request
    asked the model to follow (structured output; listed under ``"off_schema"``, counted as
    ``num_off_schema``), whatever answer a lenient reading of its text would find."""

    __slots__ = ("reason", "cut_off", "off_schema")

    def __init__(self, reason: str, cut_off: bool = False, off_schema: bool = False):
        self.reason = reason
        self.cut_off = bool(cut_off)
        self.off_schema = bool(off_schema)

    def _fields(self) -> tuple[str, bool, bool]:
        return self.reason, self.cut_off, self.off_schema

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InvalidAnswer) and other._fields() == self._fields()

    def __repr__(self) -> str:
        flags = "".join(f", {name}=True" for name in ("cut_off", "off_schema") if getattr(self, name))
        return f"InvalidAnswer({self.reason!r}{flags})"


def _num_invalid_of_kind(questions: list[dict[str, Any]], predictions: dict[str, Any], kind: str) -> int:
    """How many of the questions' predictions are invalid answers of ``kind`` (cut_off, off_schema)."""
    return sum(isinstance(p, InvalidAnswer) and getattr(p, kind) for p in (predictions.get(q["id"]) for q in questions))


def _as_index(value: Any, n: int) -> tuple[int | None, str | None]:
    if isinstance(value, InvalidAnswer):
        return None, value.reason
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            return None, f"not an integer: {value!r}"
    if not 0 <= int(value) < n:
        return None, f"index {int(value)} out of range 0..{n - 1}"
    return int(value), None


def score_multiple_choice(questions: list[dict[str, Any]], predictions: dict[str, Any]) -> dict[str, Any]:
    """Per-question records and the summary metrics of one multiple-choice question set."""
    per_question = []
    invalid = []
    for q in questions:
        rel = q["meta"]["option_relative_scores"]
        pred = predictions.get(q["id"])
        if q["id"] not in predictions:
            index, reason = None, "missing"
        else:
            index, reason = _as_index(pred, len(q["options"]))
        rec: dict[str, Any] = {"id": q["id"], "pair_id": q["meta"].get("pair_id", q["id"]), "prediction": index}
        if index is None:
            invalid.append({"id": q["id"], "reason": reason})
            rec.update(relative_score=0.0, exact_match=False, yield_ratio=None, valid=False)
        else:
            best_yield = q["meta"].get("best_yield")
            y = q["meta"]["yields"][index] if q["meta"].get("yields") else None
            ratio = None if (best_yield in (None, 0) or _factor_missing(best_yield) or y is None) else y / best_yield
            rec.update(
                relative_score=float(rel[index]), exact_match=index in q["answer"], yield_ratio=ratio, valid=True
            )
        per_question.append(rec)
    n = len(per_question)
    ratios = [r["yield_ratio"] for r in per_question if r["yield_ratio"] is not None]
    summary = {
        "num_questions": n,
        "num_valid": n - len(invalid),
        "num_invalid": len(invalid),
        "num_cut_off": _num_invalid_of_kind(questions, predictions, "cut_off"),  # of the invalid: at max_tokens
        # of the invalid: replies that broke the schema their request asked for
        "num_off_schema": _num_invalid_of_kind(questions, predictions, "off_schema"),
        "avg_relative_score": float(np.mean([r["relative_score"] for r in per_question])) if n else None,
        "exact_match_accuracy": float(np.mean([r["exact_match"] for r in per_question])) if n else None,
        "avg_yield_ratio": float(np.mean(ratios)) if ratios else None,
    }
    return {
        "summary": summary,
        "per_question": per_question,
        "invalid": invalid,
        "unknown_ids": sorted(set(predictions) - {q["id"] for q in questions}),
    }


def _combination_key(combo: dict[str, int], keys: Iterable[str]) -> tuple[int, ...]:
    return tuple(int(combo[k]) for k in keys)


def score_fill_in_blank(questions: list[dict[str, Any]], predictions: dict[str, Any]) -> dict[str, Any]:
    per_question = []
    invalid = []
    for q in questions:
        keys = list(q["query_keys"])
        candidates = q["input"]["candidate_values"]
        pred = predictions.get(q["id"])
        reason = None
        if q["id"] not in predictions:
            reason = "missing"
        elif isinstance(pred, InvalidAnswer):
            reason = pred.reason
        elif not isinstance(pred, dict):
            reason = f"not an object of condition key -> index: {pred!r}"
        else:
            missing = [k for k in keys if k not in pred]
            extra = sorted(set(pred) - set(keys))
            if missing or extra:
                reason = f"keys: missing {missing}, unknown {extra}"
            else:
                for k in keys:
                    _, why = _as_index(pred[k], len(candidates[k]))
                    if why:
                        reason = f"{k}: {why}"
                        break
        rec: dict[str, Any] = {
            "id": q["id"],
            "pair_id": q["meta"].get("pair_id", q["id"]),
            "prediction": pred if reason is None else None,
        }
        if reason is not None:
            invalid.append({"id": q["id"], "reason": reason})
            rec.update(status="invalid", relative_score=None)
        else:
            legal = {_combination_key(c["combination"], keys): c for c in q["meta"]["legal_combinations"]}
            hit = legal.get(_combination_key(pred, keys))
            if hit is None:
                rec.update(status="unhit", relative_score=None)
            else:
                rec.update(status="scored", relative_score=float(hit["relative_score"]))
        per_question.append(rec)
    n = len(per_question)
    scored = [r["relative_score"] for r in per_question if r["status"] == "scored"]
    summary = {
        "num_questions": n,
        "num_scored": len(scored),
        "num_unhit": sum(r["status"] == "unhit" for r in per_question),
        "num_invalid": len(invalid),
        "num_cut_off": _num_invalid_of_kind(questions, predictions, "cut_off"),  # of the invalid: at max_tokens
        # of the invalid: replies that broke the schema their request asked for
        "num_off_schema": _num_invalid_of_kind(questions, predictions, "off_schema"),
        "hit_rate": len(scored) / n if n else None,
        "avg_relative_score": float(np.mean(scored)) if scored else None,
        "best_hit_rate_among_scored": float(np.mean([s >= RELATIVE_ONE for s in scored])) if scored else None,
    }
    return {
        "summary": summary,
        "per_question": per_question,
        "invalid": invalid,
        "unknown_ids": sorted(set(predictions) - {q["id"] for q in questions}),
    }


def prediction_record(model: str, questions_path: str | os.PathLike, predictions: dict[str, Any]) -> dict[str, Any]:
    """crucible's wrapped prediction file: the predictions and the question file they answer
    (by SHA-256, so that :func:`load_predictions` refuses them for another question set); the
    reasons of :class:`InvalidAnswer` predictions under ``invalid``, when there are any."""
    record = {
        "model": model,
        "questions_file": str(questions_path),
        "questions_sha256": questions_fingerprint(questions_path),
        "predictions": {k: v for k, v in predictions.items() if not isinstance(v, InvalidAnswer)},
    }
    invalid = {k: v.reason for k, v in predictions.items() if isinstance(v, InvalidAnswer)}
    if invalid:
        record["invalid"] = invalid
    for kind in ("cut_off", "off_schema"):
        ids = sorted(k for k, v in predictions.items() if isinstance(v, InvalidAnswer) and getattr(v, kind))
        if ids:
            record[kind] = ids
    return record


def score_file(questions_path: str | os.PathLike, predictions_path: str | os.PathLike) -> dict[str, Any]:
    questions = load_questions(questions_path)
    predictions = load_predictions(predictions_path, questions, questions_fingerprint(questions_path))
    return score_questions(questions, predictions)


def score_questions(questions: list[dict[str, Any]], predictions: dict[str, Any]) -> dict[str, Any]:
    types = {q["question_type"] for q in questions}
    if len(types) > 1:
        raise DataValidationError(f"one question set holds several question types: {sorted(types)}")
    qtype = types.pop() if types else None
    fill = bool(questions) and "query_keys" in questions[0]
    result = (score_fill_in_blank if fill else score_multiple_choice)(questions, predictions)
    result["question_type"] = qtype
    result["format"] = "fill_in_blank" if fill else "multiple_choice"
    return result


def bootstrap_interval(
    values: list[float], n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean over questions."""
    arr = np.asarray([v for v in values if v is not None], dtype=float)
    if arr.size == 0:
        return None
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, arr.size, size=(n_boot, arr.size))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


# ---------------------------------------------------------------- a model's score file


def expected_random(q: dict[str, Any]) -> dict[str, Any]:
    """The exact expectation of a uniform random answer to one question."""
    if "query_keys" in q:
        space = int(np.prod([len(q["input"]["candidate_values"][k]) for k in q["query_keys"]]))
        legal = q["meta"]["legal_combinations"]
        rel = [c["relative_score"] for c in legal]
        return {
            "hit_rate": len(legal) / space,
            "avg_relative_score": float(np.mean(rel)) if rel else None,
            "best_hit_rate_among_scored": float(np.mean([r >= 1 - 1e-12 for r in rel])) if rel else None,
        }
    rel = q["meta"]["option_relative_scores"]
    yields, best_yield = q["meta"].get("yields") or [], q["meta"].get("best_yield")
    ratio = float(np.mean([(y or 0) / best_yield for y in yields])) if best_yield else None
    return {
        "avg_relative_score": float(np.mean(rel)),
        "exact_match_accuracy": len(q["answer"]) / len(rel),
        "avg_yield_ratio": ratio,
    }


def expected_random_means(questions: list[dict[str, Any]]) -> dict[str, float | None]:
    """The expected metrics of a uniform random answer, averaged over the question set: each
    metric over the questions where it is defined (None where it is defined for none)."""
    per_question = [expected_random(q) for q in questions]
    out: dict[str, float | None] = {}
    for key in per_question[0] if per_question else ():
        defined = [e[key] for e in per_question if e[key] is not None]
        # a plain left-to-right sum, as the score files have always been written (np.mean rounds
        # differently in the last bit)
        out[key] = float(sum(defined) / max(1, len(defined))) if defined else None
    return out


def write_scores(
    questions: list[InFile],
    predictions: list[str | os.PathLike],
    out: str | os.PathLike,
    dataset: str = "",
    model: str = "",
) -> None:
    """:func:`score_prediction_files` written to ``out`` (JSON).

    Args:
        predictions: prediction files, one per questions file, same order
        out: the scores JSON to write
        dataset: dataset name recorded in the scores (default: none)
        model: model name recorded in the scores (default: none)
        questions: as in :func:`crucible.reactions.predict.write_baseline_predictions`
    """
    from crucible.core.io import write_json

    write_json(score_prediction_files(questions, predictions, dataset, model), out)


def score_prediction_files(
    questions_paths: list[str | os.PathLike],
    predictions_paths: list[str | os.PathLike],
    dataset: str = "",
    model: str = "",
) -> dict[str, Any]:
    """One model's score record over its question files: per question type the result of
    :func:`score_questions`, and for the ``random`` baseline its exact expectation."""
    if len(questions_paths) != len(predictions_paths):
        raise DataValidationError(
            f"{len(questions_paths)} question files but {len(predictions_paths)} prediction files; "
            "give one prediction file per question file, in the same order"
        )
    types: dict[str, Any] = {}
    expected: dict[str, Any] = {}
    for q_path, p_path in zip(questions_paths, predictions_paths):
        questions = load_questions(q_path)
        predictions = load_predictions(p_path, questions, questions_fingerprint(q_path))
        result = score_questions(questions, predictions)
        qtype = result["question_type"] or Path(q_path).parent.name
        types[qtype] = result
        if model == "random" and questions:
            expected[qtype] = expected_random_means(questions)
    return {"dataset": dataset, "model": model, "types": types, "expected": expected}
