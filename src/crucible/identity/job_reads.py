"""What a job actually ran and read: every module file it imported and every file it opened for
reading, as its identity record holds them (``ran``).

The static import closure (crucible.identity.code_closure) is planning's estimate of a job's code,
made before anything runs. What a job did is seen while it runs: :func:`watch` puts a Python audit
hook on ``open`` (``open()``, ``io.open_code``, ``os.open``: every read through Python, source
files and data files alike) and, at the end of the job, :func:`collect` takes every module in
``sys.modules`` that has a file, whatever imported it (``importlib``, ``sitecustomize``, a ``.pth``
file, ``PYTHONPATH``), with the files opened for reading and the ``.pth`` files of every
site-packages folder (``site`` runs them before any hook exists). Each file lands in one place:

- an input or output of the job, anything under ``results/`` or ``logs/``, the standard library,
  crucible's own package (identified by the code digest: its static closure, held to the run-time
  imports by the test suite), caches, ``/proc``, ``/dev``, ``/sys``, and files the job wrote itself:
  left out (each is identified elsewhere or is not an input);
- a file of an installed distribution listed in its ``RECORD``: the distribution, by version
  (planning checks its files against the RECORD: crucible.identity.installed_code);
- a file of an installed distribution that its ``RECORD`` does not list, or of one installed
  without a ``RECORD``: refused, naming the distribution and the command that reinstalls it;
- anything else (a user's modules and data files wherever they are, a module dropped into
  site-packages, a ``.pth`` file of no distribution): its SHA-256, cached by stat.

What the hook cannot see: files opened by native code itself (a C extension's reader such as
HDF5, ``mmap`` of a descriptor opened natively, a library's C ``fopen``) and anything a child
process reads. Those are named by the user (``files:`` of a custom model, potential, generator or
language model: inputs of its jobs) or pinned (crucible.sources).
"""

from __future__ import annotations

import csv
import os
import sys
from collections.abc import Iterable
from functools import lru_cache
from types import ModuleType
from typing import Any

_READS: set[str] = set()
_WRITES: set[str] = set()
_WATCHING = False
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _hook(event: str, args: tuple) -> None:
    if event != "open" or not _WATCHING:
        return
    path, mode, flags = args
    if not isinstance(path, str):
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        elif isinstance(path, os.PathLike):
            path = os.fspath(path)
        else:
            return  # a descriptor: opened before, by path
    if mode is None:  # os.open: the flags say it
        writes = bool(flags & _WRITE_FLAGS)
    else:
        writes = any(c in mode for c in "wax+")
    (_WRITES if writes else _READS).add(path)


def watch() -> None:
    """Start recording the files this process opens (once per process: a hook cannot be removed)."""
    global _WATCHING
    if not _WATCHING:
        _WATCHING = True
        if not getattr(watch, "installed", False):
            sys.addaudithook(_hook)
            watch.installed = True  # type: ignore[attr-defined]


def stop() -> tuple[set[str], set[str]]:
    """Stop recording; the paths read and written so far."""
    global _WATCHING
    _WATCHING = False
    return set(_READS), set(_WRITES)


def _site_dirs() -> list[str]:
    dirs = []
    for entry in sys.path:
        if entry.endswith("-packages") and os.path.isdir(entry):
            dirs.append(os.path.abspath(entry))
    return list(dict.fromkeys(dirs))


