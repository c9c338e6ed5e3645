"""Question builders: a clean table -> RxnOptBench question records, one file per question type.

Every option, reference and legal combination is a real row of the table. Each question draws
from its own generator seeded by (seed, question id), so a question does not change when
another is added, and two builds are byte-identical.

Multiple choice (the schema of RxnOptBench's ``build_multiple_choice.py``, Hugging Face dataset
songjhPKU/RxnOptBench, testsetV6; record fields as in its ``multiple_choice_*.json``):

- ``all_varying``: one question per substrate; ``n_options`` rows of that substrate, always the
  best one, the others one from each of ``n_options - 1`` equal slices of the substrate's rows
  sorted by effective score (spread over the yield range), in shuffled order.
- ``single_varying``: one question per (substrate, varying key): among the real combinations of
  the other varying keys, the one covering the most values of the key is fixed (ties: a seeded
  draw); the options are the key's values actually run with it.
- ``*_reference``: the same question plus 2–5 reference condition groups of the same
  substrate, drawn from rows outside the options whose effective score is below the options'
  best and at most the substrate's ``reference_quantile`` (low-to-mid performers);
  ``*_reference_control`` is the identical question without them (a paired design).
- ``cross_substrate_reference`` (beyond RxnOptBench): the ``all_varying`` question plus the best
  condition group of up to ``cross_references`` other substrates of the table — what a chemist
  has in hand before running a new substrate. Its control is ``all_varying``.

Fill in the blank: ``all_blank`` asks for one candidate index per varying key; the legal
combinations are exactly the substrate's rows; ``all_blank_reference`` adds 2–5 low-to-mid
references, which are then no longer legal answers.

A question is left out, and counted in the build summary's ``left_out`` (per question type, per
reason), when its best effective score is 0 (nothing to score relative to), when it would offer
fewer than two options (multiple choice) or legal combinations (fill in the blank): every answer
would score 1.0, so a table of one condition per substrate built questions any model aced;
when too few rows qualify as references; or, for ``cross_substrate_reference``, when no other
substrate has a row worth anything. A question left out leaves out the variants built from it.
"""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd

from crucible.core.io import InFile
from crucible.reactions.fill_in_blank import build_fill_in_blank
from crucible.reactions.multiple_choice import build_multiple_choice
from crucible.reactions.question_table import FEWER_THAN_TWO, Table
from crucible.reactions.scoring import QUESTION_TYPES

log = logging.getLogger(__name__)

DEFAULTS = {"n_options": 8, "seed": 0, "n_references": [2, 5], "reference_quantile": 0.6, "cross_references": 5}


def limit_per_type(sets: dict[str, list[dict[str, Any]]], k: int) -> dict[str, list[dict[str, Any]]]:
    """At most ``k`` questions of each type, for a small run: those of the first ``k`` pair ids
    in sorted order, so that a design and its control keep the same pairs (a question without
    a pair id counts as its own)."""
    out = {}
    for qtype, questions in sets.items():
        keys = sorted({q["meta"].get("pair_id", q["id"]) for q in questions})[:k]
        keep = set(keys)
        out[qtype] = [q for q in questions if q["meta"].get("pair_id", q["id"]) in keep]
    return out


def build_all(
    df: pd.DataFrame, card: dict[str, Any], params: dict[str, Any] | None = None
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """Every question type of one dataset, and a build summary (counts, what was left out)."""
    params = {**DEFAULTS, **(params or {})}
    t = Table(df, card)
    sets = {**build_multiple_choice(t, params), **build_fill_in_blank(t, params)}
    if params.get("max_per_type"):
        sets = limit_per_type(sets, int(params["max_per_type"]))
    summary = {
        "dataset": t.dataset,
        "params": params,
        "substrates": len(t.substrates),
        "substrates_with_best_effective_0": [s for s in t.substrates if t.eff(t.rows[s]).max() <= 0],
        "questions": {q: len(sets[q]) for q in QUESTION_TYPES},
        # questions not built, per type and reason (LEFT_OUT_REASONS; max_per_type's cut is not here)
        "left_out": {q: dict(sorted(t.left_out[q].items())) for q in QUESTION_TYPES if q in t.left_out},
    }
    for qtype, counts in summary["left_out"].items():
        if FEWER_THAN_TWO in counts:
            log.warning(
                "%s: %d %s question(s) not built: fewer than 2 options (every answer would score 1.0)",
                t.dataset,
                counts[FEWER_THAN_TWO],
                qtype,
            )
    return {q: sets[q] for q in QUESTION_TYPES}, summary


def write_question_files(
    data: InFile,
    card: InFile,
    params: dict[str, Any] | None,
    types: list[str],
    out_questions: list[str],
    out_prompts: list[str],
    out_summary: str,
    system_prompt: str | None = None,
) -> None:
    """Build every question type of a clean table and write, per requested type, its question
    file (RxnOptBench's schema) and its ``prompts.jsonl``; then the build summary.

    Args:
        params: JSON: n_options, seed, n_references, reference_quantile, cross_references
        types: question types to build, e.g. single_varying all_varying
        out_questions: question files to write, one per --types entry: .../{question_type}/questions.json
        out_prompts: prompt files to write, one per --types entry: .../{question_type}/prompts.jsonl
        out_summary: the build record to write (counts per type, parameters):
            results/reactions/{dataset}/build.json
        system_prompt: system prompt of every prompt (default: none)
        data: the clean table: results/reactions/data/{dataset}.parquet
        card: its card: results/reactions/data/{dataset}.json
    """
    from crucible.core.errors import ConfigError
    from crucible.core.io import read_json, read_parquet, write_json, write_text
    from crucible.reactions import prompts

    if not len(types) == len(out_questions) == len(out_prompts):
        raise ConfigError(
            f"{len(types)} question types, {len(out_questions)} question files and {len(out_prompts)} prompt "
            "files: give one question file and one prompt file per type, in the same order"
        )
    sets, summary = build_all(read_parquet(data), read_json(card), params)
    for qtype, q_out, p_out in zip(types, out_questions, out_prompts):
        if qtype not in sets:
            raise ConfigError(f"unknown question type {qtype!r}; known: {', '.join(sets)}")
        write_json(sets[qtype], q_out, indent=1)
        write_text(prompts.prompts_jsonl(sets[qtype], system_prompt or prompts.SYSTEM_PROMPT), p_out)
    write_json(summary, out_summary)
