"""crucible.core.fingerprint: the digest of a file or folder covers every byte its reader reads, links
are treated as the reader treats them, and file digests are cached by stat so reruns are cheap."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from crucible.catalysis import demo
from crucible.catalysis.clean import read_dataset
from crucible.catalysis.relative import read_surface_tree
from crucible.catalysis.vasp_tree import read_vasp_tree
from crucible.core import fingerprint, hashes
from crucible.core.errors import HashMismatchError
from crucible.core.fingerprint import LinkRefusedError
from crucible.sources import pinned_files


@pytest.fixture(autouse=True)
def hash_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CRUCIBLE_HASH_CACHE", str(tmp_path / "hash-cache"))
    return tmp_path / "hash-cache"


def test_file_digest_is_cached_by_stat_and_rehashed_after_a_write(tmp_path, monkeypatch):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"\0" * 3_000_000)
    reads = []
    real = hashes._read_sha256
    monkeypatch.setattr(hashes, "_read_sha256", lambda p: reads.append(p) or real(p))
    first = hashes.file_sha256(path, cached=True)
    assert hashes.file_sha256(path, cached=True) == first and len(reads) == 1  # the rerun reads nothing
    assert hashes.file_sha256(path) == first and len(reads) == 2  # a pin's check reads every byte
    with open(path, "r+b") as fh:  # one byte in the middle, as a fine-tune changes a middle tensor
        fh.seek(1_500_000)
        fh.write(b"\1")
    assert hashes.file_sha256(path, cached=True) != first and len(reads) == 3


def test_checkpoint_digest_sees_a_middle_byte_that_the_old_fingerprint_missed(tmp_path):
    """The old fingerprint hashed name, size and the first and last MiB of large files."""
    from crucible.llm.transformers_backend import checkpoint_fingerprint

    base = tmp_path / "m.Q4_1.gguf"
    base.write_bytes(os.urandom(6 << 20))
    tune = tmp_path / "tune" / "m.Q4_1.gguf"
    tune.parent.mkdir()
    shutil.copyfile(base, tune)
    with open(tune, "r+b") as fh:
        fh.seek(3 << 20)
        fh.write(b"\xff\xfe")
    assert fingerprint.checkpoint_sha256(tune) != fingerprint.checkpoint_sha256(base)
    assert checkpoint_fingerprint(tune) != checkpoint_fingerprint(base)


def test_checkpoint_folder_follows_links_as_loaders_do(tmp_path):
    """A Hugging Face snapshot folder is links to blobs: the digest is of the blobs' bytes."""
    blobs, snap = tmp_path / "blobs", tmp_path / "snapshot"
    blobs.mkdir()
    snap.mkdir()
    (blobs / "a").write_text('{"model_type": "gpt2"}')
    (blobs / "b").write_bytes(b"weights")
    (snap / "config.json").symlink_to(blobs / "a")
    (snap / "model.safetensors").symlink_to(blobs / "b")
    (snap / ".cache").mkdir()
    (snap / ".cache" / "download.lock").write_text("x")
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copyfile(blobs / "a", copy / "config.json")
    shutil.copyfile(blobs / "b", copy / "model.safetensors")
    assert fingerprint.checkpoint_sha256(snap) == fingerprint.checkpoint_sha256(copy)
    (blobs / "b").write_bytes(b"weightz")
    assert fingerprint.checkpoint_sha256(snap) != fingerprint.checkpoint_sha256(copy)


