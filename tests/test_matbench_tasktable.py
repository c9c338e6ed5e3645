"""The Matbench task table and task-overlap table, measured on real tasks (cleaned from the pinned
crabnet wheel): rows, duplicate formulas, class balance, the documented expt_gap / expt_is_metal
pair, and the files `crucible matbench tasks-table` writes."""

from __future__ import annotations

import pytest

from crucible.core.errors import ConfigError
from crucible.core.io import write_json, write_parquet
from crucible.matbench.tasktable import build_tables, overlap_rows, reduced_formulas, task_row, write_task_tables

from helpers import clean_task, task_formulas


def test_steels_row_counts_what_the_data_holds(members):
    data, card, _ = clean_task("matbench_steels")
    row = task_row(card, data)
    reduced = reduced_formulas(data["formula"])
    assert row["n"] == len(data) == 312 and row["type"] == "regression"
    assert row["distinct_reduced_formulas"] == reduced.nunique()
    shared = reduced.duplicated(keep=False).mean() * 100
    assert row["dup_formula_rows_pct"] == pytest.approx(shared)
    assert row["class_balance"] == "–" and "smallest task" in row["notes"]


def test_classification_balance_and_the_documented_pair(members):
    gap, gap_card, _ = clean_task("matbench_expt_gap")
    metal, metal_card, _ = clean_task("matbench_expt_is_metal")
    row = task_row(metal_card, metal)
    n_true = int(metal["target"].sum())
    assert row["class_balance"] == f"{n_true} true / {len(metal) - n_true} false"
    (pair,) = overlap_rows({"matbench_expt_gap": gap, "matbench_expt_is_metal": metal})
    assert pair["documented_pair"] and pair["task_a"] == "matbench_expt_gap"
    shared = set(reduced_formulas(gap["formula"])) & set(reduced_formulas(metal["formula"]))
    assert pair["shared_reduced_formulas"] == len(shared) > 0
    assert pair["shared_structures"] is None  # composition tasks: no structures to compare
    tasks, overlaps = build_tables(
        {"matbench_expt_is_metal": metal_card, "matbench_expt_gap": gap_card},
        {"matbench_expt_is_metal": metal, "matbench_expt_gap": gap},
    )
    assert tasks["n"].tolist() == sorted([len(gap), len(metal)])  # smallest task first
    assert len(overlaps) == 1


def test_formulas_are_the_wheels_in_file_order(members):
    data, _, _ = clean_task("matbench_steels")
    assert data["formula"].tolist() == task_formulas()["matbench_steels"]


def test_cards_and_data_of_different_tasks_are_refused(members, tmp_path):
    data, card, _ = clean_task("matbench_steels")
    write_json(card, tmp_path / "matbench_steels.json")
    write_parquet(data, tmp_path / "matbench_glass.parquet")
    with pytest.raises(ConfigError, match="--cards and --data name different tasks"):
        write_task_tables(
            [str(tmp_path / "matbench_steels.json")],
            [str(tmp_path / "matbench_glass.parquet")],
            *(str(tmp_path / n) for n in ("a.csv", "a.md", "b.csv", "b.md")),
        )
    assert not (tmp_path / "a.csv").exists()


def test_task_table_headers_are_words_and_an_empty_overlap_table_says_so(members, tmp_path):
    from crucible.cli import main
    from crucible.core.io import write_json, write_parquet

    from helpers import clean_task

    data, card, _ = clean_task("matbench_steels")
    write_json(card, tmp_path / "matbench_steels.json")
    write_parquet(data, tmp_path / "matbench_steels.parquet")
    out = {k: tmp_path / f"{k}" for k in ("t.csv", "t.md", "o.csv", "o.md")}
    assert (
        main(
            [
                "matbench",
                "tasks-table",
                "--cards",
                str(tmp_path / "matbench_steels.json"),
                "--data",
                str(tmp_path / "matbench_steels.parquet"),
                "--out-csv",
                str(out["t.csv"]),
                "--out-md",
                str(out["t.md"]),
                "--out-overlap-csv",
                str(out["o.csv"]),
                "--out-overlap-md",
                str(out["o.md"]),
            ]
        )
        == 0
    )
    header = next(line for line in out["t.md"].read_text().splitlines() if line.startswith("| "))
    assert "mad_or_frac_true" not in header and "dup_formula_rows_pct" not in header and "inputs_here" not in header
    overlap = out["o.md"].read_text()
    assert "No two of the configured tasks share a reduced formula" in overlap
    # The CSV keeps machine names for tools.
    assert "mad_or_frac_true" in out["t.csv"].read_text()
