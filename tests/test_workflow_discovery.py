"""The real Snakefile on .test/discovery (EMT on H, Cu, Fe), its pinned files served by a local
server laid out as the leaderboard's repository (discovery.url_prefix): the fetch rule downloads
the reference and the 35 cards through the real download code, the curves, table and figures are
built; then a no-op rerun. The same for the discovery scorer (.test/discovery/stability.yaml):
its figshare files cannot be served with their published MD5, so a synthetic WBM summary and
predictions file lie where a first fetch leaves them, with the lock entries it records
(tests/test_discovery_wbm.py fetches such files through the download code). Needs the copies of
../shared/data/matbench-discovery (not in a fresh clone: skipped there; tests/test_discovery_data.py
fetches a committed card the same way)."""

from __future__ import annotations

import gzip
import json
import shutil

import pandas as pd
import pytest

from crucible.core.hashes import file_sha256
from crucible.discovery import data
from crucible.discovery.stability import SUBSETS, discovery_metrics
from crucible.discovery.wbm import WBM_ROLE, parse_predictions, parse_wbm_summary, predictions_role
from crucible.discovery.workflow import final_outputs
from crucible.sources import pinned_files

from helpers import REPO, StaticFileServer, load_test_config, run_snakemake, write_wbm_files

pytestmark = pytest.mark.slow

SHARED = REPO.parent / "shared" / "data" / "matbench-discovery"
CONFIG = load_test_config("discovery")


def _mirror(tmp_path_factory):
    if not (SHARED / "diatomics-dft.json.gz").is_file():
        pytest.skip(f"no copies of the leaderboard's files at {SHARED}")
    www = tmp_path_factory.mktemp("mbd_www")
    artifacts = pinned_files.load_sources()["artifacts"]
    for pin in (pinned_files.find_pin(r) for r in [*data.card_roles(), data.REFERENCE_ROLE]):
        spec = artifacts[pin.artifact]
        name = spec["mirror_path"].rsplit("/", 1)[-1]
        src = SHARED / name if name.endswith(".json.gz") else SHARED / "models" / name
        (www / spec["mirror_path"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, www / spec["mirror_path"])
    return StaticFileServer(www)


def _run_then_dry_run(workdir, config, server, env):
    """The discovery target built, then planned again (a no-op rerun expected); the server closed."""
    try:
        return run_snakemake(workdir, config, "discovery", env=env), run_snakemake(
            workdir, config, "discovery", "-n", env=env
        )
    finally:
        server.close()


@pytest.fixture(scope="module")
def dag(tmp_path_factory, venv_env):
    server = _mirror(tmp_path_factory)
    workdir = tmp_path_factory.mktemp("discovery_dag")
    config = {"discovery": {**CONFIG["discovery"], "url_prefix": server.url}}
    proc, again = _run_then_dry_run(workdir, config, server, venv_env)
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


STABILITY = load_test_config("discovery", "stability.yaml")


@pytest.fixture(scope="module")
def stability_dag(tmp_path_factory, venv_env):
    server = _mirror(tmp_path_factory)
    workdir = tmp_path_factory.mktemp("discovery_stability_dag")
    summary, preds = write_wbm_files(tmp_path_factory.mktemp("wbm"))
    lock = {}
    doc = pinned_files.load_sources()
    for role, path in ((WBM_ROLE, summary), (predictions_role("chgnet-0.3.0"), preds)):
        pin = pinned_files.find_pin(role)
        target = workdir / pinned_files.resource_path(role)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
        spec = doc["artifacts"][pin.artifact]
        lock[pin.artifact] = {"sha256": file_sha256(path), "git_blob": None, "url": spec["url"], "md5": pin.md5}
    (workdir / "resources" / pinned_files.LOCK_NAME).write_text(json.dumps(lock, indent=2) + "\n")
    config = {"discovery": {**STABILITY["discovery"], "url_prefix": server.url}}
    proc, again = _run_then_dry_run(workdir, config, server, venv_env)
    yield workdir, proc, again, server.hits, (summary, preds)


def test_the_scorer_builds_scores_and_the_table_beside_the_published_rows(stability_dag):
    workdir, proc, again, hits, (summary, preds) = stability_dag
    assert proc.returncode == 0, proc.stderr[-5000:]
    for path in final_outputs(STABILITY):
        assert (workdir / path).is_file(), path
    assert not any("discovery" in h and h.endswith(".csv.gz") for h in hits)  # figshare files: none fetched
    scores = json.loads((workdir / "results/discovery/stability/chgnet-0.3.0.json").read_text())
    direct = discovery_metrics(parse_wbm_summary(summary), parse_predictions(preds))
    assert (scores["absent"], scores["unrealistic"]) == (3, 1)
    for subset in SUBSETS:
        assert scores[subset]["F1"] == pytest.approx(direct[subset]["F1"], rel=1e-12)
        assert scores[subset]["TP"] == direct[subset]["TP"]
    table = pd.read_csv(workdir / "results/tables/discovery_stability.csv", keep_default_na=False, na_values=[""])
    ours = table[table["source"] == "crucible"]
    assert list(ours["model"]) == ["chgnet-0.3.0"] * 3 and list(ours["subset"]) == list(SUBSETS)
    assert ours["MAE"].iloc[0] == pytest.approx(direct["full_test_set"]["MAE"], rel=1e-12)
    published = table[table["source"] == "published"]
    assert published["model"].nunique() == 35 and len(published) == 105
    row = published[(published["model"] == "chgnet-0.3.0") & (published["subset"] == "full_test_set")].iloc[0]
    assert (row["F1"], row["date"], row["missing_preds"]) == (0.612, "2023-12-21", 2)
    assert "| chgnet-0.3.0 | crucible |" in (workdir / "results/tables/discovery_stability.md").read_text()
    assert "nothing to be done" in (again.stdout + again.stderr).lower()
