"""The audit's table (one row per check, with its count, denominator and share) and the clauses
the crystal captions take from an audit summary (the site limit and what it left out)."""

from __future__ import annotations

import os
from typing import Any

import pandas as pd


def site_limit(audit_summary: dict[str, Any]) -> dict[str, Any]:
    """What a score summary carries from its set's audit for the captions: the site limit and the
    crystals left out over it, per split."""
    return {
        "max_sites": audit_summary.get("max_sites"),
        "left_out_over_max_sites": dict(audit_summary.get("left_out_over_max_sites") or {}),
    }


def left_out_text(summaries: list[dict[str, Any]]) -> str:
    """A caption's clause on the crystals the site limit left out ('' when none was): per dataset,
    from the score summaries (which carry :func:`site_limit`)."""
    parts = []
    for s in summaries:
        left = s.get("left_out_over_max_sites") or {}
        if left:
            split = ", ".join(f"{n} {where}" for where, n in sorted(left.items()))
            part = (
                f"{s.get('dataset') or 'the set'}: {sum(left.values())} with more than {s['max_sites']} sites ({split})"
            )
            if part not in parts:
                parts.append(part)
    return f"; crystals left out by the site limit: {'; '.join(parts)}" if parts else ""


def audit_rows(dataset: str, summary: dict[str, Any]) -> pd.DataFrame:
    """The audit table: one row per check, with its count, denominator and percentage."""
    rows = []

    def add(check: str, split: str, count: int, total: int, note: str = "", share: bool = True) -> None:
        pct = 100.0 * count / total if total and share else None
        rows.append(
            {"check": check, "split": split, "count": int(count), "of": int(total), "percent": pct, "note": note}
        )

    splits = summary["splits"]
    for s, c in splits.items():
        add("items", s, c["items"], c["items"])
        add("distinct structures", s, c["distinct_structures"], c["items"])
        add(
            "duplicates within the split",
            s,
            c["duplicates_within"],
            c["items"],
            "items beyond the first of their cluster",
        )
        add("distinct reduced formulas", s, c["distinct_formulas"], c["items"])
    n_test = splits.get("test", {}).get("items", 0)
    if "val" in splits:
        add("val structure also in train", "val", summary["val_duplicate_in_train"], splits["val"]["items"])
        add("test structure also in val", "test", summary["test_duplicate_in_val"], n_test)
    add("test structure also in train", "test", summary["test_duplicate_in_train"], n_test)
    add("test formula also in train", "test", summary["test_formula_in_train"], n_test)
    add(
        "test formula in train, structure not (polymorph)",
        "test",
        summary["test_polymorph_in_train"],
        n_test,
    )
    scored = summary.get("scored_test_items", n_test)
    add("test items scored", "test", scored, n_test, "after any max_test_items subsample")
    add(
        "de-duplicated test set",
        "test",
        summary["deduplicated_test_items"],
        scored,
        "scored items matching no train or val crystal nor one kept before them",
    )
    if summary.get("deduplicated_unchecked"):
        add(
            "left out of the de-duplicated set unchecked",
            "test",
            summary["deduplicated_unchecked"],
            scored,
            "the cap stopped their comparisons",
        )
    for split, n in (summary.get("left_out_over_max_sites") or {}).items():
        add(
            f"left out: more than {summary['max_sites']} sites",
            split,
            n,
            n + splits.get(split, {}).get("items", 0),
            "before the audit and the benchmark",
        )
    for name, p in summary.get("prompts", {}).items():
        add(
            f"distinct prompts: {name}",
            "test",
            p["distinct_prompts"],
            p["items"],
            f"largest group {p['largest_group']}",
        )
    cross = summary.get("cross_unchecked") or {}
    cross_note = "".join(f"; {n} {pas} unchecked" for pas, n in cross.items() if n)
    cap_note = (
        f"{summary['groups_capped']} group(s) hit the cap of {summary['max_comparisons']} comparisons; "
        f"{summary['unchecked']} structure(s) unchecked within their split{cross_note}"
    )
    add("matcher calls", "all", summary["matcher_calls"], summary["matcher_calls"], cap_note, share=False)
    return pd.DataFrame(rows)


AUDIT_HEADERS = {"check": "check", "split": "split", "count": "count", "of": "out of", "percent": "share (%)"}


def audit_caption(dataset: str, summary: dict[str, Any]) -> str:
    sizes = ", ".join(f"{c['items']} {split}" for split, c in summary["splits"].items())
    left = summary.get("left_out_over_max_sites") or {}
    limit = (
        f"; {sum(left.values())} crystal(s) with more than {summary['max_sites']} sites left out "
        f"({', '.join(f'{n} {s}' for s, n in left.items())})"
        if left
        else ""
    )
    return (
        f"The splits of {dataset} ({sizes} items, before any max_test_items subsample{limit}) compared with "
        f"StructureMatcher ({summary['convention']} convention; at most {summary['max_comparisons']} "
        "comparisons per formula group and pass; a test crystal is in train when any train crystal of its "
        "group matches it); count and out of are items, except in the distinct "
        "prompts rows (distinct prompts out of items) and the last (matcher calls)."
    )


def write_audit_table(
    dataset: str, summary: dict[str, Any], csv: str | os.PathLike, md: str | os.PathLike
) -> pd.DataFrame:
    """The audit table of an audit summary, as CSV (full precision) and Markdown."""
    from crucible.report.tables import write_table

    rows = audit_rows(dataset, summary)
    write_table(
        rows,
        csv=csv,
        md=md,
        digits=2,
        title=f"Leakage and duplicate audit of {dataset}",
        caption=audit_caption(dataset, summary),
        headers=AUDIT_HEADERS,
        percent=("percent",),
    )
    return rows
