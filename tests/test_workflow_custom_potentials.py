"""The real Snakefile with a user's own potential (``mlip.custom_potentials``): the module sits
beside the project (copied into the working directory, as a user's would), EOS and catalysis run
it through the same rules as the registered EMT, its provenance reaches the tables, a change of
its params or of its module's source reruns its jobs and no other, and a class path that does not import stops the run at
start-up naming the key."""

from __future__ import annotations

import copy
import shutil

import pandas as pd
import pytest

from crucible.identity import NAME_BOOK_FILE, forget_names
from crucible.io import read_json, read_parquet
from crucible.potentials.provenance import read_provenance

from helpers import REPO, run_snakemake

pytestmark = pytest.mark.slow

CONFIG = {
    "mlip": {
        "models": ["emt", "scaled"],
        "custom_potentials": {"scaled": {"class": "custom_calculators:scaled_emt", "params": {"scale": 2.0}}},
        "eos": {"elements": ["Ag", "Cu"]},
    },
    "catalysis": {
        "models": ["scaled"],
        "seeds": 1,
        "datasets": {"demo": {"path": "demo/emt-demo_adsorption.json", "energy_source": "EMT (ASE), demo"}},
    },
}


def _job_counts(text: str) -> dict[str, int]:
    jobs = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            jobs[parts[0]] = int(parts[1])
    return jobs


@pytest.fixture(scope="module")
def dag(catalysis_demo, tmp_path_factory, venv_env):
    workdir = tmp_path_factory.mktemp("custom_potential_dag")
    shutil.copytree(catalysis_demo, workdir / "demo")
    shutil.copy(REPO / "tests" / "custom_calculators.py", workdir / "custom_calculators.py")
    proc = run_snakemake(workdir, CONFIG, "mlip", "catalysis", env=venv_env)
    return workdir, proc


def test_eos_and_catalysis_run_the_users_potential_and_record_it(dag):
    workdir, proc = dag
    assert proc.returncode == 0, proc.stderr[-4000:]
    emt = read_parquet(workdir / "results/mlip/eos/emt.parquet").set_index("element")
    scaled = read_parquet(workdir / "results/mlip/eos/scaled.parquet").set_index("element")
    # twice EMT's energies at the same volumes: EMT's V0, twice its bulk modulus
    assert ((scaled["v0"] - emt["v0"]).abs() < 1e-9 * emt["v0"]).all()
    assert ((scaled["b0"] - 2 * emt["b0"]).abs() < 1e-6 * emt["b0"]).all()
    prov = read_provenance(workdir / "results/mlip/eos/scaled.parquet")
    assert prov["class"] == "custom_calculators:scaled_emt" and prov["params"] == {"scale": 2.0}
    table = pd.read_csv(workdir / "results/tables/mlip_eos.csv").set_index("model")
    assert table.loc["scaled", "potential"].startswith('custom_calculators:scaled_emt {"scale": 2.0}')
    assert table.loc["emt", "potential"].startswith("ase.calculators.emt:EMT (ase ")
    analysis = read_json(workdir / "results/catalysis/demo/analysis/scaled.json")
    assert analysis["potential"]["params"] == {"scale": 2.0} and analysis["coverage"]["Num_succeeded"] == 9
    coverage = pd.read_excel(workdir / "results/tables/catalysis_demo.xlsx", sheet_name="Coverage")
    assert coverage.set_index("MLIP_name").loc["scaled", "calculator"].startswith("custom_calculators:scaled_emt")


def test_changed_params_or_source_rerun_its_jobs_only(dag, venv_env):
    workdir, _ = dag
    proc = run_snakemake(workdir, CONFIG, "mlip", "catalysis", "--dry-run", env=venv_env)
    assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout[-3000:]
    changed = copy.deepcopy(CONFIG)
    changed["mlip"]["custom_potentials"]["scaled"]["params"]["scale"] = 3.0
    # one name, one meaning in a results folder: the new params are refused until the old are forgotten
    proc = run_snakemake(workdir, changed, "mlip", "catalysis", "--dry-run", env=venv_env)
    assert proc.returncode != 0 and "crucible names forget potential/scaled" in proc.stdout + proc.stderr
    forget_names(["potential/scaled"], workdir / NAME_BOOK_FILE)
    # --printshellcmds: the default profile prints one line per job, the full blocks (output:) only so
    proc = run_snakemake(workdir, changed, "mlip", "catalysis", "--dry-run", "--printshellcmds", env=venv_env)
    jobs = _job_counts(proc.stdout)
    assert jobs.get("run_eos") == 1 and jobs.get("relax_catalysis") == 1, proc.stdout[-3000:]
    assert "clean_catalysis" not in jobs and "output: results/mlip/eos/scaled.parquet" in proc.stdout
    assert "output: results/mlip/eos/emt.parquet" not in proc.stdout
    # the module beside the project is an input of its jobs: editing it reruns them, and only them
    module = workdir / "custom_calculators.py"
    module.write_text(module.read_text() + "\n# tuned\n")
    proc = run_snakemake(workdir, CONFIG, "mlip", "catalysis", "--dry-run", "--printshellcmds", env=venv_env)
    jobs = _job_counts(proc.stdout)
    assert jobs.get("run_eos") == 1 and jobs.get("relax_catalysis") == 1, proc.stdout[-3000:]
    assert "output: results/mlip/eos/emt.parquet" not in proc.stdout


def test_a_class_path_that_does_not_import_stops_the_run_naming_the_key(tmp_path, venv_env):
    config = copy.deepcopy(CONFIG)
    config["mlip"]["custom_potentials"]["scaled"]["class"] = "no_such_module:make"
    proc = run_snakemake(tmp_path, config, "mlip", "--dry-run", env=venv_env)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "mlip.custom_potentials.scaled.class: cannot import module 'no_such_module'" in out, out[-2000:]
