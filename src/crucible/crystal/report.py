"""Per-item scores, their summaries, the generator table and the match-rate-by-size figure.

Every item is scored under both matcher conventions (:data:`crucible.crystal.scoring.CONVENTIONS`):
the summary's top-level numbers and the per-item ``matched``/``rms_dist`` are the default
``cdvae`` convention (OpenCompass-compatible); ``conventions`` holds both, and the per-item table
has the other convention's columns beside. With the leakage audit's de-duplicated test ids the
summary also scores that subset, and ``per_prompt`` weighs every distinct prompt once.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

import numpy as np
import pandas as pd
import pyarrow as pa

from crucible.core.io import InFile
from crucible.crystal import parsing
from crucible.crystal.scoring import CONVENTION_NAMES, DEFAULT_CONVENTION, TIMEOUT_S, ItemScore, MatchRateMetric

OTHER_CONVENTIONS = tuple(c for c in CONVENTION_NAMES if c != DEFAULT_CONVENTION)


def convention_slug(name: str) -> str:
    """A convention's name as a column suffix (``pymatgen-default`` -> ``pymatgen_default``)."""
    return name.replace("-", "_")


SCORE_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("matched", pa.bool_()),
        ("rms_dist", pa.float64()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("nsites", pa.int64()),
        ("crystal_system", pa.string()),
        ("spacegroup_number", pa.int64()),
        ("formula_in_train", pa.bool_()),
    ]
    + [
        field
        for c in OTHER_CONVENTIONS
        for field in (
            (f"matched_{convention_slug(c)}", pa.bool_()),
            (f"rms_dist_{convention_slug(c)}", pa.float64()),
            (f"reason_{convention_slug(c)}", pa.string()),
        )
    ]
)

# Size bins of the figure and of the summary (MP-20 has at most 20 sites).
NSITE_BINS = [(1, 2), (3, 4), (5, 6), (7, 8), (9, 12), (13, 16), (17, 20), (21, 10**9)]


def nsite_bin(n: int) -> str:
    for lo, hi in NSITE_BINS:
        if lo <= n <= hi:
            return f"{lo}-{hi}" if hi < 10**9 else f">{lo - 1}"
    return "?"


def scores_frame(
    scores: list[ItemScore], items: list[dict[str, Any]], others: dict[str, list[ItemScore]] | None = None
) -> pd.DataFrame:
    """Per-item scores (default convention) with the other conventions' verdicts beside
    (``others``: convention -> scores in the same order; missing ones are left empty)."""
    meta = {it["id"]: it["meta"] for it in items}
    others = others or {}
    rows = [
        {
            "id": s.id,
            "matched": s.matched,
            "rms_dist": s.rms_dist if s.matched else np.nan,
            "reason": s.reason,
            "detail": s.detail,
            "nsites": int(meta[s.id]["nsites"]),
            "crystal_system": meta[s.id]["crystal_system"],
            "spacegroup_number": int(meta[s.id]["spacegroup_number"]),
            "formula_in_train": bool(meta[s.id].get("formula_in_train", False)),
            **{
                key: value
                for c in OTHER_CONVENTIONS
                for key, value in _other_columns(c, others[c][n] if c in others else None).items()
            },
        }
        for n, s in enumerate(scores)
    ]
    return pd.DataFrame(rows, columns=SCORE_SCHEMA.names)


def _other_columns(convention: str, score: ItemScore | None) -> dict[str, Any]:
    slug = convention_slug(convention)
    if score is None:
        return {f"matched_{slug}": None, f"rms_dist_{slug}": np.nan, f"reason_{slug}": None}
    return {
        f"matched_{slug}": score.matched,
        f"rms_dist_{slug}": score.rms_dist if score.matched else np.nan,
        f"reason_{slug}": score.reason,
    }


def _summary(df: pd.DataFrame, convention: str = DEFAULT_CONVENTION) -> dict[str, Any]:
    suffix = "" if convention == DEFAULT_CONVENTION else f"_{convention_slug(convention)}"
    metric = MatchRateMetric()
    metric.update(
        ItemScore(ident, bool(m), None if not m else float(r), reason)
        for ident, m, r, reason in zip(df["id"], df[f"matched{suffix}"], df[f"rms_dist{suffix}"], df[f"reason{suffix}"])
    )
    return metric.compute()


