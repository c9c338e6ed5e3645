"""Installed distributions: which one a file belongs to and whether it can be checked
(:func:`owner_of`), their versions, and whether their files are still the files that version
installed.

One decision serves the two places that need it, :func:`owner_of` (a file, as a job's audit of
what it read finds it: crucible.identity.job_reads) and :func:`check_distribution` (a distribution
by name, as planning finds it in a job's code or record): :func:`_owner` says whose file it is,
whether that is crucible itself (identified by its code digest, never checked here: a checkout run
with ``PYTHONPATH=src`` finds the source tree's egg-info, which no installer gave a RECORD), and
why what it runs cannot be checked (installed without a ``RECORD``, or a file its ``RECORD`` does
not list).

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
ctime); planning then only stats them. Which distribution each top-level entry of a site folder
belongs to, and each RECORD's rows, are kept in the same cache while the folder's distributions
are unchanged.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import marshal
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
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


OWN = "crucible"  # the distribution of crucible itself: identified by its code digest
_INFO = (".dist-info", ".egg-info")


@dataclass(frozen=True)
class Owner:
    """The installed distribution a file belongs to, as the identity treats it."""

    name: str
    version: str
    # crucible itself (its package folder, or the distribution that installs it): its code digest
    # identifies it, so it is neither recorded nor checked as a distribution
    own: bool = False
    # the file is the distribution's metadata (its dist-info), not what it runs
    metadata: bool = False
    # why what it runs cannot be checked; None where its RECORD vouches for the file
    problem: str | None = None

    def refusal(self, path: str | os.PathLike | None = None, more: int = 0) -> str:
        """The one message for installed code no RECORD vouches for, with how to reinstall it."""
        where = f"{path}{f' (and {more} more)' if more else ''}: " if path is not None else ""
        pinned = f"=={self.version}" if self.version else ""
        return (
            f"{where}{self.problem}, so what it runs cannot be checked: a result made with it would carry "
            f"a version it may not run. Reinstall it (pip install --force-reinstall --no-deps {self.name}{pinned}), "
            f"or install a changed {self.name} under a version of its own"
        )


@lru_cache(maxsize=None)
def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def owner_of(path: str) -> Owner | None:
    """The installed distribution ``path`` (absolute) belongs to and whether it can be checked;
    None for a file of no installed distribution (a user's, wherever it is: identified by its
    content). Installed means under a site-packages folder on ``sys.path`` (or crucible's own
    package folder, wherever it is imported from)."""
    for prefix, site in _sites(tuple(sys.path)):
        if path.startswith(prefix):
            return _owner(site, path[len(prefix) :].replace(os.sep, "/"))
    return None


def site_dirs() -> list[str]:
    """The site-packages folders on ``sys.path``: where installers put distributions (and the
    ``.pth`` files Python runs at start)."""
    return list(_site_dirs(tuple(sys.path)))


@lru_cache(maxsize=8)
def _site_dirs(path: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(os.path.abspath(e) for e in path if e.endswith("-packages") and os.path.isdir(e)))


@lru_cache(maxsize=8)
def _sites(path: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``(folder + separator, folder)`` of each site folder, and of the folder crucible's package is in."""
    return tuple((site + os.sep, site) for site in dict.fromkeys([*_site_dirs(path), _own_root()[0]]))


@lru_cache(maxsize=1)
def _own_root() -> tuple[str, str]:
    """``(folder, name)`` of crucible's own package folder."""
    from crucible.identity.code_closure import PACKAGE_ROOT

    return str(PACKAGE_ROOT.parent), PACKAGE_ROOT.name


def pth_files(site: str) -> tuple[str, ...]:
    """The ``.pth`` files of a site-packages folder."""
    return _site_map(site)[1]


def _owner(site: str, rel: str) -> Owner | None:
    """Whose ``rel`` (a path in ``site``, ``/``-separated) is, and whether it can be checked: the
    one place that decides it (see the module's doc)."""
    top = rel.split("/", 1)[0]
    metadata = top.endswith(_INFO)
    tops, _, unrecorded, names = _site_map(site)
    infos = [top] if metadata else tops.get(top, [])
    info, problem = None, None
    if infos:
        info = next((i for i in infos if metadata or rel in (_record_paths(site, i) or ())), None)
        if info is None:
            without = [i for i in infos if _record_paths(site, i) is None]
            info, problem = (without[0], "without") if without else (infos[0], "unlisted")
        elif _record_paths(site, info) is None:
            problem = "without"
    elif unrecorded and top.split(".")[0].isidentifier():
        # whose file this is cannot be told while a distribution here lists none of its own
        info, problem = unrecorded[0], "without"
    name, version = (names.get(info) or _dist_of(site, info)) if info is not None else ("", "")
    # crucible itself: its package folder wherever it is imported from (a checkout's src/ has no
    # distribution, or an egg-info without a RECORD), or the distribution that installs it
    if (site, top) == _own_root() or (info is not None and _canon(name) == OWN):
        return Owner(name or OWN, version, own=True, metadata=metadata)
    if info is None:
        return None
    why = {
        None: None,
        "without": f"{name} {version} is installed without a RECORD",
        "unlisted": f"{name} {version}: a file its RECORD does not list",
    }[problem]
    return Owner(name, version, metadata=metadata, problem=why)


