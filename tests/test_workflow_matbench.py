"""The Matbench family through the real Snakefile, beside the end-to-end run of test_workflow.py:
config errors as Snakemake prints them, a structure model refused on formulas, the whole chain on
47 real Materials Project Li-O crystals as a user dataset (fetched over HTTP from 127.0.0.1),
your own estimator and prediction files, and the upstream (matminer) source from a local mirror."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from crucible.core.hashes import file_sha256
from crucible.core.io import read_json, read_parquet
from crucible.matbench.tasks import METADATA_ROLE, mirror_role

from helpers import (
    StaticFileServer,
    clean_task,
    matbench_members,
    provide_downloads,
    run_snakemake,
    write_li_o_dataset,
)


@pytest.mark.slow
def test_snakemake_prints_the_cause_not_the_schema(tmp_path, venv_env):
    config = {
        "matbench": {"tasks": ["matbench_steels"], "models": ["dummy"], "model_params": {"gbm-magpi": {"max_iter": 5}}}
    }
    proc = run_snakemake(tmp_path, config, "--dry-run", env=venv_env, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "matbench.model_params.gbm-magpi" in out
    assert len(out.splitlines()) < 15, out


@pytest.mark.slow
def test_snakemake_refuses_a_param_the_estimator_does_not_take_before_any_job(tmp_path, venv_env):
    # a typo in a params key was a bare TypeError in the fit job
    config = {
        "matbench": {
            "tasks": ["matbench_steels"],
            "models": ["gbm-magpie", "mine"],
            "model_params": {"gbm-magpie": {"max_iterr": 3}},
            "custom_models": {"mine": {"class": "sklearn.linear_model:Ridge", "input": "magpie"}},
        }
    }
    proc = run_snakemake(tmp_path, config, "--dry-run", env=venv_env, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and len(out.splitlines()) < 15, out
    assert "config error at matbench.model_params.gbm-magpie.max_iterr: gbm-magpie (regression) takes no" in out
    assert "it takes: categorical_features, early_stopping," in out and "max_iter," in out
    config["matbench"]["model_params"] = {"mine": {"alphaa": 1.0}}
    proc = run_snakemake(tmp_path, config, "--dry-run", env=venv_env, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "config error at matbench.model_params.mine.alphaa: mine (regression)" in out, out
    assert "it takes: alpha, copy_X, fit_intercept" in out


def test_dag_stops_before_running_a_structure_model_on_formulas(tmp_path, venv_env):
    config = {"matbench": {"tasks": ["matbench_jdft2d"], "models": ["rf-scm-magpie"]}}
    proc = run_snakemake(tmp_path, config, "-n", env=venv_env, timeout=300)
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr  # snakemake -n prints the WorkflowError on stdout
    assert "matbench_jdft2d was read from the composition mirror" in output
    assert "matbench.source: matminer" in output


MODELS = ["gbm-magpie", "rf-scm-magpie", "mlip-embed"]


@pytest.mark.slow
def test_li_o_band_gap_end_to_end_on_real_crystals(tmp_path, venv_env):
    www = tmp_path / "www"
    www.mkdir()
    raw = write_li_o_dataset(www / "li_o.json.gz")
    server = StaticFileServer(www)
    config = {
        "matbench": {
            "tasks": [],
            "models": MODELS,
            "model_params": {
                "gbm-magpie": {"max_iter": 50},
                "mlip-embed": {"max_iter": 50},
                "rf-scm-magpie": {"n_estimators": 100},
            },
            "user_datasets": {
                "li_o_band_gap": {
                    "url": f"{server.url}/li_o.json.gz",
                    "sha256": file_sha256(raw),
                    "input": "structure",
                    "target": "band_gap",
                    "task_type": "regression",
                    "unit": "eV",
                }
            },
        },
    }
    workdir = tmp_path / "run"
    workdir.mkdir()
    try:
        proc = run_snakemake(workdir, config, env=venv_env)
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert server.hits == ["/li_o.json.gz"]

    root = workdir / "results/matbench/user/li_o_band_gap"
    card = read_json(root / "card.json")
    assert card["raw_file"]["sha256"] == file_sha256(raw) and card["inputs_available"] == "structure"
    table = pd.read_csv(workdir / "results/tables/matbench_user_li_o_band_gap.csv").set_index("model")
    assert sorted(table.index) == sorted(MODELS)
    assert table["structures_used"].to_dict() == {"gbm-magpie": False, "mlip-embed": True, "rf-scm-magpie": True}
    assert (table["n_test"] if "n_test" in table else pd.Series([47])).sum() >= 47
    for model in MODELS:
        scores = read_json(root / "scores" / f"{model}.json")
        assert scores["n_test"] == 47 and scores["task_input"] == "structure"
        assert scores["structures_used"] is (model != "gbm-magpie")
        # Every model beats predicting nothing on real crystals (MAD ~1.0 eV).
        assert scores["stats"]["mae"]["mean"] < card["mad"]
    info = read_json(root / "predictions/rf-scm-magpie/fold_0.json")
    assert info["structures_used"] is True and info["fit_info"]["sine_coulomb_width"] >= 40
    features = {p.name.split("-")[0] for p in (workdir / "results/features").iterdir()}
    assert features == {"magpie", "scm", "mlip"}
    # The cached embedding is CHGNet 0.3.0's own crystal feature vector.
    from chgnet.model import CHGNet

    from crucible.features.mlip_embed import load_embeddings
    from crucible.features.structures import structure_hash

    (embed_cache,) = (workdir / "results/features").glob("mlip-embed-*/user/li_o_band_gap.parquet")
    data = read_parquet(root / "data.parquet")
    cached = load_embeddings(embed_cache, [structure_hash(s) for s in data["structure"][:2]])
    from pymatgen.core import Structure

    chgnet = CHGNet.load(model_name="0.3.0", use_device="cpu", verbose=False)
    direct = [
        chgnet.predict_structure(Structure.from_str(s, fmt="json"), task="e", return_crystal_feas=True)
        for s in data["structure"][:2]
    ]
    assert cached.shape == (2, 64)
    np.testing.assert_allclose(cached, [d["crystal_fea"] for d in direct], rtol=1e-5, atol=1e-6)


def _write_fold_files(root, task, value=None):
    data, card, folds = clean_task(task)
    for k in range(5):
        test = data[folds["fold"].to_numpy() == k]
        pred = np.full(len(test), value if value is not None else float(data["target"].median()))
        out = root / task / f"fold_{k}.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"mbid": test["mbid"].to_numpy(), "prediction": pred}).to_parquet(out, index=False)


@pytest.mark.slow
def test_custom_estimator_and_prediction_files(tmp_path, venv_env):
    preds = tmp_path / "elsewhere"
    _write_fold_files(preds, "matbench_steels")
    config = {
        "matbench": {
            "tasks": ["matbench_steels"],
            "models": ["my-ridge", "my-preds"],
            "custom_models": {
                "my-ridge": {"class": "sklearn.linear_model:Ridge", "input": "magpie", "params": {"alpha": 10.0}}
            },
            "prediction_files": {"my-preds": {"dir": str(preds)}},
        },
    }
    work = tmp_path / "run"
    work.mkdir()
    provide_downloads(
        work, "matbench/metadata", "matbench/mirror/matbench_steels"
    )  # from the test cache, not fetched by the DAG
    proc = run_snakemake(work, config, "matbench", env=venv_env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ridge = json.loads((work / "results/matbench/scores/my-ridge/matbench_steels.json").read_text())
    files = json.loads((work / "results/matbench/scores/my-preds/matbench_steels.json").read_text())
    assert ridge["leaderboard_value"] < 200 and files["leaderboard_value"] > 200
    info = json.loads((work / "results/matbench/predictions/my-ridge/matbench_steels/fold_0.json").read_text())
    assert info["params"]["alpha"] == 10.0

    # A broken file: a duplicated id. The run stops naming file, fold and id; the scores made
    # before stay as they were.
    before = (work / "results/matbench/scores/my-preds/matbench_steels.json").read_bytes()
    fold2 = preds / "matbench_steels" / "fold_2.parquet"
    df = pd.read_parquet(fold2)
    pd.concat([df, df.iloc[[0]]]).to_parquet(fold2, index=False)
    proc = run_snakemake(work, config, "matbench", env=venv_env, timeout=600)
    assert proc.returncode != 0
    log = (work / "logs/matbench/import/my-preds/matbench_steels/fold_2.log").read_text()
    assert "fold_2.parquet" in log and "fold 2" in log and df["mbid"].iloc[0] in log
    assert (work / "results/matbench/scores/my-preds/matbench_steels.json").read_bytes() == before


# The upstream (matminer) source end to end. Nothing upstream answers from these machines, so the
# test builds the upstream files itself in matminer's own format (a pandas frame with real pymatgen
# objects, written by matminer's store_dataframe_as_json), serves them locally, and runs the DAG's
# data targets with `source: matminer` pointed at that mirror. Targets come from the composition
# mirror in the official row order, so the official metadata and split checks apply unchanged.
def _structure_for(formula: str, index: int):
    from pymatgen.core import Composition, Lattice, Structure

    comp = Composition(formula)
    species = [str(el) for el, amount in comp.items() for _ in range(int(round(amount)))]
    n = len(species)
    side = int(np.ceil(n ** (1 / 3)))
    coords = [
        ((i % side + 0.5) / side, ((i // side) % side + 0.5) / side, (i // side**2 + 0.5) / side) for i in range(n)
    ]
    return Structure(Lattice.cubic(3.0 * side + 0.01 * (index % 7)), species, coords)


def _build_upstream(task: str, out_dir):
    from matminer.utils.io import store_dataframe_as_json
    from pymatgen.core import Composition

    members = matbench_members()
    meta = read_json(members[METADATA_ROLE])[task]
    mirror = pd.read_csv(members[mirror_role(task)])
    if meta["input_type"] == "structure":
        inputs = [_structure_for(f, i) for i, f in enumerate(mirror["formula"])]
    else:
        inputs = [Composition(f) for f in mirror["formula"]]
    frame = pd.DataFrame({meta["input_type"]: inputs, meta["target"]: mirror["target"].to_numpy()})
    path = out_dir / f"{task}.json.gz"
    store_dataframe_as_json(frame, str(path), compression="gz", pbar=False)
    return path


@pytest.mark.slow
def test_matminer_source_end_to_end(tmp_path, venv_env):
    www = tmp_path / "www"
    www.mkdir()
    tasks = ["matbench_steels", "matbench_jdft2d"]
    hashes = {t: file_sha256(_build_upstream(t, www)) for t in tasks}
    server = StaticFileServer(www)
    try:
        config = {
            "matbench": {
                "source": "matminer",
                "tasks": tasks,
                "models": ["dummy"],  # the target below builds the data only
                "matminer": {"url_prefix": f"{server.url}/", "sha256": hashes},
            },
        }
        workdir = tmp_path / "run"
        workdir.mkdir()
        provide_downloads(workdir, "matbench/metadata")
        proc = run_snakemake(workdir, config, "matbench_data", env=venv_env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-4000:]
    finally:
        server.close()
    assert sorted(server.hits) == sorted(f"/{t}.json.gz" for t in tasks)

    jdft = read_parquet(workdir / "results/matbench/data/matbench_jdft2d.parquet")
    card = read_json(workdir / "results/matbench/data/matbench_jdft2d.json")
    assert card["source"] == "matminer" and card["inputs_available"] == "structure"
    assert card["raw_file"]["sha256"] == hashes["matbench_jdft2d"]
    assert jdft["structure"].notna().all()
    from pymatgen.core import Structure

    first = Structure.from_str(jdft["structure"].iloc[0], fmt="json")
    mirror = pd.read_csv(matbench_members()[mirror_role("matbench_jdft2d")])
    assert (
        first.composition.reduced_formula
        == __import__("pymatgen.core", fromlist=["Composition"]).Composition(mirror["formula"].iloc[0]).reduced_formula
    )
    steels = read_parquet(workdir / "results/matbench/data/matbench_steels.parquet")
    assert steels["structure"].isna().all() and len(steels) == 312
    folds = read_parquet(workdir / "results/matbench/folds/matbench_jdft2d.parquet")
    assert folds["fold"].value_counts().sort_index().tolist() == [128, 127, 127, 127, 127]
