"""The code a command runs: the static import closure of its function, and its digest.

:func:`code_digest` digests the crucible modules a command can import (the static import graph
from its function, conservatively closed: every import anywhere in a reached library module
counts), the package data beside them, and the versions of the third-party distributions they
import. Comments, docstrings and ``__version__`` are not part of it: a version bump alone, or a
reworded comment, reruns nothing; a changed line of code reruns exactly the jobs whose command
reaches that module. crucible.identity puts it into each job's identity.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

PACKAGE = "crucible"
PACKAGE_ROOT = Path(__file__).resolve().parent


def canonical_json(value: Any) -> str:
    """The one serialisation that is hashed: sorted keys, no spaces, ASCII only."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def digest(value: Any) -> str:
    """The SHA-256 of a JSON-able value's canonical form."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def short(hex_digest: str) -> str:
    return hex_digest[:12]


# --- code ---------------------------------------------------------------------------------------


def _module_file(module: str) -> Path | None:
    """The source file of a crucible module, found by path (nothing is imported)."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    base = PACKAGE_ROOT.joinpath(*parts[1:])
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@lru_cache(maxsize=None)
def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _strip(tree: ast.Module) -> ast.Module:
    """``tree`` without docstrings and ``__version__`` assignments (they change no result), in place."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
            if isinstance(body[0].value.value, str):
                body.pop(0)
        body[:] = [
            stmt
            for stmt in body
            if not (
                isinstance(stmt, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__version__" for t in stmt.targets)
            )
        ] or [ast.Pass()]
    return tree


@lru_cache(maxsize=None)
def module_digest(path: Path) -> str:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))  # a copy of its own: stripped
    return hashlib.sha256(ast.dump(_strip(tree)).encode()).hexdigest()


# An import edge: (module, the names taken from it), None for all of them (``import a.b``, a
# module named in a string, a star import).
Edge = tuple[str, "frozenset[str] | None"]
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# Modules that name every command group's module in strings but import only the one asked for
# (its module is a root of each command's closure).
_DISPATCHERS = frozenset({"crucible.cli", "crucible.commands"})
_MODULE_NAME = re.compile(r"crucible(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _edges(nodes: Iterable[ast.AST], module: str, is_package: bool) -> tuple[list[Edge], set[str]]:
    """What ``nodes`` import (crucible modules, with the names they take) and the top-level names of
    the other packages they import. A string that names a crucible module counts as importing all
    of it: registries import their entries by name (importlib)."""
    edges: list[Edge] = []
    others: set[str] = set()

    def add(target: str, names: frozenset[str] | None) -> None:
        if target.split(".")[0] == PACKAGE:
            edges.append((target, names))
        elif target:
            others.add(target.split(".")[0])

    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, None)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node, module, is_package)
            taken = set()
            for alias in node.names:
                if alias.name == "*":
                    add(target, None)
                elif _module_file(f"{target}.{alias.name}") is not None:
                    add(f"{target}.{alias.name}", None)
                else:
                    taken.add(alias.name)
            add(target, frozenset(taken))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _MODULE_NAME.fullmatch(node.value)
            and module not in _DISPATCHERS
        ):
            if _module_file(node.value) is not None:
                add(node.value, None)
    return edges, others


@dataclass(frozen=True)
class _Module:
    """One crucible module's import structure: what importing it runs (its top-level statements),
    and what each of its functions and classes imports and which of its other definitions it names."""

    top: tuple[list[Edge], set[str]]
    top_refs: frozenset[str]
    defs: dict[str, tuple[list[Edge], set[str]]]
    refs: dict[str, frozenset[str]]


@lru_cache(maxsize=None)
def _module(module: str) -> _Module | None:
    path = _module_file(module)
    if path is None:
        return None
    tree = _parsed(path)
    is_package = path.name == "__init__.py"
    defs = {n.name: n for n in tree.body if isinstance(n, _DEFS)}

    def names_in(nodes: Iterable[ast.AST]) -> frozenset[str]:
        return frozenset(n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in defs)

    top_nodes = [n for n in tree.body if not isinstance(n, _DEFS)]
    # a definition's decorators and default values run at import too
    decorations = [d for n in defs.values() for d in [*n.decorator_list, *_defaults(n)]]
    top_walk = [x for n in top_nodes + decorations for x in ast.walk(n)]
    return _Module(
        top=_edges(top_walk, module, is_package),
        top_refs=names_in(top_nodes + decorations),
        defs={name: _edges(list(ast.walk(node)), module, is_package) for name, node in defs.items()},
        refs={name: names_in([node]) for name, node in defs.items()},
    )


def _defaults(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.ClassDef):
        return [*node.bases, *node.keywords]
    args = node.args
    return [*args.defaults, *[d for d in args.kw_defaults if d is not None]]


def import_closure(roots: Iterable[Edge | str]) -> tuple[list[str], list[str]]:
    """The crucible modules a run from ``roots`` can import, and the top-level names of the other
    packages they import, both sorted. A root is a module (all of it) or ``(module, names)``.

    Importing a module runs its top-level statements, so their imports always count; an import
    inside a function or class counts where that definition is taken (``from m import f``, or
    named by a definition taken before), so that a job whose command never reaches a function does
    not depend on what that function imports lazily."""
    taken: dict[str, set[str] | None] = {}
    others: set[str] = set()
    todo: list[Edge] = [(r, None) if isinstance(r, str) else r for r in roots]
    while todo:
        name, names = todo.pop()
        info = _module(name)
        if info is None:
            continue
        if name not in taken:  # imported for the first time: its top-level statements run
            taken[name] = set()
            todo += [(parent, frozenset()) for parent in _parents(name)]
            todo += info.top[0]
            others |= info.top[1]
            wanted = set(info.top_refs)
        else:
            wanted = set()
        done = taken[name]
        if done is None:  # every definition already taken
            continue
        wanted |= set(info.defs) if names is None else set(names) & set(info.defs)
        pending = sorted(wanted - done)
        while pending:
            d = pending.pop()
            if d in done:
                continue
            done.add(d)
            todo += info.defs[d][0]
            others |= info.defs[d][1]
            pending += sorted(info.refs[d] - done)
        if names is None:
            taken[name] = None
    return sorted(taken), sorted(others)


@lru_cache(maxsize=1)
def _distributions() -> dict[str, list[str]]:
    import importlib.metadata

    return importlib.metadata.packages_distributions()


def package_versions(top_level_names: Iterable[str]) -> dict[str, str]:
    """``{distribution: version}`` of the installed distributions behind these import names
    (the standard library has none)."""
    versions: dict[str, str] = {}
    for name in top_level_names:
        if name in sys.stdlib_module_names:
            continue
        for dist in _distributions().get(name, []):
            version = _version(dist)
            if version is not None:
                versions[dist] = version
    return dict(sorted(versions.items()))


@lru_cache(maxsize=None)
def _version(dist: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _package_data(modules: Iterable[str]) -> dict[str, str]:
    """SHA-256 of the data files (not Python) in the package folders of ``modules``."""
    data: dict[str, str] = {}
    for module in modules:
        path = _module_file(module)
        if path is not None and path.name == "__init__.py":
            data.update(_data_files(path.parent))
    return dict(sorted(data.items()))


@lru_cache(maxsize=None)
def _data_files(folder: Path) -> dict[str, str]:
    return {
        str(file.relative_to(PACKAGE_ROOT)): hashlib.sha256(file.read_bytes()).hexdigest()
        for file in sorted(folder.iterdir())
        if file.is_file() and file.suffix not in (".py", ".pyc")
    }


@lru_cache(maxsize=None)
def command_handler(group: str, verb: str) -> tuple[str, str]:
    """``(module, function)`` that ``crucible group verb`` runs, read from its declaration
    (crucible.stage)."""
    from crucible.commands import GROUPS
    from crucible.stage import stages_of

    if group not in GROUPS:
        raise ValueError(f"no crucible command group {group!r}")
    for declared in stages_of(group):
        if declared.verb == verb:
            return declared.target
    raise ValueError(f"no command 'crucible {group} {verb}'")


@lru_cache(maxsize=None)
def code_identity(group: str, verb: str) -> dict[str, Any]:
    """What ``crucible group verb`` runs: module digests, package data, distribution versions."""
    from crucible.commands import GROUPS

    module, function = command_handler(group, verb)
    # every command builds its group's parser from the group module's declarations (its top
    # level) before its function runs
    roots = [(GROUPS[group][0], frozenset()), (module, frozenset({function}))]
    modules, others = import_closure([*roots, ("crucible.cli", frozenset({"main"}))])
    return {
        "command": f"{group} {verb}",
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "modules": {m: module_digest(_module_file(m)) for m in modules},
        "package_data": _package_data(modules),
        "packages": package_versions(others),
    }


CODE_CACHE_FILE = Path(".snakemake") / "crucible-code-digests.json"


def _source_stamp() -> str:
    """Changes whenever a crucible source file or an installed distribution may have: the
    (name, mtime, size) of every package file and the mtime of every site-packages folder
    (installing or removing a distribution adds or removes its folder there)."""
    files = [
        (str(p.relative_to(PACKAGE_ROOT)), p.stat().st_mtime_ns, p.stat().st_size)
        for p in sorted(PACKAGE_ROOT.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    ]
    sites = [(d, os.stat(d).st_mtime_ns) for d in sys.path if d.endswith("-packages") and os.path.isdir(d)]
    return digest([sys.version, files, sites])


@lru_cache(maxsize=1)
def _code_cache(cache_file: Path) -> tuple[str, dict[str, str]]:
    stamp = _source_stamp()
    try:
        doc = json.loads(cache_file.read_text(encoding="utf-8"))
        if doc.get("stamp") == stamp and isinstance(doc.get("digests"), dict):
            return stamp, doc["digests"]
    except (OSError, ValueError, AttributeError):
        pass
    return stamp, {}


def code_digest(group: str, verb: str, cache_file: Path | None = CODE_CACHE_FILE) -> str:
    """:func:`code_identity`'s digest. Planning a DAG asks it for every rule: with ``cache_file``
    the digests are kept between plannings while no source file or distribution changed."""
    if cache_file is None:
        return digest(code_identity(group, verb))
    stamp, digests = _code_cache(cache_file)
    command = f"{group} {verb}"
    if command not in digests:
        digests[command] = digest(code_identity(group, verb))
        if cache_file.parent.is_dir():
            from crucible.io import write_json

            write_json({"stamp": stamp, "digests": dict(sorted(digests.items()))}, cache_file)
    return digests[command]


MODULES_LOG_VAR = "CRUCIBLE_MODULES_LOG"


def log_imported_modules(group: str, verb: str | None) -> None:
    """With ``CRUCIBLE_MODULES_LOG`` set (a test keeping the static closure honest), append the
    crucible modules this process imported to that file, one JSON line per command."""
    path = os.environ.get(MODULES_LOG_VAR)
    if not path or verb is None:
        return
    loaded = sorted(m for m in list(sys.modules) if m == PACKAGE or m.startswith(PACKAGE + "."))
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(canonical_json({"command": f"{group} {verb}", "modules": loaded}) + "\n")
