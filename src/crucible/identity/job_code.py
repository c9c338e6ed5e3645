"""A job's code identity: what its command and the things its names stand for run, as one digest.

:func:`code_identity` is the digests of the modules its code reaches (crucible.identity.code_closure),
the package data beside crucible's modules, and the versions of the installed distributions it
imports (crucible.identity.installed_code, whose files are checked against their RECORD at planning).
:func:`code_digest` keeps these digests between plannings while no source file or distribution
changed; :func:`log_imported_modules` records what a command really imported, so that a test
holds it inside the static closure. crucible.identity.records puts the digest into each job's identity.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from crucible.core.hashes import file_sha256
from crucible.identity.code_closure import (
    PACKAGE,
    PACKAGE_ROOT,
    Edge,
    canonical_json,
    closure_digests,
    digest,
    entry,
    module_file,
)
from crucible.identity.installed_code import check_distributions, package_versions


def _package_data(modules: Iterable[str]) -> dict[str, str]:
    """SHA-256 of the data files (not Python) in the crucible package folders of ``modules``."""
    data: dict[str, str] = {}
    for module in modules:
        path = module_file(module)
        if module.split(".")[0] == PACKAGE and path is not None and path.name == "__init__.py":
            data.update(_data_files(path.parent))
    return dict(sorted(data.items()))


@lru_cache(maxsize=None)
def _data_files(folder: Path) -> dict[str, str]:
    return {
        str(file.relative_to(PACKAGE_ROOT)): file_sha256(file)
        for file in sorted(folder.iterdir())
        if file.is_file() and file.suffix not in (".py", ".pyc")
    }


@lru_cache(maxsize=None)
def command_handler(group: str, verb: str) -> tuple[str, str]:
    """``(module, function)`` that ``crucible group verb`` runs, read from its declaration
    (crucible.stages.declaration)."""
    from crucible.stages.declaration import stages_of
    from crucible.stages.groups import GROUPS

    if group not in GROUPS:
        raise ValueError(f"no crucible command group {group!r}")
    for declared in stages_of(group):
        if declared.verb == verb:
            return declared.target
    raise ValueError(f"no command 'crucible {group} {verb}'")


# A job's code roots beyond its command: the registry entries and user classes its names stand
# for, as JSON-able pairs (module, names taken or None for all of it).
Root = tuple[str, "tuple[str, ...] | None"]


def normal_roots(roots: Iterable[Any]) -> tuple[Root, ...]:
    """``roots`` (pairs, lists from JSON) as one sorted, hashable form."""
    out = set()
    for module, names in roots:
        out.add((str(module), None if names is None else tuple(sorted(map(str, names)))))
    return tuple(sorted(out, key=lambda r: (r[0], r[1] is None, r[1] or ())))


def class_root(class_path: str) -> Root:
    """The root of a thing given by class path (``"package.module:Class"``, a user's estimator or
    potential): that definition of its module (a module beside the project is followed as
    crucible's own are; an installed one is identified by its distribution)."""
    module, _, name = class_path.partition(":")
    return (module, (name.split(".")[0],) if name else None)


def entry_root(registry_module: str, name: str) -> Root:
    """The root of registry entry ``name`` of the registry declared in ``registry_module``."""
    return (registry_module, (entry(name),))


def command_roots(group: str, verb: str) -> list[Edge]:
    """Where ``crucible group verb`` starts: its group module's top level (every command builds its
    group's parser from the declarations there), its function, and the CLI's entry."""
    from crucible.stages.groups import GROUPS

    module, function = command_handler(group, verb)
    return [(GROUPS[group], frozenset()), (module, frozenset({function})), ("crucible.cli", frozenset({"main"}))]


def code_identity(group: str, verb: str, roots: Iterable[Any] = ()) -> dict[str, Any]:
    """:func:`_code_identity` of ``roots`` in any form (pairs, lists from JSON)."""
    return _code_identity(group, verb, normal_roots(roots))


def _clear() -> None:
    _code_identity.cache_clear()


code_identity.cache_clear = _clear  # type: ignore[attr-defined]


@lru_cache(maxsize=None)
def _code_identity(group: str, verb: str, roots: tuple[Root, ...] = ()) -> dict[str, Any]:
    """What ``crucible group verb`` runs for a job whose names stand for ``roots`` (a model's
    registry entry, a user's class): module digests (of the definitions taken), package data,
    distribution versions."""
    extra = [(m, None if n is None else frozenset(n)) for m, n in normal_roots(roots)]
    modules, others = closure_digests([*command_roots(group, verb), *extra])
    out = {
        "command": f"{group} {verb}",
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "modules": modules,
        "package_data": _package_data(modules),
        "packages": package_versions(others),
    }
    if roots:
        out["roots"] = [list(r) for r in normal_roots(roots)]
    return out


CODE_CACHE_FILE = Path(".snakemake") / "crucible-code-digests.json"
CODE_CACHE_FORMAT = 3


def _stat_key(path: Path) -> list[int]:
    # ctime cannot be set back (touch -r restores mtime only): an edit always moves it
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _source_stamp() -> str:
    """Changes whenever a crucible source file or an installed distribution may have: the
    (name, size, mtime, ctime, inode) of every package file and the mtime of every site-packages
    folder (installing or removing a distribution adds or removes its folder there)."""
    files = [
        (str(p.relative_to(PACKAGE_ROOT)), *_stat_key(p))
        for p in sorted(PACKAGE_ROOT.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    ]
    sites = [(d, os.stat(d).st_mtime_ns) for d in sys.path if d.endswith("-packages") and os.path.isdir(d)]
    return digest([sys.version, os.getcwd(), files, sites])


def _user_files(identity: dict[str, Any]) -> dict[str, list[int]]:
    """The stat keys of the user's module files an identity holds (they are outside the stamp)."""
    out = {}
    for module in identity["modules"]:
        if module.split(".")[0] != PACKAGE:
            path = module_file(module)
            if path is not None:
                out[str(path)] = _stat_key(path)
    return out


def _unchanged(files: dict[str, list[int]]) -> bool:
    try:
        return all(_stat_key(Path(p)) == key for p, key in files.items())
    except OSError:
        return False


@lru_cache(maxsize=1)
def _code_cache(cache_file: Path) -> tuple[str, dict[str, Any]]:
    stamp = _source_stamp()
    try:
        doc = json.loads(cache_file.read_text(encoding="utf-8"))
        if (
            doc.get("format") == CODE_CACHE_FORMAT
            and doc.get("stamp") == stamp
            and isinstance(doc.get("digests"), dict)
        ):
            return stamp, doc["digests"]
    except (OSError, ValueError, AttributeError):
        pass
    return stamp, {}


def code_digest(group: str, verb: str, roots: Iterable[Any] = (), cache_file: Path | None = CODE_CACHE_FILE) -> str:
    """:func:`code_identity`'s digest. Planning a DAG asks it for every job: with ``cache_file``
    the digests are kept between plannings while no source file or distribution changed."""
    roots = normal_roots(roots)
    if cache_file is None:
        identity = code_identity(group, verb, roots)
        check_distributions(identity["packages"])
        return digest(identity)
    stamp, digests = _code_cache(cache_file)
    key = f"{group} {verb}" + (f" {canonical_json(roots)}" if roots else "")
    hit = digests.get(key)
    if isinstance(hit, dict) and _unchanged(hit.get("files", {})) and isinstance(hit.get("packages"), list):
        check_distributions(hit["packages"])
        return hit["digest"]
    identity = code_identity(group, verb, roots)
    check_distributions(identity["packages"])
    digests[key] = {
        "digest": digest(identity),
        "files": _user_files(identity),
        "packages": sorted(identity["packages"]),
    }
    if cache_file.parent.is_dir():
        from crucible.core.io import write_json

        write_json({"format": CODE_CACHE_FORMAT, "stamp": stamp, "digests": dict(sorted(digests.items()))}, cache_file)
    return digests[key]["digest"]


MODULES_LOG_VAR = "CRUCIBLE_MODULES_LOG"


def log_imported_modules(group: str, verb: str | None, roots: Iterable[Any] = ()) -> None:
    """With ``CRUCIBLE_MODULES_LOG`` set (a test keeping the static closure honest), append the
    crucible modules and the user's modules this process imported to that file, with the job's
    code roots, one JSON line per command."""
    path = os.environ.get(MODULES_LOG_VAR)
    if not path or verb is None:
        return
    loaded = sorted(
        m
        for m, mod in list(sys.modules.items())
        if m == PACKAGE or m.startswith(PACKAGE + ".") or _is_user_file(getattr(mod, "__file__", None))
    )
    line = {"command": f"{group} {verb}", "roots": [list(r) for r in normal_roots(roots)], "modules": loaded}
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(canonical_json(line) + "\n")


def _is_user_file(file: str | None) -> bool:
    if not file or not os.path.isabs(file):  # torch.ops says '_ops.py': not a file beside the project
        return False
    here = Path(os.getcwd()).resolve()
    try:
        real = Path(file).resolve()
    except OSError:
        return False
    return here in real.parents and "-packages" not in str(real) and PACKAGE_ROOT not in real.parents
