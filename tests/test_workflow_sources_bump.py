"""A version bump is an edit of config/sources.yaml alone, through the DAG: a new ``url`` and
``git_blob`` (and ``sha256``) for an artifact fetches it again, and the lock follows the new pin
instead of refusing the new file against the SHA-256 recorded for the old one. Files are served
from 127.0.0.1; the repository is cloned so that its sources file can be edited."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import yaml

from crucible.sources import downloads as sources
from crucible.sources import pinned_files

from helpers import REPO, StaticFileServer, run_snakemake

pytestmark = pytest.mark.slow  # two Snakemake runs of a clone of the workflow

BLOB_ONLY = pinned_files.find_pin("crystal/mp-20/train").artifact  # pinned by git blob id: SHA-256 in the lock
BOTH = pinned_files.find_pin("crystal/perov-5/val").artifact  # pinned by git blob id and SHA-256 in the sources file


def _csv(version: int) -> bytes:
    return f",material_id,cif\n0,mp-{version},data_v{version}\n".encode()


@pytest.fixture
def clone(tmp_path):
    root = tmp_path / "clone"
    root.mkdir()
    for name in ("Snakefile", "workflow", "config", "envs"):
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, root / name)
    return root


def _pin(clone, server, version: int) -> None:
    """Point both artifacts at version ``version`` of their file, as a version bump does."""
    path = clone / "config" / "sources.yaml"
    doc = yaml.safe_load(path.read_text())
    served = clone.parent / "served" / f"v{version}"  # the folder the server serves
    served.mkdir(parents=True, exist_ok=True)
    for name in (BLOB_ONLY, BOTH):
        body = _csv(version) + name.encode()
        (served / f"{name}.csv").write_bytes(body)
        spec = doc["artifacts"][name]
        spec["url"] = f"{server.url}/v{version}/{name}.csv"
        spec["git_blob"] = hashlib.sha1(f"blob {len(body)}\0".encode() + body).hexdigest()
        if name == BOTH:
            spec["sha256"] = hashlib.sha256(body).hexdigest()
        else:
            spec.pop("sha256", None)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def test_a_new_url_and_pin_fetches_again_and_the_lock_follows(clone, tmp_path, venv_env):
    (tmp_path / "served").mkdir()
    server = StaticFileServer(tmp_path / "served")
    work = tmp_path / "work"
    work.mkdir()
    targets = [f"resources/downloads/{name}.csv" for name in (BLOB_ONLY, BOTH)]

    def run():
        return run_snakemake(work, {}, *targets, env=venv_env, snakefile=clone / "Snakefile")

    try:
        _pin(clone, server, 1)
        proc = run()
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
        lock = json.loads((work / "resources" / sources.LOCK_NAME).read_text())
        v1 = hashlib.sha256(_csv(1) + BLOB_ONLY.encode()).hexdigest()
        assert lock[BLOB_ONLY]["sha256"] == v1 and lock[BLOB_ONLY]["url"].endswith(f"/v1/{BLOB_ONLY}.csv")
        hits = len(server.hits)

        proc = run()  # nothing changed: nothing fetched
        assert proc.returncode == 0 and len(server.hits) == hits, proc.stdout[-2000:]

        _pin(clone, server, 2)  # the bump: new url and git_blob (and sha256 where it is pinned)
        proc = run()
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
        assert sorted(server.hits[hits:]) == sorted([f"/v2/{BLOB_ONLY}.csv", f"/v2/{BOTH}.csv"])
        for name in (BLOB_ONLY, BOTH):
            assert (work / "resources" / "downloads" / f"{name}.csv").read_bytes() == _csv(2) + name.encode()
        lock = json.loads((work / "resources" / sources.LOCK_NAME).read_text())
        v2 = hashlib.sha256(_csv(2) + BLOB_ONLY.encode()).hexdigest()
        assert lock[BLOB_ONLY] == {
            "sha256": v2,
            "git_blob": yaml.safe_load((clone / "config" / "sources.yaml").read_text())["artifacts"][BLOB_ONLY][
                "git_blob"
            ],
            "url": f"{server.url}/v2/{BLOB_ONLY}.csv",
        }
        # and the readers check the new file against the new pin
        doc = pinned_files.load_sources(clone / "config" / "sources.yaml")
        assert pinned_files.pinned("crystal/mp-20/train", sources=doc, resources=work / "resources").read_bytes() == (
            _csv(2) + BLOB_ONLY.encode()
        )
    finally:
        server.close()


def test_an_entry_of_the_older_lock_format_names_the_line_to_remove(tmp_path):
    """A bare SHA-256 (lock written before entries named their git blob) stays binding: the
    refusal says how to let a deliberate bump through."""
    from crucible.core.errors import HashMismatchError

    (tmp_path / "served").mkdir()
    body = _csv(2)
    (tmp_path / "served" / "x.csv").write_bytes(body)
    server = StaticFileServer(tmp_path / "served")
    lock = tmp_path / "sources.lock.json"
    lock.write_text(json.dumps({"x": "ab" * 32}))
    spec = {
        "kind": "http",
        "url": f"{server.url}/x.csv",
        "filename": "x.csv",
        "git_blob": hashlib.sha1(f"blob {len(body)}\0".encode() + body).hexdigest(),
    }
    try:
        with pytest.raises(HashMismatchError, match="remove the entry 'x' from the lock file and rerun"):
            sources.fetch("x", spec, tmp_path / "x.csv", lock=lock)
    finally:
        server.close()
