"""crucible.crystal.report on real crystals (AFLOW prototypes from the pinned pymatgen wheel):
one response file scored into per-item scores and a summary, the summary's groupings, the
generator table and figure; a response file that does not belong to the prompt set is refused
naming its file and line."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from crucible.crystal import items, parsing, report
from crucible.crystal.generators import answer_from_structure
from crucible.crystal.scoring import reference_structure
from crucible.errors import DataValidationError

from helpers import REPO


@pytest.fixture(scope="module")
def item_files(aflow_file, tmp_path_factory):
    root = tmp_path_factory.mktemp("crystal_report")
    items.build_item_files(
        "aflow",
        "aflow-prototypes",
        [str(aflow_file)],
        REPO / "config" / "crystal_prompts.yaml",
        "composition-v1",
        root / "prompts.jsonl",
        root / "train.jsonl",
        max_sites=8,
        max_test_items=12,
    )
    prompts = [json.loads(line) for line in (root / "prompts.jsonl").read_text().splitlines()]
    return root, prompts


def _responses(prompts):
    """The reference itself (matches) for even items, prose for odd ones, no answer for the last."""
    rows = []
    for i, p in enumerate(prompts):
        if i == len(prompts) - 1:
            rows.append({"id": p["id"], "response": None, "error": "HTTP 500"})
        elif i % 2 == 0:
            ref = reference_structure(p["ground_truth"])
            rows.append({"id": p["id"], "response": answer_from_structure(ref, p["meta"]["elements"]), "error": None})
        else:
            rows.append({"id": p["id"], "response": "I am not sure.", "error": None})
    return rows


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_response_file_is_scored_item_by_item(item_files, tmp_path):
    root, prompts = item_files
    assert len(prompts) == 12
    responses = _write(tmp_path / "gen.jsonl", _responses(prompts))
    info = tmp_path / "gen.json"
    info.write_text(json.dumps({"seconds_per_item": 0.5}))
    summary = report.score_response_file(
        root / "prompts.jsonl", responses, "gen", tmp_path / "s.parquet", tmp_path / "s.json", info_path=info
    )
    df = pd.read_parquet(tmp_path / "s.parquet")
    assert list(df.columns) == report.SCORE_SCHEMA.names
    assert df["id"].tolist() == [p["id"] for p in prompts]
    assert df["matched"].tolist() == [i % 2 == 0 and i != 11 for i in range(12)]
    assert df["rms_dist"][df["matched"]].abs().max() < 1e-6 and df["rms_dist"][~df["matched"]].isna().all()
    assert df["reason"].tolist()[1::2] == [parsing.NO_JSON] * 5 + [parsing.NO_RESPONSE]
    assert df["nsites"].tolist() == [p["meta"]["nsites"] for p in prompts]
    assert json.loads((tmp_path / "s.json").read_text()) == summary
    assert (summary["matched"], summary["total"], summary["match_rate"]) == (6, 12, 50.0)
    assert summary["failures"][parsing.NO_JSON] == 5 and summary["failures"][parsing.NO_RESPONSE] == 1
    assert summary["generation"] == {"seconds_per_item": 0.5}
    # Groupings: every item counted once in each.
    for key in ("by_nsites", "by_crystal_system", "by_formula_in_train"):
        assert sum(g["total"] for g in summary[key].values()) == 12, key
        assert sum(g["matched"] for g in summary[key].values()) == 6, key
    for label, g in summary["by_nsites"].items():
        assert g["total"] == sum(report.nsite_bin(n) == label for n in df["nsites"])
    assert list(summary["by_nsites"]) == [
        b for b in (report.nsite_bin(lo) for lo, _ in report.NSITE_BINS) if b in summary["by_nsites"]
    ]
    # No sidecar: an empty generation record, same scores.
    again = report.score_response_file(
        root / "prompts.jsonl", responses, "gen", tmp_path / "t.parquet", tmp_path / "t.json", info_path=tmp_path / "x"
    )
    assert again["generation"] == {} and again["match_rate"] == 50.0


@pytest.mark.parametrize(
    "lines, match",
    [
        (['{"id": "nope", "response": "x"}'], r"bad.jsonl: line 1: id 'nope' is not an item of .*prompts.jsonl"),
        (["{first}", "", "{first}"], r"bad.jsonl: id '.*' appears on line 1 and again on line 3"),
        (["{first}", "", "not json"], r"bad.jsonl: line 3: not valid JSON"),
        (['{"response": "x"}'], r"bad.jsonl: line 1: field 'id' must be a non-empty string"),
    ],
)
def test_a_response_file_of_another_prompt_set_is_refused(item_files, tmp_path, lines, match):
    root, prompts = item_files
    first = json.dumps({"id": prompts[0]["id"], "response": "x"})
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(line.replace("{first}", first) + "\n" for line in lines))
    with pytest.raises(DataValidationError, match=match):
        report.score_response_file(root / "prompts.jsonl", bad, "g", tmp_path / "o.parquet", tmp_path / "o.json")
    assert not (tmp_path / "o.parquet").exists() and not (tmp_path / "o.json").exists()


def test_score_cli_refuses_two_answers_for_one_item_naming_the_file_and_both_lines(item_files, tmp_path, capsys):
    """One line matching the reference and a later one that does not: neither is kept; exit 2
    with the file and both lines on stderr, and no score file."""
    from crucible.cli import main

    root, prompts = item_files
    rows = _responses(prompts)
    rows.insert(3, {"id": prompts[0]["id"], "response": "I am not sure.", "error": None})
    responses = _write(tmp_path / "twice.jsonl", rows)
    out, summary = tmp_path / "s.parquet", tmp_path / "s.json"
    argv = ["crystal", "score", "--prompts", str(root / "prompts.jsonl"), "--responses", str(responses)]
    assert main([*argv, "--generator", "g", "--out", str(out), "--out-summary", str(summary)]) == 2
    err = capsys.readouterr().err
    assert f"{responses}: id {prompts[0]['id']!r} appears on line 1 and again on line 4" in err, err
    assert not out.exists() and not summary.exists()


def test_nsite_bins_cover_every_size():
    assert [report.nsite_bin(n) for n in (1, 2, 3, 8, 9, 12, 20, 21, 500)] == [
        "1-2",
        "1-2",
        "3-4",
        "7-8",
        "9-12",
        "9-12",
        "17-20",
        ">20",
        ">20",
    ]


def test_generator_table_and_figure_from_summaries(item_files, tmp_path):
    root, prompts = item_files
    paths = []
    for name, rows in (("self", _responses(prompts)), ("none", [{"id": p["id"], "response": "?"} for p in prompts])):
        resp = _write(tmp_path / f"{name}.jsonl", rows)
        report.score_response_file(
            root / "prompts.jsonl", resp, name, tmp_path / f"{name}.parquet", tmp_path / f"{name}.json"
        )
        paths.append(tmp_path / f"{name}.json")
    summaries = report.read_summaries(paths)
    df = report.write_table_files(
        summaries, "aflow-prototypes", tmp_path / "t.csv", tmp_path / "t.md", tmp_path / "t.tex"
    )
    assert df["generator"].tolist() == ["self", "none"]
    assert df["match_rate"].tolist() == [50.0, 0.0] and df["fail_no_json"].tolist() == [5, 12]
    assert (df["matched"] + df[[f"fail_{r}" for r in parsing.REASONS]].sum(axis=1) == df["total"]).all()
    assert pd.read_csv(tmp_path / "t.csv")["generator"].tolist() == ["self", "none"]
    assert "| self |" in (tmp_path / "t.md").read_text() and "match rate (%)" in (tmp_path / "t.md").read_text()
    report.write_match_rate_figure(summaries, "aflow-prototypes", tmp_path / "f.png", tmp_path / "f.pdf")
    assert (tmp_path / "f.png").stat().st_size > 10_000 and (tmp_path / "f.pdf").stat().st_size > 1_000
