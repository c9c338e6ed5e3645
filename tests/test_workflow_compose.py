"""Runs that compose (issue 23): a subset run after the full one, then the full one again, through
the real Snakefile on a tiny config. Per-(model, task) work -- features, predictions, scores,
per-model figures -- is keyed by model and task alone, so changing the configured set reruns only
the run's aggregates (task table, leaderboard, results files), and a subset run under its own
``matbench.run_name`` writes its aggregates under ``results/runs/<name>/`` without touching the
full run's."""

from __future__ import annotations

import pytest

from crucible.features.magpie import MAGPIE_VERSION

from helpers import planned_jobs, provide_downloads, run_snakemake

TASKS = ["matbench_steels", "matbench_expt_is_metal"]
FULL = {
    "matbench": {
        "tasks": TASKS,
        "models": ["dummy", "gbm-magpie"],
        "model_params": {"gbm-magpie": {"max_iter": 20}},
    }
}
SUBSET = {"matbench": {**FULL["matbench"], "tasks": ["matbench_steels"], "models": ["dummy"]}}
# What summarizes the configured set; everything else a run makes is per (model, task).
AGGREGATE_RULES = {"tabulate_matbench_tasks", "build_matbench_leaderboard", "write_matbench_results", "matbench"}
# The outputs per (model, task) or per task: reused by every run, never rewritten by another.
PER_MODEL = ("results/features", "results/matbench/predictions", "results/matbench/scores", "results/figures/matbench")


def _snapshot(work, roots=PER_MODEL) -> dict[str, tuple[bytes, int]]:
    """Bytes and mtime of every file under ``roots``."""
    files = [p for root in roots for p in sorted((work / root).rglob("*")) if p.is_file()]
    return {str(p.relative_to(work)): (p.read_bytes(), p.stat().st_mtime_ns) for p in files}


LAST: dict[str, str] = {}  # the console of the last run


def _run(work, config, env, *args):
    """A dry run (its planned jobs), then the run itself; both must succeed."""
    dry = run_snakemake(work, config, "matbench", "--dry-run", *args, env=env, timeout=300)
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-3000:]
    proc = run_snakemake(work, config, "matbench", *args, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-6000:]
    LAST["console"] = proc.stdout + proc.stderr
    return planned_jobs(dry.stdout + dry.stderr)


@pytest.mark.slow
def test_a_subset_run_then_the_full_run_reruns_only_the_aggregates(tmp_path, venv_env):
    work = tmp_path / "run"
    work.mkdir()
    provide_downloads(work, "matbench/metadata", *(f"matbench/mirror/{t}" for t in TASKS))

    first = _run(work, FULL, venv_env)
    assert first["build_magpie_features"] == 2 and first["score_matbench"] == 4, first
    # one feature file per task, built from that task's table alone
    features = sorted(
        p.name for p in (work / f"results/features/magpie-{MAGPIE_VERSION}").iterdir() if p.name != ".identity"
    )
    assert features == sorted(f"{t}.parquet" for t in TASKS)
    before = _snapshot(work)
    full_board = (work / "results/tables/matbench_leaderboard.csv").read_text()
    # The console (profiles/default): one line per job, no shell commands, and a closing summary
    # naming the run's tables and figures; the job's full command opens its log.
    console = LAST["console"]
    assert "Job " in console and ": predict_matbench_task model=gbm-magpie task=matbench_steels" in console
    assert "Shell command" not in console and "crucible matbench predict" not in console
    summary = console[console.index("crucible: the run is complete") :]
    assert "results/tables/matbench_leaderboard.{csv,md,tex}" in summary
    assert "results/figures/matbench/gbm-magpie/ (2 files)" in summary and "--report results/report.zip" in summary
    log = (work / "logs/matbench/predict/gbm-magpie/matbench_steels.log").read_text()
    line0 = log.splitlines()[0]
    assert "command: crucible matbench predict --model gbm-magpie " in line0 and " --task matbench_steels " in line0
    assert "gbm-magpie" in full_board

    # The subset under the default name: only aggregates run, and they now list the subset.
    subset = _run(work, SUBSET, venv_env)
    assert set(subset) <= AGGREGATE_RULES, subset
    assert "gbm-magpie" not in (work / "results/tables/matbench_leaderboard.csv").read_text()
    assert _snapshot(work) == before

    # The full run again: aggregates only, every per-model output byte-identical (and untouched).
    again = _run(work, FULL, venv_env)
    assert set(again) <= AGGREGATE_RULES, again
    assert again["build_matbench_leaderboard"] == 1, again
    assert _snapshot(work) == before
    assert (work / "results/tables/matbench_leaderboard.csv").read_text() == full_board

    # The subset under its own name: its aggregates in results/runs/<name>/, the full run's
    # tables and results files as they were, and the full run has nothing left to do.
    aggregates = ("results/tables", "results/figures/matbench_scaled_error.png", "results/matbench/dummy")
    full_aggregates = _snapshot(work, aggregates)
    named = {"matbench": {**SUBSET["matbench"], "run_name": "steels-dummy"}}
    own = _run(work, named, venv_env)
    assert set(own) <= AGGREGATE_RULES, own
    run_dir = work / "results/runs/steels-dummy"
    board = (run_dir / "tables/matbench_leaderboard.csv").read_text()
    assert "dummy" in board and "gbm-magpie" not in board
    assert (run_dir / "matbench/dummy/results.json.gz").is_file()
    assert (run_dir / "figures/matbench_scaled_error.png").is_file()
    assert not (run_dir / "matbench/gbm-magpie").exists()
    assert _snapshot(work, aggregates) == full_aggregates
    assert _snapshot(work) == before
    summary = LAST["console"][LAST["console"].index("crucible: the run is complete") :]
    assert "results/runs/steels-dummy/tables/matbench_leaderboard.{csv,md,tex}" in summary
    assert "gbm-magpie" not in summary  # not in this run: never named
    assert _run(work, FULL, venv_env) == {}

    print(
        f"jobs: full {sum(first.values())}, subset {sum(subset.values())} {subset}, full again "
        f"{sum(again.values())} {again}, named subset {sum(own.values())} {own}, full after it 0"
    )


