"""crucible.sources.pinned_files.pinned: a file of config/sources.yaml read by its role, its hash checked on
every call (good, edited, missing, pinned by git blob id through the lock file), and the roles
every reader asks for exist in the real sources file."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pytest

from crucible.core.errors import ConfigError, CrucibleError, HashMismatchError
from crucible.core.hashes import file_sha256
from crucible.sources import downloads as sources
from crucible.sources import pinned_files

from helpers import StaticFileServer

PAYLOAD = b"formula,target\nFe2O3,1.5\n"
SHA = hashlib.sha256(PAYLOAD).hexdigest()


def _doc(member_sha: str = SHA, **blob_artifact) -> dict:
    """A sources document of its own: one archive with one member, one file pinned by blob."""
    doc = {
        "artifacts": {
            "pkg-1.0": {
                "kind": "pip",
                "requirement": "pkg==1.0",
                "filename": "pkg-1.0.tar.gz",
                "sha256": "ab" * 32,
                "members": {"table.csv": {"role": "test/table", "path": "pkg-1.0/t.csv", "sha256": member_sha}},
            }
        }
    }
    if blob_artifact:
        doc["artifacts"]["set-train"] = {"kind": "http", "url": "http://x/y.csv", "filename": "set-train.csv"}
        doc["artifacts"]["set-train"].update(blob_artifact)
    return doc


def _extracted(root, payload=PAYLOAD):
    path = root / "extracted" / "pkg-1.0" / "table.csv"
    path.parent.mkdir(parents=True)
    path.write_bytes(payload)
    return path


def test_a_good_file_comes_back_from_where_the_fetch_stage_puts_it(tmp_path):
    path = _extracted(tmp_path)
    assert pinned_files.pinned("test/table", sources=_doc(), resources=tmp_path) == path
    assert pinned_files.pinned("test/table", path, sources=_doc()) == path  # a rule's input, as given
    assert pinned_files.resource_path("test/table", _doc(), tmp_path) == path


def test_an_edited_file_stops_naming_the_file_both_hashes_and_the_remedy(tmp_path):
    path = _extracted(tmp_path, PAYLOAD.replace(b"1.5", b"9.9"))
    with pytest.raises(HashMismatchError) as err:
        pinned_files.pinned("test/table", path, sources=_doc())
    msg = str(err.value)
    assert str(path) in msg and SHA in msg and file_sha256(path) in msg
    assert "member table.csv of artifact pkg-1.0" in msg and "extracted" in msg
    assert "Delete it and rerun" in msg and "crucible sources provide --role test/table" in msg


def test_every_call_hashes_again(tmp_path):
    path = _extracted(tmp_path)
    pinned_files.pinned("test/table", path, sources=_doc())
    path.write_bytes(PAYLOAD + b"Fe,0\n")  # edited between two reads of one process
    with pytest.raises(HashMismatchError, match="differs from the pin"):
        pinned_files.pinned("test/table", path, sources=_doc())


def test_a_missing_file_says_how_to_get_it(tmp_path):
    with pytest.raises(CrucibleError, match=r"table.csv: missing; it should hold 'test/table'.*Rerun the workflow"):
        pinned_files.pinned("test/table", sources=_doc(), resources=tmp_path)


def test_unknown_and_duplicated_roles_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"role 'test/tabel'; known: test/table"):
        pinned_files.pinned("test/tabel", sources=_doc())
    doc = _doc(git_blob="0" * 40, role="test/table")
    path = tmp_path / "sources.yaml"
    path.write_text(json.dumps(doc))  # JSON is YAML
    with pytest.raises(ConfigError, match="role 'test/table' is given to both"):
        pinned_files.load_sources(path)
    doc = _doc()
    doc["artifacts"]["pkg-1.0"]["role"] = "test/archive"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="an archive's members carry the roles"):
        pinned_files.load_sources(path)


def test_a_blob_pinned_file_is_checked_against_the_lock_file_then_the_blob(tmp_path):
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    path = downloads / "set-train.csv"
    path.write_bytes(PAYLOAD)
    blob = sources.git_blob_id(path)
    doc = _doc(git_blob=blob, role="test/set/train")
    # no lock entry yet: the blob id is the pin
    assert pinned_files.pinned("test/set/train", sources=doc, resources=tmp_path) == path
    # the SHA-256 the verified fetch recorded is checked from then on
    lock = tmp_path / sources.LOCK_NAME
    lock.write_text(json.dumps({"set-train": SHA}))
    assert pinned_files.pinned("test/set/train", path, sources=doc, lock=lock) == path
    path.write_bytes(PAYLOAD + b"C,0\n")
    with pytest.raises(HashMismatchError) as err:
        pinned_files.pinned("test/set/train", path, sources=doc, lock=lock)
    assert f"recorded in {lock}" in str(err.value) and SHA in str(err.value) and "fetched again" in str(err.value)
    lock.unlink()
    with pytest.raises(
        HashMismatchError, match=rf"git blob id {sources.git_blob_id(path)} differs from the pin {blob}"
    ):
        pinned_files.pinned("test/set/train", path, sources=doc, resources=tmp_path)
    # a SHA-256 in the sources file wins over the lock file
    doc = _doc(git_blob=blob, role="test/set/train", sha256=SHA)
    path.write_bytes(PAYLOAD)
    lock.write_text(json.dumps({"set-train": "0" * 64}))
    assert pinned_files.pinned("test/set/train", path, sources=doc, lock=lock) == path


def test_real_cdvae_pins_go_through_the_lock_file():
    """The CDVAE sets of config/sources.yaml: pinned by blob, some also by SHA-256."""
    pins = pinned_files.roles(prefix="crystal/")
    cdvae = {r: p for r, p in pins.items() if p.git_blob}
    assert sorted(cdvae) == sorted(
        f"crystal/{d}/{s}" for d in ("mp-20", "perov-5", "carbon-24") for s in ("train", "val", "test")
    )
    assert all(p.member is None and p.location.startswith("downloads/") for p in cdvae.values())
    assert {r for r, p in cdvae.items() if p.sha256 is None} == {
        "crystal/mp-20/train",
        "crystal/mp-20/val",
        "crystal/mp-20/test",
        "crystal/perov-5/train",
        "crystal/carbon-24/train",
    }


def test_every_role_a_reader_asks_for_is_in_the_sources_file():
    from crucible.crystal.data import BUILTIN_DATASETS, dataset_roles
    from crucible.matbench.tasks import METADATA_ROLE, TASKS, VALIDATION_ROLE, mirror_role
    from crucible.models.element_tables import DEFAULT_TABLE, ROLE_PREFIX, builtin_tables
    from crucible.reactions.data import DATASETS

    wanted = {METADATA_ROLE, VALIDATION_ROLE, ROLE_PREFIX + DEFAULT_TABLE, "structures/li-o"}
    wanted |= {mirror_role(t) for t in TASKS}
    wanted |= {spec.role for spec in DATASETS.values()}
    wanted |= {r for d in BUILTIN_DATASETS for r in dataset_roles(d)}
    known = pinned_files.roles()
    assert wanted <= set(known), sorted(wanted - set(known))
    assert sorted(builtin_tables()) == ["magpie", "mat2vec"]
    # each role names a pinned file: a member with its SHA-256, or a download pinned somehow
    for role, pin in known.items():
        assert pin.sha256 or pin.git_blob or pin.md5, role


def test_the_check_hashes_the_file_and_nothing_else(members, monkeypatch):
    """Every pinned Matbench file checked by one SHA-256 of its own bytes (its cost, timed in
    benchmarks/bench_pinned_check.py): no other digest, no extraction, no lock file for a file
    pinned by SHA-256."""
    from crucible.core import hashes

    hashed = []
    sha256 = hashes.file_sha256
    monkeypatch.setattr(hashes, "file_sha256", lambda path, **kw: hashed.append(str(path)) or sha256(path, **kw))
    monkeypatch.setattr(hashes, "git_blob_id", lambda path: pytest.fail(f"git blob of {path}"))
    monkeypatch.setattr(hashes, "md5_file", lambda path: pytest.fail(f"MD5 of {path}"))
    for role, path in members.items():
        assert pinned_files.pinned(role, path) == path
    assert sorted(hashed) == sorted(str(p) for p in members.values())


def _archive(tmp_path, payload: bytes):
    buf = tmp_path / "pkg-1.0.tar.gz"
    with tarfile.open(buf, "w:gz") as tf:
        info = tarfile.TarInfo("pkg-1.0/t.csv")
        info.size = len(payload)
        tf.addfile(info, io.BytesIO(payload))
    return buf


def test_provide_fetches_extracts_and_restores_an_edited_member(tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    archive = _archive(www, PAYLOAD)
    server = StaticFileServer(www)
    try:
        doc = _doc()
        doc["artifacts"]["pkg-1.0"].update(kind="http", url=f"{server.url}/{archive.name}", sha256=file_sha256(archive))
        resources = tmp_path / "resources"
        path = pinned_files.provide("test/table", resources, sources=doc)
        assert path == resources / "extracted" / "pkg-1.0" / "table.csv" and path.read_bytes() == PAYLOAD
        path.write_bytes(b"edited")
        assert pinned_files.provide("test/table", resources, sources=doc).read_bytes() == PAYLOAD
        assert server.hits == ["/pkg-1.0.tar.gz"]  # the archive is fetched once
    finally:
        server.close()


def test_readers_refuse_an_edited_pinned_file(tmp_path, members):
    """The library readers, not only the CLI: metadata, validation, mirror table, element table."""
    from crucible.matbench import clean, folds, tasks
    from crucible.models.element_tables import checked_table

    edited = {}
    for role in (
        tasks.METADATA_ROLE,
        tasks.VALIDATION_ROLE,
        tasks.mirror_role("matbench_steels"),
        "element-table/mat2vec",
    ):
        path = tmp_path / role.replace("/", "_")
        path.write_bytes(members[role].read_bytes() + b"\n")
        edited[role] = path
    with pytest.raises(HashMismatchError, match="matbench/metadata"):
        tasks.load_metadata(edited[tasks.METADATA_ROLE])
    with pytest.raises(HashMismatchError, match="matbench/validation"):
        folds.load_validation(edited[tasks.VALIDATION_ROLE])
    metadata = tasks.load_metadata(members[tasks.METADATA_ROLE])
    with pytest.raises(HashMismatchError, match="matbench/mirror/matbench_steels"):
        clean.clean_task(
            "matbench_steels", "composition-mirror", edited[tasks.mirror_role("matbench_steels")], metadata
        )
    with pytest.raises(HashMismatchError, match="element-table/mat2vec"):
        checked_table(None, edited["element-table/mat2vec"])  # the default table is mat2vec
    with pytest.raises(HashMismatchError, match="element-table/mat2vec"):
        checked_table("mat2vec", edited["element-table/mat2vec"])
    assert checked_table(str(edited["element-table/mat2vec"]), edited["element-table/mat2vec"]).exists()  # a user's own


def test_user_predict_takes_predicts_arguments_and_checks_the_element_table(tmp_path, members):
    """user-predict shares predict's argument definitions (the drift is gone) and refuses an
    edited pinned element table before fitting anything."""
    import argparse

    from crucible.cli import group_parser
    from crucible.stages import declaration as stage

    parser = group_parser("matbench", argparse.ArgumentParser())
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags = {name: {o for a in p._actions for o in a.option_strings} for name, p in sub.choices.items()}
    assert flags["user-predict"] == flags["predict"] - {"--task"}
    edited = tmp_path / "table.csv"
    edited.write_bytes(members["element-table/mat2vec"].read_bytes().replace(b"0", b"1", 1))
    card = tmp_path / "card.json"
    card.write_text(json.dumps({"task": "mine", "task_type": "regression"}))
    args = parser.parse_args(
        ["user-predict", "--model", "comp-transformer", "--fold", "0", "--data", "d.parquet", "--card", str(card)]
        + ["--folds", "f.parquet", "--element-table", str(edited), "--out", "p.parquet"]
    )
    with pytest.raises(HashMismatchError, match=rf"{edited}: SHA-256 .* differs from the pin"):
        stage.run(args.stage, args)


def test_a_pinned_catalysis_dataset_is_checked_where_it_is_read(tmp_path):
    """A user's dataset with a pin (catalysis.datasets.<name>.sha256): file or folder."""
    from crucible.catalysis.clean import read_dataset

    tree = tmp_path / "tree"
    (tree / "H").mkdir(parents=True)
    (tree / "H" / "OUTCAR").write_text("energy 1\n")
    pin = pinned_files.dataset_sha256(tree)
    assert pinned_files.verify_pinned(tree, pin, "catalysis dataset", digest=pinned_files.dataset_sha256) == pin
    (tree / "H" / "OUTCAR").write_text("energy 2\n")
    with pytest.raises(
        HashMismatchError, match=rf"{tree}: SHA-256 {pinned_files.dataset_sha256(tree)} differs from the pin {pin}"
    ):
        read_dataset("vasp-tree", tree, {"H": {"slab": -1, "adslab": 1}}, sha256=pin)
