"""Per-item scores, their summaries, the generator table and the match-rate-by-size figure."""

from __future__ import annotations

import os
from typing import Any, Iterable

import numpy as np
import pandas as pd
import pyarrow as pa

from crucible.crystal import parsing
from crucible.crystal.scoring import TIMEOUT_S, ItemScore, MatchRateMetric

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
)

# Size bins of the figure and of the summary (MP-20 has at most 20 sites).
NSITE_BINS = [(1, 2), (3, 4), (5, 6), (7, 8), (9, 12), (13, 16), (17, 20), (21, 10**9)]


def nsite_bin(n: int) -> str:
    for lo, hi in NSITE_BINS:
        if lo <= n <= hi:
            return f"{lo}-{hi}" if hi < 10**9 else f">{lo - 1}"
    return "?"


def scores_frame(scores: list[ItemScore], items: list[dict[str, Any]]) -> pd.DataFrame:
    meta = {it["id"]: it["meta"] for it in items}
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
        }
        for s in scores
    ]
    return pd.DataFrame(rows, columns=SCORE_SCHEMA.names)


def _summary(df: pd.DataFrame) -> dict[str, Any]:
    metric = MatchRateMetric()
    metric.update(
        ItemScore(r.id, bool(r.matched), None if not r.matched else float(r.rms_dist), r.reason)
        for r in df.itertuples()
    )
    return metric.compute()


def summarize(df: pd.DataFrame, generator: str, generation: dict[str, Any] | None = None) -> dict[str, Any]:
    """OpenCompass's four numbers, failures by reason, and the match rate by size, system and subset."""

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
    }


def generator_table(summaries: Iterable[dict[str, Any]]) -> pd.DataFrame:
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
        rows.append(row)
    df = pd.DataFrame(rows)
    for col in ("mean_rms_dist", "match_rate_seen", "match_rate_unseen", "seconds_per_item"):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    return df


TABLE_HEADERS = {
    "match_rate": "match rate (%)",
    "mean_rms_dist": "mean RMS",
    "match_rate_seen": "seen formula (%)",
    "match_rate_unseen": "unseen formula (%)",
    "seconds_per_item": "s/item",
    **{f"fail_{r}": r.replace("_", " ") for r in parsing.REASONS},
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
        "angle_tol 10; 10 s per item); failures by reason; s/item is generation time."
    )
    write_table(df, csv=csv, md=md, tex=tex, digits=4, caption=caption, headers=TABLE_HEADERS)
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
) -> dict[str, Any]:
    """Score one responder's response file against the items of a prompt set: the per-item
    scores (parquet) and their summary (JSON, with the generation sidecar ``info_path`` when it
    exists). Returns the summary."""
    from pathlib import Path

    from crucible.crystal.scoring import item_responses, score_items
    from crucible.io import read_json, write_json, write_parquet
    from crucible.llm.files import read_prompt_records

    items = read_prompt_records(prompts_path)
    responses = item_responses(responses_path, items, prompts_path)
    df = scores_frame(score_items(responses, items, timeout=timeout, progress=progress), items)
    info = read_json(info_path) if info_path and Path(info_path).exists() else {}
    summary = summarize(df, generator, info)
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
