"""The real Snakefile on .test/discovery (EMT on H, Cu, Fe), its pinned files served by a local
server laid out as the leaderboard's repository (discovery.url_prefix): the fetch rule downloads
the reference and the 35 cards through the real download code, the curves, table and figures are
built; then a no-op rerun. Needs the copies of ../shared/data/matbench-discovery (not in a fresh
clone: skipped there; tests/test_discovery_data.py fetches a committed card the same way)."""

from __future__ import annotations

import gzip
import json
import shutil

import pandas as pd
import pytest

from crucible.discovery.workflow import final_outputs
from crucible.sources import pinned_files

from helpers import REPO, StaticFileServer, load_test_config, run_snakemake

pytestmark = pytest.mark.slow

SHARED = REPO.parent / "shared" / "data" / "matbench-discovery"
CONFIG = load_test_config("discovery")


@pytest.fixture(scope="module")
def dag(tmp_path_factory, venv_env):
    if not (SHARED / "diatomics-dft.json.gz").is_file():
        pytest.skip(f"no copies of the leaderboard's files at {SHARED}")
    www = tmp_path_factory.mktemp("mbd_www")
    for pin in pinned_files.roles(prefix="discovery/").values():
        spec = pinned_files.load_sources()["artifacts"][pin.artifact]
        name = spec["mirror_path"].rsplit("/", 1)[-1]
        src = SHARED / name if name.endswith(".json.gz") else SHARED / "models" / name
        (www / spec["mirror_path"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, www / spec["mirror_path"])
    server = StaticFileServer(www)
    workdir = tmp_path_factory.mktemp("discovery_dag")
    config = {"discovery": {**CONFIG["discovery"], "url_prefix": server.url}}
    try:
        proc = run_snakemake(workdir, config, "discovery", env=venv_env)
        again = run_snakemake(workdir, config, "discovery", "-n", env=venv_env)
    finally:
        server.close()
    yield workdir, proc, again, server.hits


def test_every_discovery_target_is_built_from_fetched_files(dag):
    workdir, proc, again, hits = dag
    assert proc.returncode == 0, proc.stderr[-5000:]
    for path in final_outputs(CONFIG):
        assert (workdir / path).is_file(), path
    assert len(hits) == 36  # the reference and the 35 cards, each once
    with gzip.open(workdir / "results/discovery/diatomics/emt.json.gz", "rt") as fh:
        curves = json.load(fh)
    assert list(curves["homo-nuclear"]) == ["H-H", "Cu-Cu"]
    assert curves["run_metadata"]["crucible"]["not_covered"] == ["Fe"]
    table = pd.read_csv(workdir / "results/tables/discovery_diatomics.csv", keep_default_na=False, na_values=[""])
    assert table["model"].iloc[0] == "emt" and table["source"].iloc[0] == "crucible (cpu)"
    assert table["n_elements"].iloc[0] == 2
    published = table[table["source"] == "published"]
    assert len(published) == 35
    assert published.set_index("model").loc["chgnet-0.3.0", "pbe_energy_mae"] == 3.205
    assert (
        "Nothing to be done" in again.stdout + again.stderr
        or "nothing to be done" in (again.stdout + again.stderr).lower()
    )
