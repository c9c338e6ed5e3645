"""The real Snakefile with a user's own potential (the top-level ``potentials:`` section; the
deprecated ``mlip.custom_potentials`` still read): the module sits
beside the project (copied into the working directory, as a user's would), EOS and catalysis run
it through the same rules as the registered EMT, its provenance reaches the tables, a change of
its params or of its module's source reruns its jobs and no other, a potential's jobs ask for a
GPU only when its spec says gpu, and a class path that does not import stops the run at start-up
naming the key."""

from __future__ import annotations

import copy
import re
import shutil

import pandas as pd
import pytest

from crucible.core.io import read_json, read_parquet
from crucible.potentials.provenance import read_provenance

from helpers import REPO, run_snakemake

pytestmark = pytest.mark.slow

CONFIG = {
    "potentials": {"scaled": {"class": "custom_calculators:scaled_emt", "params": {"scale": 2.0}}},
    "mlip": {
        "models": ["emt", "scaled"],
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
    changed["potentials"]["scaled"]["params"]["scale"] = 3.0
    # the only run of this folder changes the potential's params: its jobs rerun, one line says so
    # (--printshellcmds: the default profile prints one line per job, the full blocks only so)
    proc = run_snakemake(workdir, changed, "mlip", "catalysis", "--dry-run", "--printshellcmds", env=venv_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = [line for line in proc.stderr.splitlines() if line.startswith("potential/scaled changed")]
    assert len(said) == 1 and '"scale":3.0' in said[0], proc.stderr[-3000:]
    jobs = _job_counts(proc.stdout)
    # scaled asks for a GPU (a user's potential does unless its entry says device: cpu)
    assert jobs.get("run_eos_neural") == 1 and jobs.get("relax_catalysis_neural") == 1, proc.stdout[-3000:]
    assert "run_eos" not in jobs and "relax_catalysis" not in jobs
    assert "clean_catalysis" not in jobs and "output: results/mlip/eos/scaled.parquet" in proc.stdout
    assert "output: results/mlip/eos/emt.parquet" not in proc.stdout
    # the module beside the project is an input of its jobs: editing it reruns them, and only them
    module = workdir / "custom_calculators.py"
    module.write_text(module.read_text() + "\n# tuned\n")
    proc = run_snakemake(workdir, CONFIG, "mlip", "catalysis", "--dry-run", "--printshellcmds", env=venv_env)
    jobs = _job_counts(proc.stdout)
    # scaled asks for a GPU (a user's potential does unless its entry says device: cpu)
    assert jobs.get("run_eos_neural") == 1 and jobs.get("relax_catalysis_neural") == 1, proc.stdout[-3000:]
    assert "run_eos" not in jobs and "relax_catalysis" not in jobs
    assert "output: results/mlip/eos/emt.parquet" not in proc.stdout


def _planned(stdout: str) -> dict[str, tuple[str, str]]:
    """output -> (rule, resources) of every job block a dry run with --printshellcmds prints."""
    out = {}
    for block in re.split(r"\n(?=rule \S+:\n)", stdout):
        rule = re.match(r"rule (\S+):\n", block)
        output = re.search(r"^\s+output: (.+)$", block, re.M)
        if rule and output:
            resources = re.search(r"^\s+resources: (.+)$", block, re.M)
            for path in output.group(1).split(", "):
                out[path] = (rule.group(1), resources.group(1) if resources else "")
    return out


def test_a_potentials_gpu_request_follows_its_spec(catalysis_demo, tmp_path, venv_env):
    """emt (device cpu) and a user's potential with device: cpu run in the plain rules and ask for
    no GPU; a user's potential without it, like a registered network, asks for one."""
    shutil.copytree(catalysis_demo, tmp_path / "demo")
    shutil.copy(REPO / "tests" / "custom_calculators.py", tmp_path / "custom_calculators.py")
    config = copy.deepcopy(CONFIG)
    config["potentials"]["light"] = {"class": "custom_calculators:scaled_emt", "device": "cpu"}
    config["mlip"]["models"] = ["emt", "scaled", "light", "chgnet-0.3.0"]
    config["catalysis"]["models"] = ["emt", "scaled"]
    proc = run_snakemake(tmp_path, config, "mlip", "catalysis", "--dry-run", "--printshellcmds", env=venv_env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    planned = _planned(proc.stdout)
    for model, rule in (
        ("emt", "run_eos"),
        ("light", "run_eos"),
        ("scaled", "run_eos_neural"),
        ("chgnet-0.3.0", "run_eos_neural"),
    ):
        job_rule, resources = planned[f"results/mlip/eos/{model}.parquet"]
        assert job_rule == rule, (model, job_rule)
        assert ("gpu=1" in resources) == rule.endswith("_neural"), (model, resources)
    for model, rule in (("emt", "relax_catalysis"), ("scaled", "relax_catalysis_neural")):
        job_rule, resources = planned[f"results/catalysis/demo/calc/{model}/chunk_0.json"]
        assert job_rule == rule and ("gpu=" in resources) == (model == "scaled"), (model, job_rule, resources)


def test_a_class_path_that_does_not_import_stops_the_run_naming_the_key(tmp_path, venv_env):
    """Under the deprecated key: still read, the message names that key, and the deprecation is said."""
    config = copy.deepcopy(CONFIG)
    del config["potentials"]
    config["mlip"]["custom_potentials"] = {"scaled": {"class": "no_such_module:make"}}
    proc = run_snakemake(tmp_path, config, "mlip", "--dry-run", env=venv_env)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "mlip.custom_potentials.scaled.class: cannot import module 'no_such_module'" in out, out[-2000:]
    assert "config mlip.custom_potentials is deprecated" in out and "section potentials:" in out, out[-2000:]