def summarize(
    df: pd.DataFrame,
    generator: str,
    generation: dict[str, Any] | None = None,
    dedup_ids: Iterable[str] | None = None,
    prompt_groups: dict[str, int] | None = None,
) -> dict[str, Any]:
    """OpenCompass's four numbers, failures by reason, and the match rate by size, system and
    subset; the same numbers under every convention; the de-duplicated test set (``dedup_ids``)
    and the per-prompt match rate (``prompt_groups``: item id -> distinct-prompt number)."""

    def grouped(key):
        return {str(k): _summary(g) for k, g in sorted(df.groupby(key, sort=True), key=lambda kv: str(kv[0]))}

    bins = df.assign(nsite_bin=[nsite_bin(n) for n in df["nsites"]])
    by_bin = {label: _summary(g) for label, g in bins.groupby("nsite_bin", sort=False)}
    order = [nsite_bin(lo) for lo, _ in NSITE_BINS]
    return {
        "generator": generator,
        **_summary(df),
        "by_nsites": {k: by_bin[k] for k in order if k in by_bin},
        "by_crystal_system": grouped("crystal_system"),
        "by_formula_in_train": {
            ("seen" if k == "True" else "unseen"): v for k, v in grouped("formula_in_train").items()
        },
        "generation": generation or {},
        **_extra_summaries(df, dedup_ids, prompt_groups),
    }


def _extra_summaries(
    df: pd.DataFrame, dedup_ids: Iterable[str] | None, prompt_groups: dict[str, int] | None
) -> dict[str, Any]:
    # a convention counts where every item has its verdict (tables built by hand may lack one)
    scored = [DEFAULT_CONVENTION] + [
        c
        for c in OTHER_CONVENTIONS
        if f"matched_{convention_slug(c)}" in df and df[f"matched_{convention_slug(c)}"].notna().all()
    ]
    out: dict[str, Any] = {
        "default_convention": DEFAULT_CONVENTION,
        "conventions": {c: _summary(df, c) for c in scored},
    }
    if dedup_ids is not None:
        keep = set(dedup_ids)
        out["deduplicated"] = {c: _summary(df[df["id"].isin(keep)], c) for c in out["conventions"]}
    if prompt_groups is not None:
        from crucible.crystal.csp import per_prompt_rates

        out["per_prompt"] = {}
        for c in out["conventions"]:
            suffix = "" if c == DEFAULT_CONVENTION else f"_{convention_slug(c)}"
            frame = pd.DataFrame({"id": df["id"], "matched": df[f"matched{suffix}"].astype(bool)})
            rates = per_prompt_rates(frame, prompt_groups, ("matched",))
            out["per_prompt"][c] = {
                "match_rate": rates["matched_per_prompt"],
                "n_prompts": rates["n_prompts"],
                "n_items": rates["n_items"],
            }
    return out


def _rate(block: dict[str, Any] | None) -> float | None:
    """A block's match rate (percent), or None where it scored no item: an empty subset prints
    "–", not 0 %."""
    if not block or not block.get("total"):
        return None
    return block.get("match_rate")


