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
  caches, ``/proc``, ``/dev``, ``/sys``, and files the job wrote itself: left out (each is
  identified elsewhere or is not an input);
- a file of an installed distribution (crucible.identity.installed_code.owner_of, the one decision
  shared with planning's check of distributions by name): crucible's own package is left out (the
  code digest identifies it: its static closure, held to the run-time imports by the test suite);
  a file its ``RECORD`` lists gives the distribution, by version (planning checks its files against
  the RECORD); a file of a distribution installed without a ``RECORD``, or one its ``RECORD`` does
  not list, is refused, naming the distribution and the command that reinstalls it;
- anything else (a user's modules and data files wherever they are, a module dropped into
  site-packages, a ``.pth`` file of no distribution): its SHA-256, cached by stat.

What the hook cannot see: files opened by native code itself (a C extension's reader such as
HDF5, ``mmap`` of a descriptor opened natively, a library's C ``fopen``) and anything a child
process reads. Those are named by the user (``files:`` of a custom model, potential, generator or
language model: inputs of its jobs) or pinned (crucible.sources).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from crucible.identity.installed_code import Owner, owner_of, pth_files, site_dirs

_READS: set[str] = set()
_WRITES: set[str] = set()
_WATCHING = False
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


_READ_MODES = frozenset({"r", "rb", "rt", "br", "tr"})


def _hook(event: str, args: tuple) -> None:
    # Python calls this for every audit event of the process (some 70,000 in a fit's imports, most
    # of them builtins.id from copy.deepcopy): all but "open" leave at the first comparison, and an
    # open only files its path (sorting them out waits for collect() at the job's end).
    if event != "open" or not _WATCHING:
        return
    path, mode, flags = args
    if mode in _READ_MODES:
        writes = False
    elif mode is None:  # os.open: the flags say it
        writes = bool(flags & _WRITE_FLAGS)
    else:
        writes = "w" in mode or "a" in mode or "x" in mode or "+" in mode
    if path.__class__ is not str:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        elif isinstance(path, os.PathLike):
            path = os.fspath(path)
        else:
            return  # a descriptor: opened before, by path
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
    for folder in dict.fromkeys(os.path.abspath(f) for f in [*folders, *site_dirs()]):
        found += [os.path.join(folder, name) for name in _STARTUP if os.path.isfile(os.path.join(folder, name))]
    found += [p for site in site_dirs() for p in pth_files(site)]
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

    stdlib = os.path.dirname(os.__file__)  # not sysconfig's platstdlib: in a venv, that holds site-packages
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return _prefixes(
        [
            stdlib,
            # the scripts installers wrote (the `crucible` command a job runs among them)
            os.path.join(sys.prefix, "bin"),
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
    "distributions": {name: version}, "refused": {path: Owner}, "seen": {"modules": n, "reads": n}}``.
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
    pth = {p for site in site_dirs() for p in pth_files(site)}
    own = {os.path.abspath(p) for p in [*inputs, *outputs]}
    skip = _left_out(cwd) + _prefixes(own) + _prefixes(os.path.abspath(p) for p in writes)
    files: dict[str, str] = {}
    dists: dict[str, str] = {}
    refused: dict[str, Owner] = {}
    # string work only: a job imports some 1,500 module files, and collect() runs in every job
    opened = {p if p.startswith(os.sep) and "/." not in p else os.path.abspath(p) for p in reads}
    for path in sorted(modules | pth | opened):
        if "__pycache__" in path or path in own or (path + os.sep).startswith(skip):
            continue
        owner = owner_of(path)
        if owner is not None:
            if owner.own or owner.metadata:
                continue  # crucible's own (its code digest), a distribution's metadata (importlib reads it)
            if owner.problem is not None:
                refused[path] = owner
            else:
                dists[owner.name] = owner.version
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


def refusal(refused: dict[str, Owner]) -> str | None:
    """One message for installed code that no RECORD vouches for (:meth:`Owner.refusal`)."""
    if not refused:
        return None
    path, owner = sorted(refused.items())[0]
    return owner.refusal(path, more=len(refused) - 1)