@lru_cache(maxsize=None)
def _site_map(site: str) -> tuple[dict[str, list[str]], tuple[str, ...], tuple[str, ...]]:
    """``({top-level entry: dist-info folders}, .pth files, dist-info folders without a RECORD)`` of
    one site-packages folder: which
    distributions each top-level module or package folder belongs to (several share a namespace
    package such as ``pymatgen``), from the RECORDs (the
    ``top_level.txt`` of a distribution without one). Reading every RECORD takes a tenth of a
    second, so the map is kept in the hash cache while no distribution's folder changed (an
    install, a removal or a RECORD deleted moves its folder's mtime)."""
    import hashlib
    import json

    from crucible.core.hashes import cache_dir

    with os.scandir(site) as entries:
        listing = sorted(
            (e.name, e.stat().st_mtime_ns if e.name.endswith((".dist-info", ".egg-info")) else 0) for e in entries
        )
    pth = tuple(os.path.join(site, name) for name, _ in listing if name.endswith(".pth"))
    key = hashlib.sha256(json.dumps([2, site, listing]).encode()).hexdigest()  # 2: the format
    cache = cache_dir() / "installed" / f"site-{key[:32]}.json"
    try:
        doc = json.loads(cache.read_text(encoding="utf-8"))
        return doc["tops"], pth, tuple(doc["unrecorded"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    infos = [name for name, _ in listing if name.endswith((".dist-info", ".egg-info"))]
    tops = _tops(site, infos)
    unrecorded = tuple(name for name in infos if _record_paths(site, name) is None)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f".{cache.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"tops": tops, "unrecorded": unrecorded}), encoding="utf-8")
        os.replace(tmp, cache)
    except OSError:
        pass  # a cache that cannot be written only costs time
    return tops, pth, unrecorded


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
    kept in the hash cache by the RECORD's stat (parsing scikit-learn's takes milliseconds, every job)."""
    import hashlib
    import marshal

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
    try:
        with open(record, encoding="utf-8", newline="") as fh:
            text = fh.read()
    except OSError:
        return None
    if '"' in text:
        paths = frozenset(row[0] for row in csv.reader(text.splitlines()) if row)
    else:
        paths = frozenset(line.split(",", 1)[0] for line in text.splitlines() if line)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f".{cache.name}.{os.getpid()}")
        tmp.write_bytes(marshal.dumps(tuple(sorted(paths))))
        os.replace(tmp, cache)
    except OSError:
        pass  # a cache that cannot be written only costs time
    return paths


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


_STARTUP = ("sitecustomize.py", "usercustomize.py", "sitecustomize/__init__.py", "usercustomize/__init__.py")


def startup_files() -> list[str]:
    """The files Python runs at the start of every job, found where a job's Python finds them (the
    folders of ``PYTHONPATH``, which the workflow puts the working directory on, and the
    site-packages folders): ``sitecustomize``/``usercustomize`` and the ``.pth`` files. A job
    records them, planning finds them again: one that appeared (or went) since reruns every job
    (their contents are in each job's files, as any module's)."""
    cwd = os.getcwd()
    found = []
    folders = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for folder in dict.fromkeys(os.path.abspath(f) for f in [*folders, *_site_dirs()]):
        found += [os.path.join(folder, name) for name in _STARTUP if os.path.isfile(os.path.join(folder, name))]
    found += [p for site in _site_dirs() for p in _site_map(site)[1]]
    return sorted({os.path.relpath(p, cwd) if p.startswith(cwd + os.sep) else p for p in found})


def _prefixes(paths: Iterable[str]) -> tuple[str, ...]:
    out = set()
    for path in paths:
        if path:
            out.add(os.path.abspath(path).rstrip(os.sep) + os.sep)
            out.add(os.path.realpath(path).rstrip(os.sep) + os.sep)
    return tuple(sorted(out))


def _left_out(cwd: str) -> tuple[str, ...]:
    """Where a file is identified elsewhere, or is no input at all."""
    from crucible.core.hashes import cache_dir
    from crucible.identity.code_closure import PACKAGE_ROOT

    stdlib = os.path.dirname(os.__file__)  # not sysconfig's platstdlib: in a venv, that holds site-packages
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return _prefixes(
        [
            stdlib,
            # the scripts its installer wrote (the `crucible` command: its distribution's)
            os.path.join(sys.prefix, "bin"),
            str(PACKAGE_ROOT),
            os.path.join(cwd, "results"),
            os.path.join(cwd, "logs"),
            os.path.join(cwd, ".snakemake"),
            str(cache_dir()),
            cache,
            "/proc",
            "/sys",
            "/dev",
        ]
    )


def collect(inputs: Iterable[str], outputs: Iterable[str]) -> dict[str, Any]:
    """What this job ran and read (see the module's doc): ``{"files": {path: sha256},
    "distributions": {name: version}, "refused": {path: why}, "seen": {"modules": n, "reads": n}}``.
    Paths under the working directory are relative to it."""
    from crucible.core.hashes import file_sha256

    reads, writes = stop()
    cwd = os.getcwd()
    # a module's own __dict__, not getattr: a lazy module's __getattr__ would import what it names
    modules = {
        file
        for module in list(sys.modules.values())
        if isinstance(module, ModuleType)
        and isinstance(file := module.__dict__.get("__file__"), str)
        and file.startswith(os.sep)
    }
    sites = _site_dirs()
    pth = {p for site in sites for p in _site_map(site)[1]}
    own = {os.path.abspath(p) for p in [*inputs, *outputs]}
    skip = _left_out(cwd) + _prefixes(own) + _prefixes(os.path.abspath(p) for p in writes)
    files: dict[str, str] = {}
    dists: dict[str, str] = {}
    refused: dict[str, str] = {}
    # string work only: a job imports some 1,500 module files, and collect() runs in every job
    opened = {p if p.startswith(os.sep) and "/." not in p else os.path.abspath(p) for p in reads}
    in_site = [(s + os.sep, s) for s in sites]
    for path in sorted(modules | pth | opened):
        if "__pycache__" in path or path in own or (path + os.sep).startswith(skip):
            continue
        site = next((s for prefix, s in in_site if path.startswith(prefix)), None)
        if site is not None:
            rel = path[len(site) + 1 :].replace(os.sep, "/")
            top = rel.split("/", 1)[0]
            if top.endswith((".dist-info", ".egg-info")):
                continue  # a distribution's metadata (importlib.metadata reads it)
            tops, _, unrecorded = _site_map(site)
            infos = tops.get(top, [])
            if not infos and unrecorded and top.split(".")[0].isidentifier():
                # whose file this is cannot be told while a distribution here lists none of its own
                name, version = _dist_of(site, unrecorded[0])
                refused[path] = f"{name} {version} was installed without a RECORD"
                continue
            if infos:
                owner = next((i for i in infos if rel in (_record_paths(site, i) or ())), None)
                if owner is not None:
                    name, version = _dist_of(site, owner)
                    dists[name] = version
                    continue
                name, version = _dist_of(site, infos[0])
                without = [i for i in infos if _record_paths(site, i) is None]
                if without:
                    name, version = _dist_of(site, without[0])
                    refused[path] = f"{name} {version} was installed without a RECORD"
                else:
                    refused[path] = f"{name} {version}: a file its RECORD does not list"
                continue
        if not os.path.isfile(path):  # gone again (a temporary file), or a folder opened to list it
            continue
        shown = path[len(cwd) + 1 :] if path.startswith(cwd + os.sep) else path
        files[shown] = file_sha256(path, cached=True)
    return {
        "startup": startup_files(),
        "files": files,
        "distributions": dict(sorted(dists.items())),
        "refused": refused,
        "seen": {"modules": len(modules), "reads": len(reads)},
    }


def refusal(refused: dict[str, str]) -> str | None:
    """One message for installed code that no RECORD vouches for, with how to reinstall it."""
    if not refused:
        return None
    path, why = sorted(refused.items())[0]
    name = why.split(" ", 1)[0].rstrip(":")
    more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
    return (
        f"{path}{more}: {why}, so what it runs cannot be checked: a result made with it would name a version "
        f"it may not run. Reinstall it (pip install --force-reinstall --no-deps {name}), or install a changed "
        f"{name} under a version of its own"
    )
