"""An installed distribution is its files as its RECORD hashes them (issue 44, item 3): a file
edited in place (its mtime restored or not) or removed is refused naming the file and the
distribution; an unchanged one is only stat-ed once it was checked. Whose a file is, and whether
it can be checked, is one decision (``owner_of``), the same for a job's audit of its reads and for
planning's check of a distribution by name; crucible itself is left to its code digest in both."""

from __future__ import annotations

import base64
import hashlib
import importlib
import os

import pytest

from crucible.identity import installed_code


def _record_hash(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@pytest.fixture
def fake_dist(tmp_path, monkeypatch):
    """A distribution ``fakedist 1.0`` (package ``fakepkg``) installed as pip installs one."""
    site = tmp_path / "lib" / "site-packages"
    pkg = site / "fakepkg"
    pkg.mkdir(parents=True)
    files = {"fakepkg/__init__.py": b"SCALE = 1.0\n", "fakepkg/table.json": b'{"a": 1}\n'}
    for rel, data in files.items():
        (site / rel).write_bytes(data)
    info = site / "fakedist-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakedist\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("fakepkg\n")
    rows = [f"{rel},sha256={_record_hash(data)},{len(data)}" for rel, data in files.items()]
    rows += ["fakepkg/__pycache__/__init__.cpython-311.pyc,,", "fakedist-1.0.dist-info/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("CRUCIBLE_HASH_CACHE", str(tmp_path / "cache" / "sha256"))
    importlib.invalidate_caches()
    _clear()
    yield site
    _clear()


_clear = installed_code.clear_caches


def test_an_installed_distribution_is_named_by_its_version(fake_dist):
    assert installed_code.package_versions(["fakepkg", "json"]) == {"fakedist": "1.0"}


def test_an_unchanged_distribution_passes_and_is_then_only_stated(fake_dist, monkeypatch):
    installed_code.check_distributions(["fakedist"])
    hashed = []
    real = installed_code._record_hash
    monkeypatch.setattr(installed_code, "_record_hash", lambda p: hashed.append(p) or real(p))
    installed_code.check_distribution.cache_clear()
    installed_code.check_distributions(["fakedist"])
    assert hashed == []


@pytest.mark.parametrize("restore_mtime", [False, True])
def test_a_file_edited_in_place_is_refused_naming_file_and_distribution(fake_dist, restore_mtime):
    installed_code.check_distributions(["fakedist"])  # checked once: its stats are cached
    table = fake_dist / "fakepkg" / "__init__.py"
    before = table.stat()
    table.write_bytes(b"SCALE = 2.0\n")  # same size
    if restore_mtime:
        os.utime(table, ns=(before.st_atime_ns, before.st_mtime_ns))
    installed_code.check_distribution.cache_clear()
    with pytest.raises(installed_code.EditedDistributionError) as err:
        installed_code.check_distributions(["fakedist"])
    message = str(err.value)
    assert str(table) in message and "fakedist 1.0" in message and "--force-reinstall" in message


def test_a_removed_file_is_refused(fake_dist):
    (fake_dist / "fakepkg" / "__init__.py").unlink()
    with pytest.raises(installed_code.EditedDistributionError, match="__init__.py is missing"):
        installed_code.check_distributions(["fakedist"])


def test_the_real_environment_passes():
    """Every distribution the test environment has is as installed (CI's fresh venv included)."""
    installed_code.check_distributions(installed_code.distributions_of(["numpy", "pandas", "yaml", "ase"]))


def test_a_file_and_its_distribution_get_one_answer(fake_dist):
    owner = installed_code.owner_of(str(fake_dist / "fakepkg" / "__init__.py"))
    assert (owner.name, owner.version, owner.own, owner.problem) == ("fakedist", "1.0", False, None)
    (fake_dist / "fakepkg" / "extra.py").write_text("X = 1\n")  # beside the package, not in its RECORD
    assert installed_code.owner_of(str(fake_dist / "fakepkg" / "extra.py")).problem == (
        "fakedist 1.0: a file its RECORD does not list"
    )
    installed_code.check_distributions(["fakedist"])  # the RECORD's own files are as installed
    (fake_dist / "fakedist-1.0.dist-info" / "RECORD").unlink()
    _clear()
    by_file = installed_code.owner_of(str(fake_dist / "fakepkg" / "__init__.py"))
    assert by_file.problem == "fakedist 1.0 is installed without a RECORD"
    with pytest.raises(installed_code.EditedDistributionError) as err:
        installed_code.check_distributions(["fakedist"])
    assert str(err.value) == by_file.refusal()  # the same words, wherever it is found
    assert "pip install --force-reinstall --no-deps fakedist==1.0" in str(err.value)


def test_crucible_itself_is_left_to_its_code_digest_in_one_place(tmp_path, monkeypatch):
    """A checkout run with PYTHONPATH=src finds the source tree's egg-info, which no installer gave
    a RECORD; an editable install's .pth is a file of crucible's distribution: neither is refused,
    recorded or checked as a distribution, by the audit of a job or at planning."""
    from crucible.identity import job_reads
    from crucible.identity.code_closure import PACKAGE_ROOT

    src = tmp_path / "src"
    (src / "crucible.egg-info").mkdir(parents=True)
    (src / "crucible.egg-info" / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: crucible\nVersion: 0.0.1\n\n")
    (src / "crucible.egg-info" / "top_level.txt").write_text("crucible\n")
    site = tmp_path / "lib" / "site-packages"
    info = site / "crucible-0.0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: crucible\nVersion: 0.0.1\n\n")
    (site / "__editable__.crucible-0.0.1.pth").write_text(str(src) + "\n")
    data = (site / "__editable__.crucible-0.0.1.pth").read_bytes()
    (info / "RECORD").write_text(f"__editable__.crucible-0.0.1.pth,sha256={_record_hash(data)},{len(data)}\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(src))
    monkeypatch.setenv("CRUCIBLE_HASH_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    importlib.invalidate_caches()
    _clear()
    try:
        installed_code.check_distribution("crucible")  # the egg-info first on the path: no RECORD, not refused
        assert installed_code.owner_of(str(site / "__editable__.crucible-0.0.1.pth")).own
        assert installed_code.owner_of(str(PACKAGE_ROOT / "cli.py")).own
        job_reads.watch()
        ran = job_reads.collect([], [])  # the editable install's .pth is among what every job ran
        assert "crucible" not in ran["distributions"] and not ran["refused"], ran
        assert not any(f.endswith("crucible-0.0.1.pth") or f.startswith(str(PACKAGE_ROOT)) for f in ran["files"])
        # and any other distribution found the same way is refused
        (src / "crucible.egg-info" / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: other\nVersion: 1\n\n")
        (src / "crucible.egg-info").rename(src / "other.egg-info")
        importlib.invalidate_caches()
        _clear()
        with pytest.raises(installed_code.EditedDistributionError, match="other 1 is installed without a RECORD"):
            installed_code.check_distribution("other")
    finally:
        _clear()