@pytest.mark.slow
def test_a_failed_job_is_named_with_its_log_in_the_closing_summary(tmp_path, venv_env):
    """A model that fails in fit (Ridge with alpha='x'): the run fails, and its last lines say
    which job failed and where its log is."""
    work = tmp_path / "run"
    work.mkdir()
    provide_downloads(work, "matbench/metadata", "matbench/mirror/matbench_steels")
    config = {
        "matbench": {
            "tasks": ["matbench_steels"],
            "models": ["bad-ridge"],
            "custom_models": {"bad-ridge": {"class": "sklearn.linear_model:Ridge", "input": "magpie"}},
            "model_params": {"bad-ridge": {"alpha": "x"}},
        }
    }
    proc = run_snakemake(work, config, "matbench", env=venv_env, timeout=900)
    assert proc.returncode != 0
    console = proc.stdout + proc.stderr
    summary = console[console.index("crucible: the run failed: ") :]
    assert "FAILED predict_matbench: see logs/matbench/predict/bad-ridge/matbench_steels/fold_" in summary
    assert "Snakemake's log: " in summary


@pytest.mark.slow
def test_a_subset_config_file_keeps_the_full_runs_aggregates(tmp_path, venv_env):
    """The README's way: config/config.yaml is the full run, `--configfile mine.yaml` a subset of
    it that names no run (issue 52: it rewrote the full run's leaderboard and results files to its
    tasks). The subset runs as `mine` (crucible.dag.runs): its aggregates under results/runs/mine/,
    the full run's byte-identical, and the full run has nothing left to do after it."""
    import yaml

    work = tmp_path / "run"
    (work / "config").mkdir(parents=True)
    provide_downloads(work, "matbench/metadata", *(f"matbench/mirror/{t}" for t in TASKS))
    (work / "config/config.yaml").write_text(yaml.safe_dump(FULL))
    mine = work / "mine.yaml"
    mine.write_text(yaml.safe_dump({"matbench": {"tasks": ["matbench_steels"], "models": ["dummy"]}}))

    _run(work, None, venv_env)
    aggregates = ("results/tables", "results/figures/matbench_scaled_error.png", "results/matbench/dummy")
    full = _snapshot(work, aggregates)
    board = (work / "results/tables/matbench_leaderboard.csv").read_text()
    assert "gbm-magpie" in board and "matbench_expt_is_metal" in board
    per_model = _snapshot(work)

    subset = _run(work, [mine], venv_env)
    assert set(subset) <= AGGREGATE_RULES, subset
    assert "results/runs/mine/ (matbench.run_name: mine)" in LAST["console"]
    assert _snapshot(work, aggregates) == full  # the full run's leaderboard still lists what it listed
    assert _snapshot(work) == per_model
    own = (work / "results/runs/mine/tables/matbench_leaderboard.csv").read_text()
    assert "dummy" in own and "gbm-magpie" not in own and "matbench_expt_is_metal" not in own
    summary = LAST["console"][LAST["console"].index("crucible: the run is complete") :]
    assert "results/runs/mine/tables/matbench_leaderboard.{csv,md,tex}" in summary
    assert _run(work, None, venv_env) == {}
