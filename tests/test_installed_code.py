"""An installed distribution is its files as its RECORD hashes them (issue 44, item 3): a file
edited in place (its mtime restored or not) or removed is refused naming the file and the
distribution; an unchanged one is only stat-ed once it was checked."""

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
    site = tmp_path / "site"
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
    installed_code._distributions.cache_clear()
    installed_code._version.cache_clear()
    installed_code.check_distribution.cache_clear()
    yield site
    installed_code._distributions.cache_clear()
    installed_code._version.cache_clear()
    installed_code.check_distribution.cache_clear()


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