def test_package_digest_covers_every_module_of_the_package(tmp_path, monkeypatch):
    """A custom potential "pkg.make:factory" is identified by all of pkg, not by make.py alone."""
    pkg = tmp_path / "mypot"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "make.py").write_text("from mypot.params import SCALE\n")
    (pkg / "params.py").write_text("SCALE = 1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = fingerprint.package_sha256("mypot.make")
    __import__("mypot.make")  # writes __pycache__: bytecode is the interpreter's, not the package's
    assert fingerprint.package_sha256("mypot.make") == before
    (pkg / "params.py").write_text("SCALE = 2.0\n")
    assert fingerprint.package_sha256("mypot.make") != before
    for name in [m for m in sys.modules if m == "mypot" or m.startswith("mypot.")]:
        del sys.modules[name]
    assert fingerprint.package_sha256("no_such_module_here") is None


@pytest.fixture
def vasp_tree(tmp_path):
    out = tmp_path / "demo"
    demo.main([str(out)])
    return out / "emt-demo_vasp"


def _edit_energy(oszicar, shift: float) -> None:
    text = oszicar.read_text()
    e0 = float(text.split("E0=")[1].split()[0])
    oszicar.write_text(text.replace(text.split("E0=")[1].split()[0], f"{e0 + shift:.8E}", 1))


def test_vasp_tree_with_a_linked_folder_is_refused_by_pin_and_reader(vasp_tree, tmp_path):
    """rglob did not enter a linked folder while the reader did: an energy edited under it moved a
    reaction energy under an unchanged pin. Now hashing and reading both refuse the link."""
    pin = pinned_files.dataset_sha256(vasp_tree)
    elsewhere = tmp_path / "elsewhere"
    shutil.move(vasp_tree / "Cu111", elsewhere)
    (vasp_tree / "Cu111").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(LinkRefusedError, match=r"Cu111: a symbolic link \(to .*elsewhere\).*cp -rL"):
        pinned_files.dataset_sha256(vasp_tree)
    with pytest.raises(LinkRefusedError, match="Cu111: a symbolic link"):
        read_dataset("vasp-tree", vasp_tree, demo.COEFFICIENTS, sha256=pin)
    with pytest.raises(LinkRefusedError, match="Cu111: a symbolic link"):
        read_vasp_tree(vasp_tree, demo.COEFFICIENTS)  # unpinned, read by hand: refused too
    _edit_energy(elsewhere / "CO" / "site_0" / "OSZICAR", -1.0)
    with pytest.raises(LinkRefusedError):
        read_dataset("vasp-tree", vasp_tree, demo.COEFFICIENTS, sha256=pin)


def test_vasp_tree_edit_in_a_real_folder_stops_at_the_pin(vasp_tree):
    pin = pinned_files.dataset_sha256(vasp_tree)
    before = {r.reaction_id: r.dft_ads_eng for r in read_dataset("vasp-tree", vasp_tree, demo.COEFFICIENTS, sha256=pin)}
    assert before["Cu111_CO_site_0"] == pytest.approx(-0.0868, abs=1e-4)  # the issue: -1.0868 after the edit
    _edit_energy(vasp_tree / "Cu111" / "CO" / "site_0" / "OSZICAR", -1.0)
    with pytest.raises(HashMismatchError, match="differs from the pin"):
        read_dataset("vasp-tree", vasp_tree, demo.COEFFICIENTS, sha256=pin)


def test_linked_file_and_linked_root_are_refused_and_surface_trees_too(tmp_path):
    out = tmp_path / "demo"
    demo.main([str(out)])
    surface = out / "emt-demo_surface"
    material = sorted(p for p in surface.iterdir() if p.is_dir())[0]
    target = tmp_path / "CONTCAR.elsewhere"
    shutil.move(material / "slab" / "CONTCAR", target)
    (material / "slab" / "CONTCAR").symlink_to(target)
    with pytest.raises(LinkRefusedError, match="CONTCAR: a symbolic link"):
        read_surface_tree(surface)
    link_root = tmp_path / "vasp-link"
    link_root.symlink_to(out / "emt-demo_vasp", target_is_directory=True)
    with pytest.raises(LinkRefusedError, match="is a symbolic link"):
        pinned_files.dataset_sha256(link_root)


def test_tree_digest_keeps_the_catalysis_pin_format(vasp_tree):
    """Pins written before (sorted (relative path, SHA-256) lines) stay valid."""
    import hashlib

    from crucible.core.hashes import file_sha256

    digest = hashlib.sha256()
    for f in sorted(p for p in vasp_tree.rglob("*") if p.is_file()):
        digest.update(f"{f.relative_to(vasp_tree).as_posix()}\0{file_sha256(f)}\n".encode())
    assert pinned_files.dataset_sha256(vasp_tree) == digest.hexdigest()
