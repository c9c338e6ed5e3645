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


def generator_table(summaries: Iterable[dict[str, Any]]) -> pd.DataFrame:
    from crucible.mlip.calculators import provenance_text

    rows = []
    for s in summaries:
        sub = s.get("by_formula_in_train", {})
        row = {
            "generator": s["generator"],
            "match_rate": s["match_rate"],
            "mean_rms_dist": s["mean_rms_dist"],
            "matched": s["matched"],
            "total": s["total"],
            "match_rate_seen": sub.get("seen", {}).get("match_rate"),
            "match_rate_unseen": sub.get("unseen", {}).get("match_rate"),
        }
        row.update({f"fail_{r}": int(s["failures"].get(r, 0)) for r in parsing.REASONS})
        row["seconds_per_item"] = (s.get("generation") or {}).get("seconds_per_item")
        # the potential that relaxed mlip-search's candidates ("" for other generators)
        row["potential"] = provenance_text((s.get("generation") or {}).get("potential") or {})
        for c in OTHER_CONVENTIONS:
            other = (s.get("conventions") or {}).get(c, {})
            row[f"match_rate_{convention_slug(c)}"] = other.get("match_rate")
            row[f"mean_rms_dist_{convention_slug(c)}"] = other.get("mean_rms_dist")
        row["match_rate_dedup"] = (s.get("deduplicated") or {}).get(DEFAULT_CONVENTION, {}).get("match_rate")
        row["total_dedup"] = (s.get("deduplicated") or {}).get(DEFAULT_CONVENTION, {}).get("total")
        per_prompt = (s.get("per_prompt") or {}).get(DEFAULT_CONVENTION, {})
        row["match_rate_per_prompt"] = per_prompt.get("match_rate")
        row["n_prompts"] = per_prompt.get("n_prompts")
        rows.append(row)
    df = pd.DataFrame(rows)
    for col in FLOAT_COLUMNS:
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    for col in ("total_dedup", "n_prompts"):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("Int64")
    return df


FLOAT_COLUMNS = (
    "mean_rms_dist",
    "match_rate_seen",
    "match_rate_unseen",
    "seconds_per_item",
    *(f"{m}_{convention_slug(c)}" for c in OTHER_CONVENTIONS for m in ("match_rate", "mean_rms_dist")),
    "match_rate_dedup",
    "match_rate_per_prompt",
)

TABLE_HEADERS = {
    "match_rate": f"match rate (%) [{DEFAULT_CONVENTION}]",
    "mean_rms_dist": f"mean RMS [{DEFAULT_CONVENTION}]",
    "match_rate_seen": f"seen formula (%) [{DEFAULT_CONVENTION}]",
    "match_rate_unseen": f"unseen formula (%) [{DEFAULT_CONVENTION}]",
    "seconds_per_item": "s/item",
    **{f"fail_{r}": f"{r.replace('_', ' ')} [{DEFAULT_CONVENTION}]" for r in parsing.REASONS},
    **{f"match_rate_{convention_slug(c)}": f"match rate (%) [{c}]" for c in OTHER_CONVENTIONS},
    **{f"mean_rms_dist_{convention_slug(c)}": f"mean RMS [{c}]" for c in OTHER_CONVENTIONS},
    "match_rate_dedup": f"de-duplicated test: match rate (%) [{DEFAULT_CONVENTION}]",
    "total_dedup": "de-duplicated test: items",
    "match_rate_per_prompt": f"per distinct prompt: match rate (%) [{DEFAULT_CONVENTION}]",
    "n_prompts": "distinct prompts",
}


def match_rate_by_nsites_figure(summaries: list[dict[str, Any]], dataset: str):
    import matplotlib.pyplot as plt

    labels = [nsite_bin(lo) for lo, _ in NSITE_BINS]
    present = [lab for lab in labels if any(lab in s["by_nsites"] for s in summaries)]
    x = np.arange(len(present))
    width = 0.8 / max(1, len(summaries))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(present) + 3), 4.2))
    for i, s in enumerate(summaries):
        rates = [s["by_nsites"].get(lab, {}).get("match_rate", np.nan) for lab in present]
        ax.bar(
            x + (i - (len(summaries) - 1) / 2) * width,
            rates,
            width,
            label=f"{s['generator']} ({s['match_rate']:.1f} %)",
        )
    counts = [next((s["by_nsites"][lab]["total"] for s in summaries if lab in s["by_nsites"]), 0) for lab in present]
    ax.set_xticks(x, [f"{lab}\n(n={c})" for lab, c in zip(present, counts)])
    ax.set_xlabel("sites in the reference cell")
    ax.set_ylabel("match rate (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"{dataset}: StructureMatcher match rate by cell size")
    ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def write_table_files(
    summaries: list[dict[str, Any]], dataset: str, csv: str | os.PathLike, md: str | os.PathLike, tex: str | os.PathLike
) -> pd.DataFrame:
    from crucible.report.tables import write_table

    df = generator_table(summaries)
    caption = (
        f"Text-to-crystal on {dataset}: OpenCompass MP-20 scoring (StructureMatcher ltol 0.3, stol 0.5, "
        "angle_tol 10 [cdvae]; and ltol 0.2, stol 0.3, angle_tol 5 [pymatgen-default]; 10 s per item "
        "and convention); failures by reason; s/item is generation time."
    )
    write_table(
        df,
        csv=csv,
        md=md,
        tex=tex,
        digits=4,
        title=f"Text-to-crystal on {dataset}",
        caption=caption,
        headers=TABLE_HEADERS,
    )
    return df


def score_response_file(
    prompts_path: str | os.PathLike,
    responses_path: str | os.PathLike,
    generator: str,
    out: str | os.PathLike,
    out_summary: str | os.PathLike,
    info_path: str | os.PathLike | None = None,
    timeout: float = TIMEOUT_S,
    progress: bool = False,
    audit_path: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Score one responder's response file against the items of a prompt set: the per-item
    scores (parquet) and their summary (JSON, with the generation sidecar ``info_path`` when it
    exists, the de-duplicated subset when the audit summary ``audit_path`` is given). Returns
    the summary."""
    from pathlib import Path

    from crucible.crystal.csp import prompt_groups, read_dedup_ids
    from crucible.crystal.scoring import item_responses, score_items_by_convention
    from crucible.io import read_json, write_json, write_parquet
    from crucible.llm.files import read_prompt_records

    items = read_prompt_records(prompts_path)
    responses = item_responses(responses_path, items, prompts_path)
    by_convention = score_items_by_convention(responses, items, CONVENTION_NAMES, timeout=timeout, progress=progress)
    df = scores_frame(by_convention[DEFAULT_CONVENTION], items, by_convention)
    info = read_json(info_path) if info_path and Path(info_path).exists() else {}
    summary = summarize(df, generator, info, read_dedup_ids(audit_path), prompt_groups(items))
    write_parquet(df, out, schema=SCORE_SCHEMA)
    write_json(summary, out_summary)
    return summary


def read_summaries(paths: Iterable[str | os.PathLike]) -> list[dict[str, Any]]:
    """The summary JSONs of :func:`score_response_file`, in the given order (the table's rows)."""
    from crucible.io import read_json

    return [read_json(p) for p in paths]


def write_match_rate_figure(
    summaries: list[dict[str, Any]], dataset: str, png: str | os.PathLike, pdf: str | os.PathLike
) -> None:
    from crucible.report.figures import save_figure

    save_figure(match_rate_by_nsites_figure(summaries, dataset), png, pdf)
