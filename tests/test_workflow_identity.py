"""A result is what made it (issue 29), through the real Snakefile of a copy of the repository
(so that its library can be edited): every module a job imports is in its code digest, a run with
other params under the same model name is refused before any job runs, a variant under its own
name runs beside it without touching it, an unused entry plans nothing, a one-line edit of one
library module replans the jobs whose command imports it, a comment or a version bump nothing,
and a summary refuses inputs of two meanings."""

from __future__ import annotations

import json
import shutil

import pytest

from crucible.identity.code_closure import digest
from crucible.identity.job_code import MODULES_LOG_VAR, code_identity
from crucible.identity.records import journal_path

from helpers import REPO, planned_jobs, provide_downloads, run_snakemake

TASK = "matbench_steels"
FULL = {
    "matbench": {
        "tasks": [TASK],
        "models": ["dummy", "gbm-magpie"],
        "model_params": {"gbm-magpie": {"max_iter": 50}},
    }
}
QUICK = {"matbench": {**FULL["matbench"], "run_name": "quick", "model_params": {"gbm-magpie": {"max_iter": 3}}}}
VARIANT = {
    "matbench": {
        "tasks": [TASK],
        "run_name": "quick",
        "models": ["dummy", "gbm-quick"],
        "custom_models": {"gbm-quick": {"model": "gbm-magpie", "params": {"max_iter": 3}}},
    }
}
# Per-model outputs of the full run that no other run may touch.
PER_MODEL = ("results/matbench/predictions/gbm-magpie", "results/matbench/scores/gbm-magpie")


def _copy_repo(dest):
    dest.mkdir()
    for name in ("Snakefile", "workflow", "config", "profiles", "envs", "src"):
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, dest / name)
    return dest


def _snapshot(work, roots=PER_MODEL):
    files = [p for root in roots for p in sorted((work / root).rglob("*")) if p.is_file()]
    return {str(p.relative_to(work)): (p.read_bytes(), p.stat().st_mtime_ns) for p in files}


def _mae(work, model):
    return json.loads((work / f"results/matbench/scores/{model}/{TASK}.json").read_text())["leaderboard_value"]


@pytest.mark.slow
def test_identity_through_the_dag(tmp_path, venv_env):
    repo = _copy_repo(tmp_path / "repo")
    modules_log = tmp_path / "modules.jsonl"
    env = {**venv_env, "PYTHONPATH": str(repo / "src"), MODULES_LOG_VAR: str(modules_log)}
    work = tmp_path / "run"
    work.mkdir()
    provide_downloads(work, "matbench/metadata", f"matbench/mirror/{TASK}")
    snakefile = repo / "Snakefile"

    def run(config, *args, ok=True):
        proc = run_snakemake(work, config, "matbench", *args, env=env, snakefile=snakefile, timeout=900)
        assert (proc.returncode == 0) == ok, proc.stdout[-3000:] + proc.stderr[-4000:]
        return proc

    def dry(config):
        proc = run(config, "--dry-run")
        return planned_jobs(proc.stdout + proc.stderr)

    run(FULL)
    full_mae = _mae(work, "gbm-magpie")
    # The static closure holds every crucible module each job of the run imported.
    jobs = [json.loads(line) for line in modules_log.read_text().splitlines()]
    assert {j["command"] for j in jobs} >= {"matbench clean", "matbench folds", "matbench predict", "matbench score"}
    for job in jobs:
        static = set(code_identity(*job["command"].split(), tuple(map(tuple, job["roots"])))["modules"])
        assert set(job["modules"]) - static == set(), job["command"]
    before = _snapshot(work)
    board = (work / "results/tables/matbench_leaderboard.csv").read_bytes()

    # Every output has its record: the job's identity, its code, and what its names mean.
    record = json.loads((work / f"results/matbench/scores/gbm-magpie/.identity/{TASK}.json.json").read_text())
    assert record["command"] == "matbench score" and len(record["identity"]) == 64
    assert set(record["names"]) == {"matbench/settings", "matbench/model/gbm-magpie"}
    board_record = json.loads((work / "results/tables/.identity/matbench_leaderboard.csv.json").read_text())
    assert {"matbench/model/dummy", "matbench/model/gbm-magpie"} <= set(board_record["names"])
    names = json.loads((work / "results/.identity/names.json").read_text())
    assert names["matbench/model/gbm-magpie"]["spec"] == {"registered": "gbm-magpie", "params": {"max_iter": 50}}
    assert not any(k.startswith(("crystal/", "reactions/", "mlip/")) for k in names)  # not run: not recorded

    # An unused entry plans nothing.
    unused = {"matbench": {**FULL["matbench"], "custom_models": {"mine": {"class": "sklearn.linear_model:Ridge"}}}}
    assert dry(unused) == {}

    # The case: a named run with other params under the same name is refused before any
    # job runs, naming both meanings and how to give the new one its own name.
    refused = run(QUICK, ok=False)
    message = refused.stdout + refused.stderr
    assert '"max_iter":50' in message and '"max_iter":3' in message, message[-3000:]
    assert "matbench.custom_models" in message and "crucible names forget matbench/model/gbm-magpie" in message
    assert _snapshot(work) == before and not (work / "results/runs/quick").exists()

    # The same settings under a name of their own: run beside the full run's, which stays as it was.
    run(VARIANT)
    quick_mae = _mae(work, "gbm-quick")
    assert quick_mae != full_mae
    assert _snapshot(work) == before and _mae(work, "gbm-magpie") == full_mae
    assert "gbm-quick" in (work / "results/runs/quick/tables/matbench_leaderboard.csv").read_text()
    assert (work / "results/tables/matbench_leaderboard.csv").read_bytes() == board
    assert dry(FULL) == {}

    # A one-line edit of the leaderboard module replans the one job whose command imports it (the
    # leaderboard): nothing else of the run reaches that module.
    scoring = repo / "src/crucible/matbench/leaderboard.py"
    original = scoring.read_text()
    scoring.write_text(original + "\n_EDITED_FOR_A_TEST = 1\n")
    edited = dry(FULL)
    assert set(edited) == {"build_matbench_leaderboard", "matbench"} and edited["build_matbench_leaderboard"] == 1, (
        edited
    )
    # ... a comment alone nothing, and a version bump alone nothing.
    scoring.write_text(original + "\n# a comment\n")
    assert dry(FULL) == {}
    scoring.write_text(original)
    init = repo / "src/crucible/__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "9.'))
    assert dry(FULL) == {}

    # A record edited by hand no longer matches the journal: its output is remade (issue 54).
    score_record = work / f"results/matbench/scores/dummy/.identity/{TASK}.json.json"
    doc = json.loads(score_record.read_text())
    doc["names"]["matbench/model/gbm-magpie"] = "0" * 64
    score_record.write_text(json.dumps(doc))
    assert dry(FULL).get("score_matbench") == 1
    # A summary of inputs whose records disagree on a name's meaning (each as its job wrote it,
    # journal and all) is refused, naming the file.
    (work / journal_path(f"results/matbench/scores/dummy/{TASK}.json")).write_text(digest(doc) + "\n")
    run(FULL, "--forcerun", "build_matbench_leaderboard", ok=False)
    log = (work / "logs/matbench/default/leaderboard.log").read_text()
    assert f"results/matbench/scores/dummy/{TASK}.json" in log and "two meanings" in log, log[-2000:]
    print(f"gbm-magpie MAE: full run (max_iter 50) {full_mae:.2f}; variant gbm-quick (max_iter 3) {quick_mae:.2f}")
    print(f"after a one-line edit of matbench/leaderboard.py: {edited}")
