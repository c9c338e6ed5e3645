"""The real Snakefile on the EMT demo (.test/catalysis): adsorption (CatBench JSON and a read-only
VASP tree, two chunks), surface and formation energies; then a no-op rerun, and the default
config's dry run without this benchmark."""

from __future__ import annotations

import os
import shutil
import stat

import pandas as pd
import pytest

from crucible.catalysis.workflow import final_outputs

from helpers import REPO, assert_printed_tables, load_test_config, run_snakemake, test_config

pytestmark = pytest.mark.slow

CONFIG = load_test_config("catalysis")


@pytest.fixture(scope="module")
def dag(catalysis_demo, tmp_path_factory, venv_env):
    workdir = tmp_path_factory.mktemp("catalysis_dag")
    # The demo where the test config looks for it; the VASP tree read-only, as a user's data may be.
    shutil.copytree(catalysis_demo, workdir / "demo")
    tree = workdir / "demo" / "emt-demo_vasp"
    for root, _dirs, files in os.walk(tree):
        for f in files:
            os.chmod(os.path.join(root, f), stat.S_IRUSR)
        os.chmod(root, stat.S_IRUSR | stat.S_IXUSR)
    proc = run_snakemake(workdir, [test_config("catalysis")], "catalysis", env=venv_env)
    yield workdir, proc
    for root, _dirs, _files in os.walk(tree):
        os.chmod(root, stat.S_IRWXU)


def test_every_catalysis_target_is_built(dag):
    workdir, proc = dag
    assert proc.returncode == 0, proc.stderr[-5000:]
    for name in ("demo", "mine"):
        for suffix in ("", "_anomaly", "_adsorbates", "_shifted"):
            for ext in ("csv", "md", "tex"):
                assert (workdir / f"results/tables/catalysis_{name}{suffix}.{ext}").is_file()
        assert (workdir / f"results/tables/catalysis_{name}.xlsx").is_file()
        for fig in ("parity.png", "parity.pdf", "sensitivity.png", "parity_emt.png"):
            assert (workdir / f"results/figures/catalysis_{name}_{fig}").is_file()
        assert sorted(
            p.name for p in (workdir / f"results/catalysis/{name}/calc/emt").iterdir() if p.name != ".identity"
        ) == [
            "chunk_0.json",
            "chunk_1.json",
        ]
    for t in ("surface_surf", "bulk_formation_form"):
        assert (workdir / f"results/tables/catalysis_{t}.md").is_file()


def test_every_printed_catalysis_table_has_a_title_a_caption_and_worded_headers(dag):
    workdir, _ = dag
    checked = assert_printed_tables(workdir / "results" / "tables")
    assert len(checked) >= 8 and all(name.startswith("catalysis_") for name in checked), checked


def test_tables_agree_between_formats(dag):
    workdir, _ = dag
    a = pd.read_csv(workdir / "results/tables/catalysis_demo.csv")
    b = pd.read_csv(workdir / "results/tables/catalysis_mine.csv")
    assert a["Num_total"].iloc[0] == b["Num_total"].iloc[0] == 9
    assert a["Normal_rate"].iloc[0] == 100.0
    assert a["MAE_total"].iloc[0] == pytest.approx(b["MAE_total"].iloc[0], abs=1e-6)


def test_nothing_to_do_on_a_second_run(dag, venv_env):
    workdir, _ = dag
    proc = run_snakemake(workdir, [test_config("catalysis")], "--dry-run", *final_outputs(CONFIG), env=venv_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_default_config_does_not_run_catalysis(tmp_path, venv_env):
    proc = run_snakemake(tmp_path, [REPO / "config" / "config.yaml"], "--dry-run", env=venv_env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "catalysis" not in proc.stdout


def test_config_errors_stop_the_run(tmp_path, venv_env):
    config = {"catalysis": {"models": ["emt"], "datasets": {"x": {"format": "vasp-tree", "path": "/nowhere"}}}}
    proc = run_snakemake(tmp_path, config, "--dry-run", env=venv_env)
    assert proc.returncode != 0 and "needs 'coefficients'" in proc.stdout + proc.stderr
    config["catalysis"]["datasets"]["x"] = {"format": "catbench-json", "path": "/a", "sha": "0"}
    proc = run_snakemake(tmp_path, config, "--dry-run", env=venv_env)
    assert proc.returncode != 0 and "sha" in proc.stdout + proc.stderr
