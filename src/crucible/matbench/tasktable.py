"""The paper's task table, plus the facts about the data that users trip over, measured.

- duplicate formulas: the share of rows whose reduced formula occurs more than once in a task
  (a composition-only model cannot tell those rows apart);
- shared inputs: pairs of tasks whose inputs overlap (mp_gap / mp_is_metal share all rows);
- class balance of the classification tasks;
- units that mislead, such as perovskites' formation energy per unit cell, not per atom.
"""

from __future__ import annotations

import itertools
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from crucible.core.io import InFile

NOTES = {
    "matbench_perovskites": "target in eV per unit cell (not per atom); 98% of rows share a reduced formula",
    "matbench_mp_gap": "same structures as matbench_mp_is_metal",
    "matbench_mp_is_metal": "same structures as matbench_mp_gap",
    "matbench_log_gvrh": "same structures as matbench_log_kvrh",
    "matbench_log_kvrh": "same structures as matbench_log_gvrh",
    "matbench_steels": "compositions as atomic fractions; smallest task (312 rows)",
}

# Pairs that the Matbench docs say share inputs; every other overlapping pair is reported too.
KNOWN_PAIRS = (
    ("matbench_mp_gap", "matbench_mp_is_metal"),
    ("matbench_log_gvrh", "matbench_log_kvrh"),
    ("matbench_expt_gap", "matbench_expt_is_metal"),
)


@lru_cache(maxsize=None)
def reduced_formula(formula: str) -> str:
    from pymatgen.core import Composition

    return Composition(formula).reduced_formula


def reduced_formulas(formulas: pd.Series) -> pd.Series:
    distinct = pd.unique(formulas)
    mapping = {f: reduced_formula(f) for f in distinct}
    return formulas.map(mapping)


# Markdown/LaTeX headers of the task table (the CSV keeps the machine names).
TASK_TABLE_HEADERS = {
    "inputs_here": "inputs available here",
    "n": "rows",
    "mad_or_frac_true": "MAD (target unit) or fraction true",
    "distinct_reduced_formulas": "distinct reduced formulas",
    "dup_formula_rows_pct": "rows sharing a formula (%)",
    "class_balance": "class balance",
}
OVERLAP_TABLE_HEADERS = {
    "task_a": "task A",
    "task_b": "task B",
    "shared_reduced_formulas": "shared reduced formulas",
    "share_of_a_pct": "share of A (%)",
    "share_of_b_pct": "share of B (%)",
    "shared_structures": "shared structures",
    "same_rows_in_same_order": "same rows, same order",
    "documented_pair": "documented pair",
}


def task_row(card: dict[str, Any], data: pd.DataFrame) -> dict[str, Any]:
    reduced = reduced_formulas(data["formula"])
    counts = reduced.map(reduced.value_counts())
    row = {
        "task": card["task"],
        "type": card["task_type"],
        "input": card["input_type"],
        "inputs_here": card.get("inputs_available", "composition"),
        "target": card["target"],
        "unit": card.get("unit") or "–",
        "n": card["n"],
        "mad_or_frac_true": card.get("mad", card.get("frac_true")),
        "distinct_reduced_formulas": int(reduced.nunique()),
        "dup_formula_rows_pct": 100.0 * float(np.mean(counts.to_numpy() > 1)),
        "class_balance": "–",
        "notes": NOTES.get(card["task"], ""),
    }
    if card["task_type"] == "classification":
        n_true = int(data["target"].sum())
        row["class_balance"] = f"{n_true} true / {len(data) - n_true} false"
    return row


