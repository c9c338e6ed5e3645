"""A result is what made it, verified (issue 44, items 1-3), through the real Snakefile: a
user's own estimator edited reruns its own jobs and no other model's; a prediction file edited
after its job wrote it (its mtime set back) is refused by the job that reads it, naming the
file, both digests and the rule that made it; an installed distribution edited in place is
refused at planning, naming the file and the distribution."""

from __future__ import annotations

import json
import os
import re
import shutil
import sysconfig
from pathlib import Path

import pandas as pd
import pytest

from helpers import REPO, planned_jobs, provide_downloads, run_snakemake

pytestmark = pytest.mark.slow

TASK = "matbench_steels"
MODULE = """
import numpy as np

from mymodels_shift import SHIFT


class MeanPlusShift:
    def __init__(self, random_state=None):
        self.random_state = random_state

    def get_params(self, deep=True):
        return {"random_state": self.random_state}

    def set_params(self, **params):
        self.__dict__.update(params)
        return self

    def fit(self, X, y):
        self.value_ = float(np.mean(y))
        return self

    def predict(self, X):
        return np.full(len(X), self.value_ + SHIFT)
"""
CONFIG = {
    "matbench": {
        "tasks": [TASK],
        "models": ["dummy", "mine"],
        "custom_models": {"mine": {"class": "mymodels:MeanPlusShift", "input": "composition"}},
    }
}


@pytest.fixture(scope="module")
def run(tmp_path_factory, venv_env):
    work = tmp_path_factory.mktemp("verify")
    provide_downloads(work, "matbench/metadata", f"matbench/mirror/{TASK}")
    (work / "mymodels.py").write_text(MODULE)
    (work / "mymodels_shift.py").write_text("SHIFT = 1.0\n")
    env = {**venv_env, "PYTHONPATH": str(REPO / "src"), "CRUCIBLE_HASH_CACHE": str(work / "hash-cache" / "sha256")}

    def snakemake(*args, env=env):
        return run_snakemake(work, CONFIG, "matbench", *args, env=env, timeout=900)

    proc = snakemake()
    assert proc.returncode == 0, proc.stderr[-4000:]
    return work, snakemake, env


def _mae(work, model):
    return json.loads((work / f"results/matbench/scores/{model}/{TASK}.json").read_text())["leaderboard_value"]


def _models_planned(output: str) -> set[str]:
    return set(re.findall(r"model=([A-Za-z0-9_.-]+)", output))


def test_a_users_module_edit_reruns_that_models_jobs_alone(run):
    work, snakemake, _ = run
    before = _mae(work, "mine")
    # the edit is in a module the class imports, not in the class path's own module
    (work / "mymodels_shift.py").write_text("SHIFT = 100.0\n")
    dry = snakemake("--dry-run")
    assert dry.returncode == 0, dry.stderr[-3000:]
    out = dry.stdout + dry.stderr
    jobs = planned_jobs(out)
    assert jobs.get("predict_matbench") == 5 and jobs.get("score_matbench") == 1, jobs
    assert _models_planned(out) == {"mine"}, out[-3000:]
    proc = snakemake()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _mae(work, "mine") != before
    assert planned_jobs((again := snakemake("--dry-run")).stdout + again.stderr) == {}


