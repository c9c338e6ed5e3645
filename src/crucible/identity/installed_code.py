"""The installed distributions a job's code imports: their versions, and whether their files are
still the files that version installed.

A job's code identity names each third-party distribution it reaches by version
(:func:`package_versions`). That holds only while the distribution's files are the ones its
installer wrote: the installer records every file's SHA-256 in the distribution's ``RECORD``.
:func:`check_distributions` compares them, at planning, for every distribution a job's code
reaches, and refuses a distribution edited in place, naming the file and the distribution and how
to reinstall it. Refused rather than digested: a result made with an edited package would carry a
version label that it does not run, and no one else can rebuild that local state; reinstalling is
the fix, and an intended change belongs in a fork installed under its own version.

Hashing torch's 12 000 files takes more than a second, so a distribution's checked files are kept
in a cache by their stat (size, mtime, ctime, inode: ``touch -r`` restores an mtime, never a
ctime); planning then only stats them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from crucible.core.errors import ConfigError
from crucible.core.hashes import file_sha256

CACHE_FORMAT = 2
# What a distribution runs: its Python source and its extension modules. Its data files are not
# read here (a job reads those it needs; pinned ones are checked by crucible.sources.pinned_files).
CODE = frozenset({".py", ".so", ".pyd"})


class EditedDistributionError(ConfigError):
    """An installed distribution whose files differ from its RECORD."""


@lru_cache(maxsize=1)
def _distributions() -> dict[str, list[str]]:
    import importlib.metadata

    return importlib.metadata.packages_distributions()


def distributions_of(top_level_names: Iterable[str]) -> list[str]:
    """The installed distributions behind these import names (the standard library has none)."""
    out = set()
    for name in top_level_names:
        if name not in sys.stdlib_module_names:
            out.update(d for d in _distributions().get(name, []) if _version(d) is not None)
    return sorted(out)


def package_versions(top_level_names: Iterable[str]) -> dict[str, str]:
    """``{distribution: version}`` of the installed distributions behind these import names."""
    return {dist: _version(dist) for dist in distributions_of(top_level_names)}


@lru_cache(maxsize=None)
def _version(dist: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cache_file(dist: str, version: str, location: Path) -> Path:
    from crucible.core.hashes import cache_dir

    where = hashlib.sha256(str(location).encode()).hexdigest()[:16]
    # beside the file digests (their keys are two-hex-digit folders): one cache place to move or clear
    return cache_dir() / "installed" / f"{dist}-{version}-{where}.json"


def _stat_key(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _record_hash(path: Path) -> str:
    """A file's SHA-256 as RECORD writes it: urlsafe base64 without padding."""
    return base64.urlsafe_b64encode(bytes.fromhex(file_sha256(path))).rstrip(b"=").decode("ascii")


@lru_cache(maxsize=None)
def check_distribution(dist: str) -> None:
    """Refuse ``dist`` when a file its RECORD hashes is changed or missing (once per process; the
    files seen unchanged before are only stat-ed)."""
    import importlib.metadata

    if dist == "crucible":
        # crucible itself is identified by the code digest (its static closure); and a checkout run
        # with PYTHONPATH=src finds the source tree's egg-info, which no installer gave a RECORD
        return
    try:
        meta = importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return
    files = _record_rows(meta)
    if files is None:  # nothing to compare its files with: a job would run what no one can check
        raise EditedDistributionError(
            f"{dist} {meta.version} is installed without a RECORD: "
            "its files cannot be checked, so a result made with it would carry a version it may not run. "
            f"Reinstall it (pip install --force-reinstall --no-deps {dist}=={meta.version})"
        )
    location = Path(meta.locate_file("")).resolve()
    cache = _cache_file(dist, meta.version, location)
    try:
        known = json.loads(cache.read_text(encoding="utf-8"))
        seen = known["files"] if known.get("format") == CACHE_FORMAT else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        seen = {}
    checked: dict[str, list[int]] = {}
    for rel, recorded in files:
        if not recorded.startswith("sha256=") or rel.startswith("..") or Path(rel).suffix not in CODE:
            continue  # bytecode, RECORD itself, scripts outside the package folder, data files
        path = Path(meta.locate_file(rel))
        try:
            key = _stat_key(path.stat())
        except FileNotFoundError:
            raise EditedDistributionError(_edited(dist, meta.version, path, "is missing")) from None
        if seen.get(rel) != key:
            if _record_hash(path) != recorded.removeprefix("sha256="):
                raise EditedDistributionError(_edited(dist, meta.version, path, "differs from its RECORD"))
        checked[rel] = key
    if checked != seen:
        from crucible.core.io import write_json

        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            write_json({"format": CACHE_FORMAT, "files": checked}, cache)
        except OSError:
            pass  # a cache that cannot be written only costs time


def _record_rows(meta) -> list[tuple[str, str]] | None:
    """``(path, hash)`` of each row of the distribution's RECORD, read as written: Python 3.12's
    ``Distribution.files`` leaves out the files that no longer exist, which are the removed ones
    this check must see."""
    import csv

    text = meta.read_text("RECORD")
    if text is None:
        return None
    return [(row[0], row[1]) for row in csv.reader(text.splitlines()) if len(row) >= 2]


def _edited(dist: str, version: str, path: Path, what: str) -> str:
    return (
        f"{path} {what}: the installed {dist} {version} was edited in place, so a result made with it "
        f"would be labelled '{dist} {version}' without running it. Reinstall it "
        f"(pip install --force-reinstall --no-deps {dist}=={version}); to run a changed {dist}, install "
        "it under a version of its own"
    )


def check_distributions(dists: Iterable[str]) -> None:
    """:func:`check_distribution` of each of ``dists``, in order."""
    for dist in sorted(set(dists)):
        check_distribution(dist)
