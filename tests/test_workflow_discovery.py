"""The real Snakefile on .test/discovery (EMT on H, Cu, Fe): the reference and the 35 cards that
ship in data/matbench-discovery/ copied by the fetch rule through the real fetch code (checked
against their pins, CRUCIBLE_OFFLINE=1: no host but a registry and this machine), the curves,
table and figures built; then a no-op rerun, also after switching where the pinned bytes come from
(fetch_upstream, a mirror: issue 52). The same for the discovery scorer
(.test/discovery/stability.yaml): its figshare files cannot be served with their published MD5,
so a synthetic WBM summary and predictions file lie where a first fetch leaves them, with the lock
entries it records (tests/test_discovery_wbm.py fetches such files through the download code)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

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

SHIPPED = REPO / "data" / "matbench-discovery"  # the upstream repository's layout
CONFIG = load_test_config("discovery")


def _run_then_dry_run(workdir, config, env, *switched):
    """The discovery target built, then planned again with ``config`` and with each of ``switched``
    (a no-op rerun expected from each)."""
    proc = run_snakemake(workdir, config, "discovery", env=env)
    return proc, [run_snakemake(workdir, c, "discovery", "-n", env=env) for c in (config, *switched)]


def _nothing_to_do(proc) -> bool:
    return proc.returncode == 0 and "nothing to be done" in (proc.stdout + proc.stderr).lower()


@pytest.fixture(scope="module")
def dag(tmp_path_factory, venv_env):
    server = StaticFileServer(SHIPPED)  # a mirror, asked only once fetch_upstream is switched on
    workdir = tmp_path_factory.mktemp("discovery_dag")
    config = {"discovery": {**CONFIG["discovery"], "url_prefix": server.url}}
    upstream = {"discovery": {**config["discovery"], "fetch_upstream": True}}
    no_mirror = {"discovery": {**CONFIG["discovery"], "fetch_upstream": True, "url_prefix": "http://127.0.0.1:9"}}
    try:
        proc, again = _run_then_dry_run(workdir, config, venv_env, upstream, no_mirror, CONFIG)
    finally:
        server.close()
    yield workdir, proc, again, server.hits


def test_every_discovery_target_is_built_from_the_shipped_files(dag):
    workdir, proc, again, hits = dag
    assert proc.returncode == 0, proc.stderr[-5000:]
    for path in final_outputs(CONFIG):
        assert (workdir / path).is_file(), path
    assert hits == []  # the shipped copies: the mirror was never asked
    reference = pinned_files.resource_path(data.REFERENCE_ROLE).name
    assert "copying " in (workdir / "logs" / "fetch" / f"{reference}.log").read_text()
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


def test_where_the_pinned_bytes_come_from_plans_no_rerun(dag):
    """The same config, then fetch_upstream with the mirror, upstream with another mirror, and no
    mirror at all: each a no-op (the fetch rule's origin is no part of its identity)."""
    _, _, again, _ = dag
    for proc in again:
        assert _nothing_to_do(proc), (proc.stdout + proc.stderr)[-3000:]


KSRME = REPO / "data" / "k-srme"  # the k_SRME repository's layout
KAPPA_ROLES = (
    "discovery/phonons/structures",
    "discovery/phonons/pbe-reference",
    "discovery/phonons/chgnet-published",
    "discovery/phonons/chgnet-run-params",
)


def test_the_kappa_files_have_their_own_switch_and_mirror(tmp_path, venv_env):
    """κ's k_SRME files are copied from data/k-srme/; discovery.fetch_upstream (the leaderboard's
    files) leaves them so, discovery.phonons.fetch_upstream downloads them from
    discovery.phonons.url_prefix; and switching either plans no rerun of the fetches."""
    targets = [str(pinned_files.resource_path(role)) for role in KAPPA_ROLES]
    phonons = {"potentials": ["chgnet-0.3.0"], "materials": ["mp-1265"]}
    server = StaticFileServer(KSRME)
    try:
        leaderboard_upstream = {
            "discovery": {"diatomics": {"potentials": []}, "fetch_upstream": True, "phonons": phonons}
        }
        copied = tmp_path / "copied"
        copied.mkdir()
        proc = run_snakemake(copied, leaderboard_upstream, *targets, env=venv_env)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        for target in targets:
            assert "copying " in (copied / "logs" / "fetch" / f"{Path(target).name}.log").read_text(), target
        own_upstream = {
            "discovery": {
                "diatomics": {"potentials": []},
                "phonons": {**phonons, "fetch_upstream": True, "url_prefix": server.url},
            }
        }
        downloaded = tmp_path / "downloaded"
        downloaded.mkdir()
        proc = run_snakemake(downloaded, own_upstream, *targets, env=venv_env)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        assert len(server.hits) == len(targets), server.hits
        for target in targets:
            assert (downloaded / target).read_bytes() == (copied / target).read_bytes(), target
        no_mirror = {
            "discovery": {
                "diatomics": {"potentials": []},
                "phonons": {**phonons, "fetch_upstream": True, "url_prefix": "http://127.0.0.1:9"},
            }
        }
        for config in (own_upstream, no_mirror):
            assert _nothing_to_do(run_snakemake(copied, config, *targets, "-n", env=venv_env))
        assert _nothing_to_do(run_snakemake(downloaded, leaderboard_upstream, *targets, "-n", env=venv_env))
    finally:
        server.close()


STABILITY = load_test_config("discovery", "stability.yaml")


@pytest.fixture(scope="module")
def stability_dag(tmp_path_factory, venv_env):
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
    proc, (again,) = _run_then_dry_run(workdir, STABILITY, venv_env)
    yield workdir, proc, again, (summary, preds)


def test_the_scorer_builds_scores_and_the_table_beside_the_published_rows(stability_dag):
    workdir, proc, again, (summary, preds) = stability_dag
    assert proc.returncode == 0, proc.stderr[-5000:]
    for path in final_outputs(STABILITY):
        assert (workdir / path).is_file(), path
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