def test_a_prediction_edited_after_its_job_is_refused_by_its_reader(run):
    work, snakemake, _ = run
    preds = work / f"results/matbench/predictions/dummy/{TASK}/fold_0.parquet"
    record = json.loads((preds.parent / ".identity" / f"{preds.name}.json").read_text())
    rule = record["rule"]  # dummy is fitted once per task (job_granularity)
    assert rule == "predict_matbench_task" and len(record["sha256"]) == 64
    stat = preds.stat()
    table = pd.read_parquet(preds)
    column = [c for c in table.columns if table[c].dtype.kind == "f"][0]
    table.loc[table.index[0], column] = 99999.0
    table.to_parquet(preds)
    os.utime(preds, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # touch -r: Snakemake sees nothing
    dry = snakemake("--dry-run")
    assert planned_jobs(dry.stdout + dry.stderr) == {}
    score = work / f"results/matbench/scores/dummy/{TASK}.json"
    proc = snakemake("--forcerun", "score_matbench")
    assert proc.returncode != 0
    log = (work / f"logs/matbench/score/dummy/{TASK}.log").read_text()
    assert str(preds.relative_to(work)) in log and record["sha256"] in log, log[-2000:]
    assert f"rule {rule}" in log and "changed since" in log, log[-2000:]
    assert not score.exists() and not (score.parent / ".identity" / f"{score.name}.json").exists()
    # rebuilt by its rule, the chain runs again
    proc = snakemake("--forcerun", rule)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert score.exists()


def test_an_installed_distribution_edited_in_place_is_refused_at_planning(run, tmp_path):
    """A copy of the installed PyYAML put first on the path (as a user's site-packages), one of its
    files edited: planning stops with the file and the distribution named."""
    work, snakemake, env = run
    site = Path(sysconfig.get_paths()["purelib"])
    overlay = tmp_path / "site"
    overlay.mkdir()
    infos = [p for p in site.glob("*.dist-info") if p.name.lower().startswith("pyyaml-")]
    assert infos, "PyYAML is installed (crucible reads YAML)"
    for name in ("yaml", "_yaml", infos[0].name):
        if (site / name).exists():
            shutil.copytree(site / name, overlay / name)
    env = {**env, "PYTHONPATH": os.pathsep.join([str(overlay), str(REPO / "src")])}
    clean = snakemake("--dry-run", env=env)
    assert clean.returncode == 0, clean.stderr[-3000:]
    edited = overlay / "yaml" / "__init__.py"
    edited.write_text(edited.read_text() + "\n# edited in place\n")
    proc = snakemake("--dry-run", "--forcerun", "make_matbench_folds", env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert str(edited) in out and "installed PyYAML" in out and "--force-reinstall" in out, out[-3000:]
    print(out[-1500:])


def _with(**matbench):
    return {"matbench": {**CONFIG["matbench"], **matbench}}


def test_names_across_runs(run):
    """Issue 44 items 5 and 6: a config edit in the only run that uses a name reruns its jobs with
    one line saying what changed; another run may not give it another meaning; after `names
    forget`, another run's aggregates are rebuilt when it next runs under the new meaning, and the
    report refuses one made from the old."""
    from crucible.identity.name_book import NAME_BOOK_FILE, forget_names, read_name_book
    from crucible.identity.records import IdentityError
    from crucible.report.front_page import name_meanings

    work, _, env = run
    edited = _with(model_params={"mine": {"random_state": 5}})
    dry = run_snakemake(work, edited, "matbench", "--dry-run", env=env)
    out = dry.stdout + dry.stderr
    assert dry.returncode == 0, out[-3000:]
    lines = [line for line in out.splitlines() if "matbench/model/mine changed" in line]
    assert len(lines) == 1 and '"random_state":5' in lines[0], out[-3000:]
    assert _models_planned(out) == {"mine"}, out[-3000:]
    proc = run_snakemake(work, edited, "matbench", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    book = read_name_book(work / NAME_BOOK_FILE)
    assert book["matbench/model/mine"]["spec"]["params"] == {"random_state": 5}
    assert book["matbench/model/mine"]["runs"] == ["default"]

    # a named run that uses mine as it means now is recorded beside the default run ...
    quick = {"matbench": {**edited["matbench"], "run_name": "quick"}}
    proc = run_snakemake(work, quick, "matbench", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_name_book(work / NAME_BOOK_FILE)["matbench/model/mine"]["runs"] == ["default", "matbench=quick"]
    # ... so that the default run may no longer change it: refused, naming the other run
    again = run_snakemake(work, _with(model_params={"mine": {"random_state": 6}}), "matbench", "--dry-run", env=env)
    assert again.returncode != 0
    assert "the run 'matbench=quick' still uses it" in again.stdout + again.stderr, (again.stdout + again.stderr)[
        -3000:
    ]

    # forgotten and given a new meaning by the default run: the quick run's leaderboard was made
    # from the old one; the report refuses it, and the quick run rebuilds it under the new meaning
    newer = _with(model_params={"mine": {"random_state": 6}})
    forget_names(["matbench/model/mine"], work / NAME_BOOK_FILE)
    proc = run_snakemake(work, newer, "matbench", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stale = "results/runs/quick/tables/matbench_leaderboard.csv"
    assert (work / stale).exists(), sorted(str(p.relative_to(work)) for p in (work / "results/runs/quick").rglob("*"))

    class Job:
        outputs = [stale]

    with pytest.raises(IdentityError, match="old meaning of 'matbench/model/mine'"):
        name_meanings([Job], root=work)
    newer_quick = {"matbench": {**newer["matbench"], "run_name": "quick"}}
    dry = run_snakemake(work, newer_quick, "matbench", "--dry-run", env=env)
    jobs = planned_jobs(dry.stdout + dry.stderr)
    assert jobs.get("build_matbench_leaderboard") == 1 and "predict_matbench" not in jobs, jobs