@lru_cache(maxsize=None)
def _site_map(
    site: str,
) -> tuple[dict[str, list[str]], tuple[str, ...], tuple[str, ...], dict[str, tuple[str, str]]]:
    """``({top-level entry: dist-info folders}, .pth files, dist-info folders without a RECORD,
    {dist-info folder: (name, version)})`` of one site folder: which distributions each top-level
    module or package folder belongs to (several share a namespace package such as ``pymatgen``),
    from the RECORDs (the ``top_level.txt`` of a distribution without one). Reading every RECORD
    takes a tenth of a second, so the map is kept in the hash cache while no distribution's folder
    changed (an install, a removal or a RECORD deleted moves its folder's mtime)."""
    from crucible.core.hashes import cache_dir

    try:
        with os.scandir(site) as entries:
            listing = sorted((e.name, e.stat().st_mtime_ns if e.name.endswith(_INFO) else 0) for e in entries)
    except NotADirectoryError:  # a zipped egg on the path: no RECORD in it to check its files with
        return {}, (), (), {}
    pth = tuple(os.path.join(site, name) for name, _ in listing if name.endswith(".pth"))
    key = hashlib.sha256(json.dumps([3, site, listing]).encode()).hexdigest()  # 3: the format
    cache = cache_dir() / "installed" / f"site-{key[:32]}.json"
    try:
        doc = json.loads(cache.read_text(encoding="utf-8"))
        names = {info: (n, v) for info, (n, v) in doc["names"].items()}
        return doc["tops"], pth, tuple(doc["unrecorded"]), names
    except (OSError, ValueError, KeyError, TypeError):
        pass
    infos = [name for name, _ in listing if name.endswith(_INFO)]
    tops = _tops(site, infos)
    unrecorded = tuple(name for name in infos if _record_paths(site, name) is None)
    names = {info: _dist_of(site, info) for info in infos}
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f".{cache.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"tops": tops, "unrecorded": unrecorded, "names": names}), encoding="utf-8")
        os.replace(tmp, cache)
    except OSError:
        pass  # a cache that cannot be written only costs time
    return tops, pth, unrecorded, names


def _tops(site: str, names: list[str]) -> dict[str, list[str]]:
    tops: dict[str, list[str]] = {}
    for name in names:
        rows = _record_paths(site, name)
        if rows is not None:
            found = {row.split("/", 1)[0] for row in rows if not row.startswith("..")}
        else:
            try:
                with open(os.path.join(site, name, "top_level.txt"), encoding="utf-8") as fh:
                    listed = [t for line in fh if (t := line.strip())]
            except OSError:
                listed = []
            found = {*listed, *(f"{t}.py" for t in listed)}
        for top in found:
            if top and top != name and top != "__pycache__":
                tops.setdefault(top, []).append(name)
    return tops


@lru_cache(maxsize=None)
def _record_paths(site: str, info: str) -> frozenset[str] | None:
    """The paths a distribution's RECORD lists (relative to its site folder), None without one;
    kept in the hash cache by the RECORD's stat (parsing scikit-learn's takes milliseconds, every
    job; the paths alone: loading their hashes too would cost a job ten times as much)."""
    from crucible.core.hashes import cache_dir

    record = os.path.join(site, info, "RECORD")
    try:
        st = os.stat(record)
    except OSError:
        return None
    key = hashlib.sha256(f"{record}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}".encode())
    cache = cache_dir() / "installed" / f"record-{key.hexdigest()[:32]}.marshal"
    try:
        return frozenset(marshal.loads(cache.read_bytes()))
    except (OSError, ValueError, EOFError, TypeError):
        pass
    rows = _record_rows(site, info)
    if rows is None:
        return None
    paths = frozenset(path for path, _ in rows)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f".{cache.name}.{os.getpid()}")
        tmp.write_bytes(marshal.dumps(tuple(sorted(paths))))
        os.replace(tmp, cache)
    except OSError:
        pass  # a cache that cannot be written only costs time
    return paths


