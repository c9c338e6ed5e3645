"""The DAG end to end, as a user runs it, on .test/matbench and .test/mlip together: two Matbench
tasks x [dummy, gbm-magpie, comp-transformer], the EOS benchmark for emt and chgnet-0.3.0 on a few
elements, s2ef on ASE's VASP frames; then a no-op re-run, the report, determinism of re-made
outputs, and config errors that stop the run. The MLIP family alone through `snakemake mlip`
(params reruns). The SLURM and default profiles' CPU/GPU placement on a stub workflow.

Every Snakemake run of the suite is in a tests/test_workflow*.py file, through
helpers.run_snakemake; the other families' runs are in test_workflow_<family>.py, the registry's
contract in test_workflow_contract.py."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from crucible.identity.name_book import NAME_BOOK_FILE, forget_names
from crucible.matbench import selection as matbench_sel

from helpers import REPO, load_test_config, provide_downloads, run_snakemake, test_config

# The tiny configs under .test/ (runnable by hand, see their headers): both families in one run.
CONFIGS = [test_config("matbench"), test_config("mlip")]
MATBENCH = load_test_config("matbench")
MLIP_ONLY = load_test_config("mlip")
TASKS = MATBENCH["matbench"]["tasks"]
MODELS = MATBENCH["matbench"]["models"]


def snakemake(workdir, *args, env, config=None, timeout=900):
    """The tiny test configuration unless another is given."""
    return run_snakemake(workdir, config or CONFIGS, *args, env=env, timeout=timeout)


slow = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory, venv_env):
    workdir = tmp_path_factory.mktemp("dag")
    # The matbench and crabnet wheels from the test cache (PyPI the first time): marks `network`.
    provide_downloads(workdir, "matbench/metadata", "matbench/mirror/matbench_steels")
    env = {**venv_env, "SOURCE_DATE_EPOCH": "1767225600"}
    proc = snakemake(workdir, env=env)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return workdir, env


@slow
def test_every_target_is_built(run):
    workdir, _ = run
    for rel in [
        "results/tables/matbench_tasks.md",
        "results/tables/matbench_task_overlap.csv",
        "results/tables/matbench_leaderboard.md",
        "results/tables/matbench_leaderboard.tex",
        "results/tables/matbench_folds.csv",
        "results/figures/matbench_scaled_error.pdf",
        "results/figures/matbench/gbm-magpie/matbench_steels.png",
        "results/figures/matbench/dummy/matbench_expt_is_metal.pdf",
        "results/matbench/gbm-magpie/info.json",
        "results/tables/mlip_eos.md",
        "results/figures/mlip_eos_delta.png",
        "results/tables/mlip_s2ef_vasp.csv",
    ]:
        assert (workdir / rel).stat().st_size > 0, rel
    for model in MODELS:
        runtime = list((workdir / "benchmarks/runs/matbench/predict" / model).rglob("*.tsv"))
        # One benchmark file per job: a task's five folds share one job where the model declares
        # it for the task's size (dummy everywhere, gbm-magpie on small tasks), else one per fold.
        expected = sum(1 if matbench_sel.job_granularity(MATBENCH, model, t) == "task" else 5 for t in TASKS)
        assert len(runtime) == expected, model
        if model in ("dummy", "gbm-magpie"):  # both small test tasks: one job each
            assert expected == len(TASKS), model


@slow
def test_gpu_model_runs_on_cpu_and_keeps_its_weights(run):
    workdir, _ = run
    for k in range(5):
        info = json.loads(
            (workdir / f"results/matbench/predictions/comp-transformer/matbench_steels/fold_{k}.json").read_text()
        )
        assert info["device"] == "cpu" and info["fit_info"]["device"] == "cpu"
        assert info["n_val"] > 0, "early stopping must see the fold's inner validation rows"
        weights = workdir / f"results/matbench/models/comp-transformer/matbench_steels/fold_{k}"
        assert (weights / "weights.pt").is_file() and (weights / "model.json").is_file()
    # Regenerate fold 0's predictions from the saved weights, without retraining.
    from crucible.core.io import read_parquet
    from crucible.models.comp_transformer import CompTransformer

    model = CompTransformer.load(workdir / "results/matbench/models/comp-transformer/matbench_steels/fold_0")
    preds = read_parquet(workdir / "results/matbench/predictions/comp-transformer/matbench_steels/fold_0.parquet")
    data = read_parquet(workdir / "results/matbench/data/matbench_steels.parquet").set_index("mbid")
    again = model.predict(data.loc[preds["mbid"], "formula"].reset_index(drop=True))
    assert (again == preds["prediction"].to_numpy()).all()


@slow
def test_leaderboard_reproduces_the_published_dummy(run):
    workdir, _ = run
    board = pd.read_csv(workdir / "results/tables/matbench_leaderboard.csv").set_index("task")
    assert round(board.loc["matbench_steels", "dummy_mean"], 4) == board.loc["matbench_steels", "published_Dummy"]
    assert round(board.loc["matbench_steels", "dummy_std"], 4) == 9.6958
    # Our Dummy classifier is the deterministic prior: label-based AUC exactly 0.5.
    assert board.loc["matbench_expt_is_metal", "dummy_mean"] == 0.5
    # A real model beats the Dummy by far on both tasks.
    assert board.loc["matbench_steels", "gbm-magpie_mean"] < 0.75 * board.loc["matbench_steels", "dummy_mean"]
    assert board.loc["matbench_expt_is_metal", "gbm-magpie_mean"] > 0.8
    assert set(board["gbm-magpie_inputs"]) == {"composition-only (formulas, no structures)"}
    folds = pd.read_csv(workdir / "results/tables/matbench_folds.csv")
    assert len(folds) == len(TASKS) * len(MODELS) * 5


@slow
def test_results_file_loads_in_matbench(run):
    from matbench.bench import MatbenchBenchmark
    from matbench.util import hash_dictionary

    workdir, _ = run
    for model in MODELS:
        path = workdir / "results/matbench" / model / "results.json.gz"
        with gzip.open(path, "rt") as fh:
            doc = json.load(fh)
        stored = doc["hash"]
        body = {k: v for k, v in doc.items() if k != "hash"}
        assert hash_dictionary(body) == stored
        # matbench 0.6 on PyPI opens files without gunzipping; from_dict is its loader's core.
        bench = MatbenchBenchmark.from_dict(dict(doc))
        assert bench.is_valid
        assert "composition-only" in doc["user_metadata"]["input"]
        info = json.loads((workdir / "results/matbench" / model / "info.json").read_text())
        for key in ("authors", "algorithm", "algorithm_long", "bibtex_refs", "requirements", "notes"):
            assert key in info


@slow
def test_eos_and_s2ef_outputs(run):
    workdir, _ = run
    eos = pd.read_csv(workdir / "results/tables/mlip_eos.csv")
    assert set(eos["model"]) == {"emt", "chgnet-0.3.0"}
    s2ef = pd.read_csv(workdir / "results/tables/mlip_s2ef_vasp.csv")
    chgnet = s2ef.set_index("model").loc["chgnet-0.3.0"]
    assert chgnet["n_frames"] == 3 and chgnet["n_failed"] == 0
    # EMT has no parameters for Na: that frame is a counted failure, not a dropped row.
    assert s2ef.set_index("model").loc["emt", "n_failed"] == 1


@slow
def test_nothing_to_do_on_a_second_run(run):
    workdir, env = run
    proc = snakemake(workdir, "--dry-run", env=env)
    assert proc.returncode == 0
    assert "Nothing to be done" in proc.stdout + proc.stderr


@slow
def test_remade_outputs_are_byte_identical(run):
    workdir, env = run
    paths = [
        "results/matbench/predictions/gbm-magpie/matbench_steels/fold_3.parquet",
        "results/matbench/scores/gbm-magpie/matbench_steels.json",
        "results/matbench/gbm-magpie/results.json.gz",
        "results/tables/matbench_leaderboard.csv",
        "results/tables/matbench_tasks.csv",
        "results/figures/matbench_scaled_error.png",
        "results/tables/mlip_eos.csv",
    ]
    before = {p: (workdir / p).read_bytes() for p in paths}
    for p in paths:
        (workdir / p).unlink()
    proc = snakemake(workdir, *paths, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    for p in paths:
        assert (workdir / p).read_bytes() == before[p], p


@slow
def test_report_collects_tables_and_figures(run):
    workdir, env = run
    proc = snakemake(workdir, "--report", str(workdir / "report.zip"), env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    import zipfile

    names = zipfile.ZipFile(workdir / "report.zip").namelist()
    assert any(n.endswith("matbench_scaled_error.png") for n in names)
    assert any(n.endswith("matbench_leaderboard.csv") for n in names)


@slow
@pytest.mark.parametrize(
    "matbench, message",
    [
        ({"taks": ["matbench_steels"], "tasks": ["matbench_steels"]}, "taks"),
        ({"tasks": ["matbench_steel"]}, "matbench_steel"),
        ({"tasks": ["matbench_steels"], "models": ["gbm-magpi"]}, "unknown model 'gbm-magpi'"),
    ],
)
def test_config_errors_stop_the_run_and_name_the_culprit(tmp_path, venv_env, matbench, message):
    proc = snakemake(tmp_path, "--dry-run", env=venv_env, config={"matbench": matbench})
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


@slow
def test_lint_is_clean(venv_env):
    proc = run_snakemake(REPO, None, "--lint", env=venv_env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _job_counts(text: str) -> dict[str, int]:
    jobs = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            jobs[parts[0]] = int(parts[1])
    return jobs


@slow
def test_mlip_family_alone_and_params_reruns(tmp_path, venv_env):
    """`snakemake mlip` with the real Snakefile: EOS and s2ef for emt and chgnet; then a changed
    point count reruns exactly the EOS runs and what reads them."""
    proc = snakemake(tmp_path, "mlip", env=venv_env, config=[test_config("mlip")], timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_csv(tmp_path / "results/tables/mlip_eos.csv").set_index("model")
    # EMT has no Si parameters: not modelled, which is not a failure
    assert table.loc["emt", "n_unsupported"] == 1 and table.loc["emt", "unsupported_elements"] == "Si"
    assert table.loc["emt", "n_failed"] == 0 and table.loc["emt", "n_common"] == table.loc["emt", "n_fitted"]
    assert table.loc["chgnet-0.3.0", "n_failed"] == 0 and table.loc["chgnet-0.3.0", "delta_mean_mev"] < 10
    s2ef = pd.read_csv(tmp_path / "results/tables/mlip_s2ef_vasp.csv").set_index("model")
    assert s2ef.loc["emt", "n_failed"] == 1 and s2ef.loc["chgnet-0.3.0", "n_failed"] == 0
    for f in ("mlip_eos_delta.png", "mlip_eos_delta.pdf", "mlip_eos_b0_parity.png"):
        assert (tmp_path / "results/figures" / f).stat().st_size > 1000
    assert (tmp_path / "benchmarks/runs/mlip/eos_chgnet-0.3.0.tsv").exists()
    assert not (tmp_path / "results/matbench").exists()
    proc = snakemake(tmp_path, "mlip", "--dry-run", env=venv_env, config=[test_config("mlip")])
    assert "Nothing to be done" in proc.stdout + proc.stderr
    changed = json.loads(json.dumps(MLIP_ONLY))
    changed["mlip"]["eos"]["points"] = 9
    forget_names(["mlip/settings"], tmp_path / NAME_BOOK_FILE)  # other settings in the same folder, on purpose
    proc = snakemake(tmp_path, "mlip", "--dry-run", env=venv_env, config=changed)
    jobs = _job_counts(proc.stdout)
    # emt runs in the CPU rule, chgnet-0.3.0 (a GPU potential) in run_eos_neural
    assert jobs.get("run_eos") == 1 and jobs.get("run_eos_neural") == 1, proc.stdout[-3000:]
    assert jobs.get("tabulate_eos") == 1 and jobs.get("plot_eos") == 1, proc.stdout[-3000:]
    assert not {"predict_s2ef", "predict_s2ef_neural", "score_s2ef"} & set(jobs)
