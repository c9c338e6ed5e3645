"""The code a command can run: the static import closure of its function, per definition.

:func:`import_closure` follows a command's function (and the registry entries and user classes
its job's names stand for) through the imports of crucible's modules and the user's modules
beside the project, without importing anything; :func:`closure_digests` digests what it reaches,
each module's top level and the definitions of it that are taken. Comments, docstrings and
``__version__`` are not part of a digest: a reworded comment reruns nothing; a changed line of
code reruns exactly the jobs whose code reaches that definition. crucible.identity.job_code puts these
digests, with the installed distributions they reach, into each job's code identity.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

PACKAGE = "crucible"
PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def canonical_json(value: Any) -> str:
    """The one serialisation that is hashed: sorted keys, no spaces, ASCII only."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def digest(value: Any) -> str:
    """The SHA-256 of a JSON-able value's canonical form."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def short(hex_digest: str) -> str:
    return hex_digest[:12]


# --- code ---------------------------------------------------------------------------------------


def module_file(module: str) -> Path | None:
    """The source file of a crucible module, or of a user's module beside the project (under the
    working directory, which the workflow and its jobs put on the path), found by path: nothing
    is imported. An installed package is not a module file: its distribution identifies it."""
    return _find_module_file(module, os.getcwd())


@lru_cache(maxsize=None)
def _find_module_file(module: str, cwd: str) -> Path | None:
    parts = module.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    root = PACKAGE_ROOT if parts[0] == PACKAGE else Path(cwd)
    base = root.joinpath(*parts[1:]) if parts[0] == PACKAGE else root.joinpath(*parts)
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def is_user_module(module: str) -> bool:
    """A module of the user's own beside the project (not crucible's, not installed)."""
    return module.split(".")[0] != PACKAGE and module_file(module) is not None


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


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
_DISPATCHERS = frozenset({"crucible.cli", "crucible.stages.groups"})
_MODULE_NAME = re.compile(r"crucible(\.[A-Za-z_][A-Za-z0-9_]*)+")


def entry(name: str) -> str:
    """The pseudo-definition of a registry entry named ``name`` in the module that declares it: a
    spec call ``XSpec(name="...", ...)`` at its top level, or a key of a registry's ``lazy=``
    table (which takes the entry of the same name in the module it names). Taking it takes what
    that one entry's call names (its factory), not the other entries of the registry."""
    return f"<entry {name}>"


def _is_target(target: str) -> bool:
    return target.split(".")[0] == PACKAGE or is_user_module(target)


def _walk(node: ast.AST, skip: frozenset[int]) -> Iterable[ast.AST]:
    """``ast.walk`` that does not descend into the nodes of ``skip`` (by id)."""
    todo = [node]
    while todo:
        current = todo.pop()
        if id(current) in skip:
            continue
        yield current
        todo.extend(ast.iter_child_nodes(current))


def _edges(nodes: Iterable[ast.AST], module: str, is_package: bool) -> tuple[list[Edge], set[str]]:
    """What ``nodes`` import (crucible modules and a user's, with the names they take) and the
    top-level names of the other packages they import. A string that names a crucible module
    counts as importing all of it: some code imports modules by name (importlib)."""
    edges: list[Edge] = []
    others: set[str] = set()

    def add(target: str, names: frozenset[str] | None) -> None:
        if _is_target(target):
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
                elif module_file(f"{target}.{alias.name}") is not None:
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
            if module_file(node.value) is not None:
                add(node.value, None)
    return edges, others