def _record_rows(site: str, info: str) -> list[tuple[str, str]] | None:
    """``(path, hash)`` of each row of a distribution's RECORD, read as written (Python 3.12's
    ``Distribution.files`` leaves out the files that no longer exist, which are the removed ones a
    check must see); None without one."""
    try:
        with open(os.path.join(site, info, "RECORD"), encoding="utf-8", newline="") as fh:
            text = fh.read()
    except OSError:
        return None
    return [(row[0], row[1] if len(row) > 1 else "") for row in csv.reader(text.splitlines()) if row]


@lru_cache(maxsize=None)
def _dist_of(site: str, info: str) -> tuple[str, str]:
    """``(name, version)`` of a dist-info folder, from its METADATA (its folder name otherwise)."""
    name, version = info.rsplit(".", 1)[0], ""
    if "-" in name:
        name, version = name.split("-", 1)
    for meta in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(site, info, meta), encoding="utf-8") as fh:
                found = {}
                for line in fh:
                    if not line.strip():
                        break
                    key, _, value = line.partition(":")
                    if key in ("Name", "Version"):
                        found[key] = value.strip()
                return found.get("Name", name), found.get("Version", version)
        except OSError:
            continue
    return name, version


def _installed(dist: str) -> tuple[str, str, Owner] | None:
    """``(site folder, dist-info folder, owner)`` of the distribution ``dist`` where a job's Python
    finds it (the first on ``sys.path``); None where it is not installed."""
    import importlib.metadata

    try:
        meta = importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
    site = os.path.abspath(str(meta.locate_file("")))
    names = _site_map(site)[3]
    found = [i for i, (n, _) in sorted(names.items()) if _canon(n) == _canon(dist)]
    info = next((i for i in found if names[i][1] == meta.version), found[0] if found else None)
    if info is None:  # found, but not in a folder of distributions (a zipped egg): nothing to check it with
        return site, "", Owner(dist, meta.version, problem=f"{dist} {meta.version} is installed without a RECORD")
    owner = _owner(site, info)
    return (site, info, owner) if owner is not None else None


@lru_cache(maxsize=None)
def check_distribution(dist: str) -> None:
    """Refuse ``dist`` when what it runs cannot be checked (:func:`_owner`) or a file its RECORD
    hashes is changed or missing (once per process; the files seen unchanged before are only
    stat-ed)."""
    found = _installed(dist)
    if found is None:
        return
    site, info, owner = found
    if owner.own:
        return
    if owner.problem is not None:  # nothing to compare its files with: a job would run what no one can check
        raise EditedDistributionError(owner.refusal())
    rows = _record_rows(site, info) or []
    cache = _cache_file(owner.name, owner.version, Path(site).resolve())
    try:
        known = json.loads(cache.read_text(encoding="utf-8"))
        seen = known["files"] if known.get("format") == CACHE_FORMAT else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        seen = {}
    checked: dict[str, list[int]] = {}
    for rel, recorded in rows:
        if not recorded.startswith("sha256=") or rel.startswith("..") or Path(rel).suffix not in CODE:
            continue  # bytecode, RECORD itself, scripts outside the package folder, data files
        path = Path(site) / rel
        try:
            key = _stat_key(path.stat())
        except FileNotFoundError:
            raise EditedDistributionError(_edited(owner.name, owner.version, path, "is missing")) from None
        if seen.get(rel) != key:
            if _record_hash(path) != recorded.removeprefix("sha256="):
                raise EditedDistributionError(_edited(owner.name, owner.version, path, "differs from its RECORD"))
        checked[rel] = key
    if checked != seen:
        from crucible.core.io import write_json

        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            write_json({"format": CACHE_FORMAT, "files": checked}, cache)
        except OSError:
            pass  # a cache that cannot be written only costs time


def _edited(dist: str, version: str, path: Path, what: str) -> str:
    return (
        f"{path} {what}: the installed {dist} {version} was edited in place, so a result made with it "
        f"would be labelled '{dist} {version}' without running it. Reinstall it "
        f"(pip install --force-reinstall --no-deps {dist}=={version}); to run a changed {dist}, install "
        "it under a version of its own"
    )


def clear_caches() -> None:
    """Forget what this process read of installed distributions (for a test that installs, edits or
    removes one)."""
    for cached in (
        _distributions,
        _version,
        check_distribution,
        _site_map,
        _record_paths,
        _dist_of,
        _site_dirs,
        _sites,
    ):
        cached.cache_clear()


def check_distributions(dists: Iterable[str]) -> None:
    """:func:`check_distribution` of each of ``dists``, in order."""
    for dist in sorted(set(dists)):
        check_distribution(dist)