def overlap_rows(datas: dict[str, pd.DataFrame]) -> list[dict[str, Any]]:
    keys = {t: set(reduced_formulas(d["formula"])) for t, d in datas.items()}
    structures = {t: set(d["structure"].dropna()) for t, d in datas.items()}
    rows = []
    for a, b in itertools.combinations(sorted(datas), 2):
        shared = len(keys[a] & keys[b])
        known = (a, b) in KNOWN_PAIRS or (b, a) in KNOWN_PAIRS
        if shared == 0 and not known:
            continue
        same_rows = (
            len(datas[a]) == len(datas[b]) and (datas[a]["formula"].to_numpy() == datas[b]["formula"].to_numpy()).all()
        )
        rows.append(
            {
                "task_a": a,
                "task_b": b,
                "shared_reduced_formulas": shared,
                "share_of_a_pct": 100.0 * shared / max(len(keys[a]), 1),
                "share_of_b_pct": 100.0 * shared / max(len(keys[b]), 1),
                "shared_structures": len(structures[a] & structures[b]) if structures[a] and structures[b] else None,
                "same_rows_in_same_order": bool(same_rows),
                "documented_pair": known,
            }
        )
    return rows


def build_tables(cards: dict[str, dict[str, Any]], datas: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, pd.DataFrame]:
    order = sorted(cards, key=lambda t: (cards[t]["n"], t))
    tasks = pd.DataFrame([task_row(cards[t], datas[t]) for t in order])
    overlaps = pd.DataFrame(
        overlap_rows(datas),
        columns=[
            "task_a",
            "task_b",
            "shared_reduced_formulas",
            "share_of_a_pct",
            "share_of_b_pct",
            "shared_structures",
            "same_rows_in_same_order",
            "documented_pair",
        ],
    )
    overlaps = overlaps.sort_values(["shared_reduced_formulas", "task_a", "task_b"], ascending=[False, True, True])
    return tasks, overlaps.reset_index(drop=True)


def write_task_tables(
    cards: list[InFile],
    data: list[InFile],
    out_csv: str,
    out_md: str,
    out_overlap_csv: str,
    out_overlap_md: str,
) -> None:
    """The task table and the task-overlap table from the clean stage's cards and data files
    (each named after its task, ``<task>.json`` / ``<task>.parquet``).

    Args:
        cards: task cards results/matbench/data/{task}.json, one per task
        data: clean task tables results/matbench/data/{task}.parquet, in --cards order
        out_csv: the task table, CSV
        out_md: the task table, Markdown
        out_overlap_csv: the task-overlap table (duplicates, shared inputs, class balance), CSV
        out_overlap_md: the task-overlap table, Markdown
    """
    from pathlib import Path

    from crucible.core.errors import ConfigError
    from crucible.core.io import read_json, read_parquet
    from crucible.report.tables import write_table

    card_of = {Path(p).stem: read_json(p) for p in cards}
    data_of = {Path(p).stem: read_parquet(p, columns=["mbid", "formula", "structure", "target"]) for p in data}
    if set(card_of) != set(data_of):
        raise ConfigError("tasks-table: --cards and --data name different tasks")
    tasks_df, overlap_df = build_tables(card_of, data_of)
    write_table(
        tasks_df,
        csv=out_csv,
        md=out_md,
        digits=4,
        headers=TASK_TABLE_HEADERS,
        percent=("dup_formula_rows_pct",),
        title="Matbench v0.1 tasks (measured from the cleaned data)",
        caption=f"The {len(tasks_df)} configured task(s), all rows of each cleaned task table (before the "
        "5-fold split): size, target and its unit, spread of the target (MAD, in the target's unit; "
        "classification: fraction true) and how many rows share a reduced formula.",
    )
    write_table(
        overlap_df,
        csv=out_overlap_csv,
        md=out_overlap_md,
        digits=1,
        headers=OVERLAP_TABLE_HEADERS,
        title="Tasks that share inputs (distinct reduced formulas in common)",
        caption=f"Every pair of the {len(tasks_df)} configured task(s) whose cleaned tables share a reduced "
        "formula (all rows, before the split): how many, as a share of each task, and whether the pair shares "
        "its rows or is documented by Matbench.",
        empty_note="No two of the configured tasks share a reduced formula.",
    )