def _spec_call_name(node: ast.AST) -> str | None:
    """``name`` of a registry entry's spec call (``ModelSpec(name="dummy", ...)``), else None."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    if not func.endswith("Spec"):
        return None
    for kw in node.keywords:
        if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            return kw.value.value
    return None


def _lazy_tables(tree: ast.Module) -> list[ast.Dict]:
    """The ``lazy=`` tables of the module's registries (``Registry(..., lazy=_BUILTINS)``): dicts of
    entry name -> the module that declares it."""
    assigned = {
        t.id: stmt.value
        for stmt in tree.body
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Dict)
        for t in stmt.targets
        if isinstance(t, ast.Name)
    }
    tables = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Registry":
            for kw in node.keywords:
                value = assigned.get(kw.value.id) if isinstance(kw.value, ast.Name) else kw.value
                if kw.arg == "lazy" and isinstance(value, ast.Dict):
                    tables.append(value)
    return tables


@dataclass(frozen=True)
class _Module:
    """One module's import structure: what importing it runs (its top-level statements), what
    each of its definitions (functions, classes, registry entries) imports and which of its other
    definitions it names, and the digest of each part."""

    top: tuple[list[Edge], set[str]]
    top_refs: frozenset[str]
    defs: dict[str, tuple[list[Edge], set[str]]]
    refs: dict[str, frozenset[str]]
    top_digest: str
    def_digests: dict[str, str]


def _dump(node: ast.AST) -> str:
    return hashlib.sha256(ast.dump(node).encode()).hexdigest()


class _Placeholders(ast.NodeTransformer):
    """Each registry entry replaced by its name, so that the digest of the top level does not
    hold the entries (each entry's own digest does)."""

    def __init__(self, entries: dict[int, str]):
        self.entries = entries

    def visit(self, node: ast.AST) -> ast.AST:
        if id(node) in self.entries:
            return ast.Constant(self.entries[id(node)])
        return super().visit(node)


@lru_cache(maxsize=None)
def _module(module: str) -> _Module | None:
    path = module_file(module)
    if path is None:
        return None
    tree = _strip(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    is_package = path.name == "__init__.py"
    defs = {n.name: n for n in tree.body if isinstance(n, _DEFS)}
    top_nodes = [n for n in tree.body if not isinstance(n, _DEFS)]

    # registry entries: spec calls at the top level, and the keys of lazy tables
    entry_nodes: dict[str, list[ast.AST]] = {}
    entry_edges: dict[str, list[Edge]] = {}
    placeholders: dict[int, str] = {}
    for table in _lazy_tables(tree):
        placeholders[id(table)] = "<lazy table>"
        for key, value in zip(table.keys, table.values):
            if isinstance(key, ast.Constant) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                name = entry(str(key.value))
                entry_nodes.setdefault(name, []).extend([key, value])
                entry_edges.setdefault(name, []).append((value.value, frozenset({name})))
    for stmt in top_nodes:
        for node in ast.walk(stmt):
            name = _spec_call_name(node)
            if name is not None and id(node) not in placeholders:
                placeholders[id(node)] = entry(name)
                entry_nodes.setdefault(entry(name), []).append(node)
    skip = frozenset(placeholders)

    def names_in(nodes: Iterable[ast.AST]) -> frozenset[str]:
        return frozenset(n.id for node in nodes for n in _walk(node, skip) if isinstance(n, ast.Name) and n.id in defs)

    # a definition's decorators and default values run at import too; a decorated definition may
    # be registered by its decorator, so importing the module takes it
    decorations = [d for n in defs.values() for d in [*n.decorator_list, *_defaults(n)]]
    decorated = frozenset(name for name, n in defs.items() if n.decorator_list and not _harmless(n))
    top_walk = [x for n in top_nodes + decorations for x in _walk(n, skip)]
    all_defs = {name: _edges(list(ast.walk(node)), module, is_package) for name, node in defs.items()}
    all_refs = {name: names_in([node]) for name, node in defs.items()}
    def_digests = {name: _dump(node) for name, node in defs.items()}
    for name, nodes in entry_nodes.items():
        walked = [x for node in nodes for x in ast.walk(node)]
        found, others = _edges(walked, module, is_package)
        strings = {e for e in found if e[1] is None and any(e[0] == getattr(n, "value", None) for n in nodes)}
        all_defs[name] = ([e for e in found if e not in strings] + entry_edges.get(name, []), others)
        all_refs[name] = frozenset(
            n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in defs
        )
        def_digests[name] = hashlib.sha256("".join(ast.dump(n) for n in nodes).encode()).hexdigest()
    transformer = _Placeholders(placeholders)
    top_text = "".join(ast.dump(transformer.visit(n)) for n in top_nodes + decorations)
    return _Module(
        top=_edges(top_walk, module, is_package),
        top_refs=names_in(top_nodes + decorations) | decorated,
        defs=all_defs,
        refs=all_refs,
        top_digest=hashlib.sha256(top_text.encode()).hexdigest(),
        def_digests=def_digests,
    )


# Decorators that only wrap the function they decorate (no registration at import).
_WRAPPING_DECORATORS = frozenset(
    {
        "lru_cache",
        "cache",
        "cached_property",
        "property",
        "staticmethod",
        "classmethod",
        "dataclass",
        "wraps",
        "contextmanager",
    }
)


def _harmless(node: ast.AST) -> bool:
    def name(d: ast.AST) -> str:
        d = d.func if isinstance(d, ast.Call) else d
        return d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", "")

    return all(name(d) in _WRAPPING_DECORATORS for d in node.decorator_list)


def _defaults(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.ClassDef):
        return [*node.bases, *node.keywords]
    args = node.args
    return [*args.defaults, *[d for d in args.kw_defaults if d is not None]]


def _closure(roots: Iterable[Edge | str]) -> tuple[dict[str, set[str] | None], set[str]]:
    """Each module a run from ``roots`` can import with the definitions of it taken (None: all),
    and the top-level names of the other packages they import."""
    taken: dict[str, set[str] | None] = {}
    others: set[str] = set()
    todo: list[Edge] = [(r, None) if isinstance(r, str) else r for r in roots]
    while todo:
        name, names = todo.pop()
        info = _module(name)
        if info is None:
            if name.split(".")[0] != PACKAGE:  # a root in an installed package: its distribution
                others.add(name.split(".")[0])
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
    return taken, others


def import_closure(roots: Iterable[Edge | str]) -> tuple[list[str], list[str]]:
    """The modules (crucible's and a user's) a run from ``roots`` can import, and the top-level
    names of the other packages they import, both sorted. A root is a module (all of it) or
    ``(module, names)``; a name may be a registry entry (:func:`entry`).

    Importing a module runs its top-level statements, so their imports always count; an import
    inside a function or class counts where that definition is taken (``from m import f``, or
    named by a definition taken before), so that a job whose command never reaches a function does
    not depend on what that function imports lazily. A registry's entries are definitions of
    their own: a job takes the entries its names hold (a model, a potential), not the registry."""
    taken, others = _closure(roots)
    return sorted(taken), sorted(others)


def taken_definitions(roots: Iterable[Edge | str]) -> dict[str, frozenset[str] | None]:
    """``{module: the definitions taken}`` (None: all of it) of a run from ``roots``: an edit of a
    definition changes the digest of exactly the runs that take it (benchmarks/replan_after_edit.py)."""
    taken, _ = _closure(roots)
    return {name: None if defs is None else frozenset(defs) for name, defs in sorted(taken.items())}


def closure_digests(roots: Iterable[Edge | str]) -> tuple[dict[str, str], list[str]]:
    """``{module: digest}`` of what a run from ``roots`` can run -- each module's top level and the
    definitions of it that are taken, so that an edit of one model's factory changes the digest of
    that model's jobs alone -- and the top-level names of the other packages."""
    taken, others = _closure(roots)
    out = {}
    for name, defs in sorted(taken.items()):
        info = _module(name)
        chosen = sorted(info.def_digests if defs is None else defs)
        out[name] = digest([info.top_digest, [[d, info.def_digests[d]] for d in chosen]])
    return out, sorted(others)