def generator_table(summaries: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per responder: the scores of its summary, each rate beside the number of items it
    is over. Generation time is not a column (it differs between runs, and the table must not):
    it stays in the summary's ``generation`` record."""
    from crucible.potentials.provenance import provenance_text

    rows = []
    for s in summaries:
        sub = s.get("by_formula_in_train")
        row = {
            "generator": s["generator"],
            "match_rate": _rate(s),
            "mean_rms_dist": s["mean_rms_dist"],
            "matched": s["matched"],
            "total": s["total"],
        }
        for subset in ("seen", "unseen"):
            # a subset without items is absent from the summary's groups
            row[f"total_{subset}"] = None if sub is None else int((sub.get(subset) or {}).get("total", 0))
            row[f"match_rate_{subset}"] = None if sub is None else _rate(sub.get(subset))
        row.update({f"fail_{r}": int(s["failures"].get(r, 0)) for r in parsing.REASONS})
        # the potential that relaxed mlip-search's candidates (none for other generators)
        row["potential"] = provenance_text((s.get("generation") or {}).get("potential") or {}) or None
        for c in OTHER_CONVENTIONS:
            other = (s.get("conventions") or {}).get(c, {})
            row[f"match_rate_{convention_slug(c)}"] = _rate(other)
            row[f"mean_rms_dist_{convention_slug(c)}"] = other.get("mean_rms_dist")
        dedup = (s.get("deduplicated") or {}).get(DEFAULT_CONVENTION)
        row["match_rate_dedup"] = _rate(dedup)
        row["total_dedup"] = (dedup or {}).get("total")
        per_prompt = (s.get("per_prompt") or {}).get(DEFAULT_CONVENTION, {})
        row["match_rate_per_prompt"] = per_prompt.get("match_rate") if per_prompt.get("n_prompts") else None
        row["n_prompts"] = per_prompt.get("n_prompts")
        rows.append(row)
    df = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    for col in FLOAT_COLUMNS:
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    for col in COUNT_COLUMNS:
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("Int64")
    return df


TABLE_COLUMNS = (
    "generator",
    "match_rate",
    "mean_rms_dist",
    "matched",
    "total",
    "total_seen",
    "match_rate_seen",
    "total_unseen",
    "match_rate_unseen",
    *(f"fail_{r}" for r in parsing.REASONS),
    "potential",
    *(f"{m}_{convention_slug(c)}" for c in OTHER_CONVENTIONS for m in ("match_rate", "mean_rms_dist")),
    "match_rate_dedup",
    "total_dedup",
    "match_rate_per_prompt",
    "n_prompts",
)

FLOAT_COLUMNS = (
    "match_rate",
    "mean_rms_dist",
    "match_rate_seen",
    "match_rate_unseen",
    *(f"{m}_{convention_slug(c)}" for c in OTHER_CONVENTIONS for m in ("match_rate", "mean_rms_dist")),
    "match_rate_dedup",
    "match_rate_per_prompt",
)

COUNT_COLUMNS = ("total_seen", "total_unseen", "total_dedup", "n_prompts")

# Percentages (0-100): printed with one decimal and "(%)" in the header.
PERCENT_COLUMNS = tuple(c for c in TABLE_COLUMNS if c.startswith("match_rate"))

REASON_WORDS = {
    parsing.NO_RESPONSE: "no response",
    parsing.CUT_OFF: "cut off at the token limit",
    parsing.OFF_SCHEMA: "off the answer schema",
    parsing.NO_JSON: "no JSON",
    parsing.BAD_JSON: "bad JSON",
    parsing.BAD_FIELDS: "bad fields",
    parsing.WRONG_SITE_COUNT: "wrong site count",
    parsing.BAD_CELL: "no cell",
    parsing.SEVERAL_BLOCKS: "several CIF blocks",
    parsing.BAD_STRUCTURE: "bad structure",
    parsing.TIMEOUT: "timeout",
    parsing.NO_MATCH: "no match",
}

TABLE_HEADERS = {
    "generator": "generator",
    "match_rate": f"match rate (%) [{DEFAULT_CONVENTION}]",
    "mean_rms_dist": f"mean RMS (normalised) [{DEFAULT_CONVENTION}]",
    "matched": f"matched (items) [{DEFAULT_CONVENTION}]",
    "total": "test items",
    "total_seen": "seen formula: items",
    "match_rate_seen": f"seen formula: match rate (%) [{DEFAULT_CONVENTION}]",
    "total_unseen": "unseen formula: items",
    "match_rate_unseen": f"unseen formula: match rate (%) [{DEFAULT_CONVENTION}]",
    **{f"fail_{r}": f"failed, {REASON_WORDS[r]} (items) [{DEFAULT_CONVENTION}]" for r in parsing.REASONS},
    "potential": "potential",
    **{f"match_rate_{convention_slug(c)}": f"match rate (%) [{c}]" for c in OTHER_CONVENTIONS},
    **{f"mean_rms_dist_{convention_slug(c)}": f"mean RMS (normalised) [{c}]" for c in OTHER_CONVENTIONS},
    "match_rate_dedup": f"de-duplicated test: match rate (%) [{DEFAULT_CONVENTION}]",
    "total_dedup": "de-duplicated test: items",
    "match_rate_per_prompt": f"per distinct prompt: match rate (%) [{DEFAULT_CONVENTION}]",
    "n_prompts": "distinct prompts",
}

# StructureMatcher's settings per convention, as the captions state them.
MATCHER_SETTINGS = {"cdvae": "ltol 0.3, stol 0.5, angle_tol 10", "pymatgen-default": "ltol 0.2, stol 0.3, angle_tol 5"}


def scored_items_text(summaries: list[dict[str, Any]], dataset: str) -> str:
    """How many test items the rows are over: "6 of the 125 items of the aflow-prototypes test
    split (a seeded subsample)" (the split's size comes from the audit, when the summaries carry it)."""
    from crucible.crystal.audit_table import left_out_text

    return _scored_items(summaries, dataset) + left_out_text([{**s, "dataset": dataset} for s in summaries])


def _scored_items(summaries: list[dict[str, Any]], dataset: str) -> str:
    split = f"the {dataset} test split"
    totals = sorted({int(s["total"]) for s in summaries})
    sizes = sorted({int(s["test_split_items"]) for s in summaries if s.get("test_split_items") is not None})
    if len(totals) != 1:
        return f"the items of {split} each row scored (its test items column)"
    n = totals[0]
    if len(sizes) == 1 and sizes[0] == n:
        return f"all {n} items of {split}"
    if len(sizes) == 1:
        return f"{n} of the {sizes[0]} items of {split} (a seeded subsample)"
    return f"{n} item{'s' if n != 1 else ''} of {split}"


def table_caption(summaries: list[dict[str, Any]], dataset: str) -> str:
    conventions = "; ".join(f"[{c}] {MATCHER_SETTINGS[c]}" for c in CONVENTION_NAMES)
    return (
        f"One row per generator or language model on {scored_items_text(summaries, dataset)}, scored as "
        f"OpenCompass scores MP-20: pymatgen StructureMatcher against the reference ({conventions}; "
        f"{TIMEOUT_S:g} s per item and convention); match rates in percent of the items of their column; "
        "RMS is StructureMatcher's RMS displacement normalised by (V/n)^(1/3), mean over matched items "
        "(dimensionless, lower is better); failures count items by the reason they did not match."
    )


def table_notes(dataset: str) -> str:
    return (
        "Seen/unseen formula: whether the item's anonymised formula occurs in the training split; "
        "a rate over no items prints as –. De-duplicated test: the audit's scored items that match no "
        "train or val crystal nor another kept one. Per distinct prompt: every distinct prompt weighs once. "
        "Generation time is not a column, since it differs between runs and this table must not: "
        f"`seconds_per_item` is in `results/crystal/{dataset}/responses/{{generator}}.json` and under "
        f"`generation` in `results/crystal/{dataset}/scores/{{generator}}.json`."
    )


def write_table_files(
    summaries: list[dict[str, Any]], dataset: str, csv: str | os.PathLike, md: str | os.PathLike, tex: str | os.PathLike
) -> pd.DataFrame:
    from crucible.report.tables import write_table

    df = generator_table(summaries)
    write_table(
        df,
        csv=csv,
        md=md,
        tex=tex,
        digits=4,
        title=f"Text-to-crystal on {dataset}",
        caption=table_caption(summaries, dataset),
        notes=table_notes(dataset),
        headers=TABLE_HEADERS,
        percent=PERCENT_COLUMNS,
    )
    return df


def score_response_file(
    prompts: InFile,
    responses: InFile,
    generator: str,
    out: str | os.PathLike,
    out_summary: str | os.PathLike,
    info: str | os.PathLike | None = None,
    timeout: float = TIMEOUT_S,
    progress: bool = True,
    audit: InFile | None = None,
) -> dict[str, Any]:
    """Score one responder's response file ``responses`` against the items of a prompt set
    ``prompts``: the per-item scores (parquet) and their summary (JSON, with the generation sidecar
    ``info`` when it exists; the de-duplicated subset and the test split's size ``test_split_items``
    when the audit summary ``audit`` is given). Returns the summary.

    Args:
        responses: the answers, JSON lines {id, response, error} (generate's or the LLM stage's):
            results/crystal/{dataset}/responses/{responder}.jsonl
        generator: the responder's name (generator or language model), shown in tables
        out: per-item scores to write (parquet: RMS or failure reason, both conventions):
            results/crystal/{dataset}/scores/{responder}.parquet
        out_summary: the summary to write (JSON: match rate in %, mean RMS, failures by reason, rates by size,
            crystal system and seen formula): .../scores/{responder}.json
        prompts: as in :func:`crucible.crystal.generators.write_generator_answers`
        info: the answers' sidecar JSON (parameters, timings), copied into the summary; a path that does not exist is
            skipped (default: none)
        audit: the audit's summary (results/crystal/{dataset}/audit.json): also score its de-duplicated test set
            (default: the whole test set only)
        timeout: seconds per matcher call (an answer or sample under one convention; the audit: a pair of crystals);
            past it the answer is unmatched, reason timeout, and the timeouts are counted (default %(default)s, as
            OpenCompass)
    """
    from pathlib import Path

    from crucible.core.io import read_json, write_json, write_parquet
    from crucible.crystal.csp import prompt_groups, read_dedup_ids
    from crucible.crystal.replies import cut_off_items, item_responses, mark_cut_off, mark_off_schema, off_schema_items
    from crucible.crystal.scoring import score_items_by_convention
    from crucible.llm.files import read_prompt_records

    items = read_prompt_records(prompts)
    answers = item_responses(responses, items, prompts)
    by_convention = score_items_by_convention(answers, items, CONVENTION_NAMES, timeout=timeout, progress=progress)
    cut_off, off_schema = cut_off_items(responses), off_schema_items(responses)
    by_convention = {
        name: mark_off_schema(mark_cut_off(scores, cut_off), off_schema) for name, scores in by_convention.items()
    }
    df = scores_frame(by_convention[DEFAULT_CONVENTION], items, by_convention)
    sidecar = read_json(info) if info and Path(info).exists() else {}
    summary = summarize(df, generator, sidecar, read_dedup_ids(audit), prompt_groups(items))
    if audit:
        # the size of the split the items were drawn from, for the table's caption
        from crucible.crystal.audit_table import site_limit

        audit_summary = read_json(audit)
        summary["test_split_items"] = int(audit_summary["splits"]["test"]["items"])
        summary.update(site_limit(audit_summary))
    write_parquet(df, out, schema=SCORE_SCHEMA)
    write_json(summary, out_summary)
    return summary


def read_summaries(paths: Iterable[str | os.PathLike]) -> list[dict[str, Any]]:
    """The summary JSONs of :func:`score_response_file`, in the given order (the table's rows)."""
    from crucible.core.io import read_json

    return [read_json(p) for p in paths]


def write_table_from_files(inputs: Iterable[InFile], dataset: str, csv: str, md: str, tex: str) -> pd.DataFrame:
    """:func:`write_table_files` of the summary JSONs ``inputs`` (one row each, in their order).

    Args:
        inputs: the summaries score wrote, one per responder, in row (bar) order:
            results/crystal/{dataset}/scores/{responder}.json
        dataset: the dataset's name, printed in the caption (title)
        csv: the table to write (CSV): results/tables/crystal_{dataset}.csv
        md: the table as Markdown, with its caption: results/tables/crystal_{dataset}.md
        tex: the table as LaTeX: results/tables/crystal_{dataset}.tex
    """
    return write_table_files(read_summaries(inputs), dataset, csv, md, tex)
