"""Shared fixtures: the real Matbench data, fetched once through crucible's own fetch stage.

The two registry artifacts (matbench 0.6 and crabnet 2.0.8 wheels, 45 MB together) are fetched
with ``crucible.sources.fetch`` into ``~/.cache/crucible-tests/`` (or ``$CRUCIBLE_TEST_CACHE``)
and reused across runs; a file whose SHA-256 already matches is not downloaded again.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES_FILE = REPO / "config" / "sources.yaml"

# matbench.md section 3: the published Dummy per-fold MAE
# (benchmarks/matbench_v0.1_dummy/results.json.gz) and the official test-fold sizes.
PUBLISHED_DUMMY_MAE = {
    "matbench_steels": [241.45907439280927, 219.37703193727293, 225.79322580645163, 241.20352258064514, 220.889793548387],
    "matbench_expt_gap": [1.096468004680365, 1.1922119265587139, 1.1526881705214234, 1.1445202551972367, 1.131746447623094],
}
TEST_FOLD_SIZES = {
    "matbench_steels": [63, 63, 62, 62, 62],
    "matbench_jdft2d": [128, 127, 127, 127, 127],
    "matbench_expt_gap": [921, 921, 921, 921, 920],
    "matbench_glass": [1136] * 5,
    "matbench_mp_e_form": [26551, 26551, 26550, 26550, 26550],
}


def cache_root() -> Path:
    env = os.environ.get("CRUCIBLE_TEST_CACHE")
    path = Path(env) if env else Path.home() / ".cache" / "crucible-tests"
    path.mkdir(parents=True, exist_ok=True)
    return path


@lru_cache(maxsize=None)
def matbench_members() -> dict[str, Path]:
    """Every pinned member of both wheels, fetched and extracted (hash-checked) once."""
    from crucible import sources

    spec = sources.load_sources(SOURCES_FILE)
    root = cache_root() / "resources"
    members: dict[str, Path] = {}
    for name in ("matbench-0.6", "crabnet-2.0.8"):
        artifact = spec["artifacts"][name]
        archive = sources.fetch(name, artifact, root / "downloads" / artifact["filename"])
        out_dir = root / "extracted" / name
        wanted = [m for m in artifact["members"] if not (out_dir / m).exists()
                  or sources.sha256_file(out_dir / m) != artifact["members"][m]["sha256"]]
        if wanted:
            sources.extract(name, artifact, archive, out_dir, wanted)
        members.update({m: out_dir / m for m in artifact["members"]})
        members[name] = archive
    return members


@lru_cache(maxsize=None)
def clean_task(task: str):
    """(data, card, folds) of one task, built with the library exactly as the DAG builds them."""
    from crucible.matbench import clean, folds, tasks

    members = matbench_members()
    metadata = tasks.load_metadata(members["matbench_v0.1_dataset_metadata.json"])
    data, card = clean.clean_task(task, "composition-mirror", members[f"{task}.csv"], metadata)
    table = folds.build_folds(data, task, card["task_type"], _validation())
    return data, card, table


@lru_cache(maxsize=None)
def _validation():
    from crucible.matbench.folds import load_validation

    return load_validation(matbench_members()["matbench_v0.1_validation.json"])


@pytest.fixture(scope="session")
def members() -> dict[str, Path]:
    return matbench_members()


@pytest.fixture(scope="session")
def official_validation():
    return _validation()


@pytest.fixture(scope="session")
def venv_env() -> dict[str, str]:
    """Environment for subprocesses: this interpreter's scripts (crucible, snakemake) on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture(scope="session")
def catalysis_demo(tmp_path_factory) -> Path:
    """The EMT-labelled catalysis demo set in every format (CatBench JSON, Catalysis-Hub raw,
    VASP trees for adsorption, surface and bulk-formation energies)."""
    from crucible.catalysis import demo

    out = tmp_path_factory.mktemp("catalysis_demo")
    demo.main([str(out)])
    return out
