"""What made a result: the code a command runs, the meaning of every configured name, and the
identity record each job writes beside its outputs.

Three parts, one per guarantee:

- :func:`code_digest` -- a digest of the crucible modules a command imports (the static import
  graph from its handler, conservatively closed: every import anywhere in a reached library
  module counts), of the package data beside them, and of the versions of the third-party
  distributions they import. Comments, docstrings and ``__version__`` are not part of it: a
  version bump alone, or a reworded comment, reruns nothing; a changed line of code reruns
  exactly the jobs whose command reaches that module.
- :class:`NameBook` -- what each configured name means (a model's class and params, a
  potential's spec, a generator's params, a language model's entry, a family's settings), as
  recorded in ``results/.identity/names.json`` by the first run that used it. A config that
  makes a recorded name mean something else is refused before any job runs: two meanings never
  share a path.
- :class:`JobRecord` -- what the workflow hands each job (``CRUCIBLE_JOB``: its command, code
  digest, the meanings of the names it is made of, its inputs and outputs). The job refuses inputs
  whose records disagree on a name's meaning (a mix) and, once it succeeded, writes one record per
  output: ``<folder>/.identity/<file>.json``, holding the job's identity (the SHA-256 of its
  command line, code digest, name meanings and the SHA-256 of every input).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from crucible.errors import ConfigError, CrucibleError

PACKAGE = "crucible"
PACKAGE_ROOT = Path(__file__).resolve().parent
RECORD_DIR = ".identity"
NAME_BOOK_FILE = Path("results") / RECORD_DIR / "names.json"
ENV_VAR = "CRUCIBLE_JOB"
RECORD_FORMAT = 1
# Downloads and extraction are identified by their pinned SHA-256 (crucible.sources), not by the
# code that copies them: a change of that code must not download anything again.
UNDIGESTED_GROUPS = frozenset({"sources"})


class IdentityError(CrucibleError):
    """Inputs made under different meanings of one name, or a record that cannot be read."""


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
_DISPATCHERS = frozenset({"crucible.cli"})
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

    # argparse's set_defaults(func=handler) names every command's handler while building the
    # parser; only the one asked for runs (it is the root of that command's closure)
    dispatched = {
        id(kw.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "set_defaults"
        for kw in n.keywords
        if kw.arg == "func"
    }

    def names_in(nodes: Iterable[ast.AST]) -> frozenset[str]:
        return frozenset(
            n.id
            for node in nodes
            for n in ast.walk(node)
            if isinstance(n, ast.Name) and n.id in defs and id(n) not in dispatched
        )

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
    """``(module, function)`` that ``crucible group verb`` runs, read from the group's declared
    stages (crucible.stage) or its parser."""
    import argparse
    import importlib

    from crucible.cli import GROUPS

    if group not in GROUPS:
        raise ValueError(f"no crucible command group {group!r}")
    module = importlib.import_module(GROUPS[group][0])
    if hasattr(module, "STAGES"):
        for declared in module.STAGES:
            if declared.verb == verb:
                return declared.target
        raise ValueError(f"no command 'crucible {group} {verb}'")
    parser = argparse.ArgumentParser()
    module.configure_parser(parser)
    for action in parser._actions:  # argparse keeps its subcommands here and nowhere public
        if isinstance(action, argparse._SubParsersAction) and verb in action.choices:
            func = action.choices[verb].get_default("func")
            return func.__module__, func.__name__
    raise ValueError(f"no command 'crucible {group} {verb}'")


@lru_cache(maxsize=None)
def code_identity(group: str, verb: str) -> dict[str, Any]:
    """What ``crucible group verb`` runs: module digests, package data, distribution versions."""
    import importlib

    from crucible.cli import GROUPS

    module, function = command_handler(group, verb)
    # every command builds its group's parser before its handler runs: from the group module's
    # declarations (its top level) or its configure_parser
    group_module = importlib.import_module(GROUPS[group][0])
    builds = frozenset() if hasattr(group_module, "STAGES") else frozenset({"configure_parser"})
    roots = [(GROUPS[group][0], builds), (module, frozenset({function}))]
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


# --- names --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Meaning:
    """What a configured name stands for, and the config key that defines it."""

    spec: Any
    key: str
    # how a user gives a different meaning its own name (one sentence)
    rename: str = "give the new one a name of its own"
    # the rules whose jobs are made of it (None: every job of the family that holds the name)
    rules: tuple[str, ...] | None = None

    @property
    def digest(self) -> str:
        return digest(self.spec)


def settings(section: Mapping[str, Any], exclude: Iterable[str] = ()) -> dict[str, Any]:
    """A family's settings as a name's meaning: every key of its section that is neither a list
    (what to run) nor one of ``exclude`` (name-keyed entries, per-run or speed-only keys)."""
    skip = set(exclude)
    return {k: v for k, v in sorted(section.items()) if k not in skip and not isinstance(v, list)}


def registered(name: str) -> dict[str, str]:
    """The meaning of a name the code registers (its code is in every job's code digest)."""
    return {"registered": name}


@dataclass
class NameBook:
    """Every name the config uses, with its meaning, beside what ``results/`` recorded."""

    meanings: dict[str, Meaning] = field(default_factory=dict)

    @classmethod
    def of(cls, config: Mapping[str, Any], families: Iterable[Any]) -> NameBook:
        book = cls()
        for family in families:
            for key, meaning in family.names(config).items():
                known = book.meanings.get(key)
                if known is not None and known.digest != meaning.digest:
                    raise ConfigError(
                        f"config {known.key} and {meaning.key} give {key!r} two meanings: "
                        f"{canonical_json(known.spec)} and {canonical_json(meaning.spec)}"
                    )
                book.meanings.setdefault(key, meaning)
        return book

    def digests(self) -> dict[str, str]:
        return {k: m.digest for k, m in sorted(self.meanings.items())}

    def for_job(self, family: str, wildcard_values: Iterable[str], rule: str | None = None) -> dict[str, str]:
        """The names a job of ``family`` (of ``rule``) is made of: its family's settings and every
        name of its family (or a shared kind: potentials, language models) that one of its
        wildcards holds, less those declared for other rules only."""
        values = set(wildcard_values)
        chosen = {}
        for key, meaning in sorted(self.meanings.items()):
            scope, _, rest = key.partition("/")
            if scope not in (family, *SHARED_SCOPES):
                continue
            if meaning.rules is not None and rule not in meaning.rules:
                continue
            if key == f"{family}/settings" or rest.rpartition("/")[2] in values:
                chosen[key] = meaning.digest
        return chosen

    def check_recorded(self, book_file: str | os.PathLike = NAME_BOOK_FILE) -> list[str]:
        """Refuse a name that ``book_file`` recorded with another meaning; the keys not yet there."""
        recorded = read_name_book(book_file)
        new = []
        for key, meaning in sorted(self.meanings.items()):
            old = recorded.get(key)
            if old is None:
                new.append(key)
            elif old["digest"] != meaning.digest:
                raise ConfigError(
                    f"config {meaning.key}: {key!r} already means {canonical_json(old['spec'])} in this results "
                    f"folder ({book_file}, from an earlier run), and this config makes it "
                    f"{canonical_json(meaning.spec)}. One name has one meaning in one results folder, so that no "
                    f"run overwrites another's results: {meaning.rename}; or run in another --directory; or, to "
                    f"replace the old meaning here and rebuild what used it, run `crucible names forget {key}`"
                )
        return new

    def record(self, keys: Iterable[str], book_file: str | os.PathLike = NAME_BOOK_FILE) -> None:
        keys = list(keys)
        if not keys:
            return
        from crucible.io import write_json

        recorded = read_name_book(book_file)
        for key in keys:
            meaning = self.meanings[key]
            recorded[key] = {"digest": meaning.digest, "spec": meaning.spec, "key": meaning.key}
        Path(book_file).parent.mkdir(parents=True, exist_ok=True)
        write_json(dict(sorted(recorded.items())), book_file)


# Kinds of names that several families use with one meaning (a potential in mlip, catalysis and
# crystal's mlip-search; a language model in every benchmark that asks one).
SHARED_SCOPES = ("potential", "llm")


def read_name_book(book_file: str | os.PathLike = NAME_BOOK_FILE) -> dict[str, dict[str, Any]]:
    path = Path(book_file)
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable record of names ({exc}); move it away to start afresh") from None
    if not isinstance(doc, dict) or not all(isinstance(v, dict) and "digest" in v for v in doc.values()):
        raise ConfigError(f"{path}: not a record of names (expected {{key: {{digest, spec}}}}); move it away")
    return doc


def forget_names(keys: Iterable[str], book_file: str | os.PathLike = NAME_BOOK_FILE) -> list[str]:
    """Drop ``keys`` from the record; a key that is not there is an error naming the known ones."""
    from crucible.io import write_json

    recorded = read_name_book(book_file)
    keys = list(keys)
    unknown = [k for k in keys if k not in recorded]
    if unknown:
        raise ConfigError(
            f"{book_file}: no name {', '.join(map(repr, unknown))} recorded; recorded: {', '.join(sorted(recorded)) or 'none'}"
        )
    for key in keys:
        del recorded[key]
    write_json(dict(sorted(recorded.items())), book_file)
    return keys


# --- job records --------------------------------------------------------------------------------


def record_path(output: str | os.PathLike) -> Path:
    """Where the identity record of ``output`` lives: a hidden folder beside it."""
    path = Path(output)
    return path.parent / RECORD_DIR / f"{path.name}.json"


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a file, or of a folder's files (relative names and contents, sorted)."""
    path = Path(path)
    if path.is_dir():
        h = hashlib.sha256()
        for file in sorted(p for p in path.rglob("*") if p.is_file() and RECORD_DIR not in p.parts):
            h.update(str(file.relative_to(path)).encode() + b"\0" + file_sha256(file).encode() + b"\0")
        return h.hexdigest()
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_record(output: str | os.PathLike) -> dict[str, Any] | None:
    path = record_path(output)
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IdentityError(f"{path}: unreadable identity record of {output} ({exc}); rebuild {output}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("names"), dict):
        raise IdentityError(f"{path}: not an identity record of {output}; rebuild {output}")
    return doc


def job_identity(group: str, verb: str, names: Mapping[str, str]) -> str:
    """What a job is made of besides its inputs: its command's code digest and the meanings of its
    names (a rule param: a change of either reruns the job)."""
    code = "" if group in UNDIGESTED_GROUPS else code_digest(group, verb)
    return canonical_json({"command": f"{group} {verb}", "code": code, "names": dict(sorted(names.items()))})


def job_env(
    group: str,
    verb: str,
    names: Mapping[str, str],
    inputs: Iterable[str],
    outputs: Iterable[str],
) -> str:
    """The value of ``CRUCIBLE_JOB`` for one job: :func:`job_identity` with its inputs and outputs."""
    return canonical_json(
        {
            **json.loads(job_identity(group, verb, names)),
            "inputs": sorted(set(map(str, inputs))),
            "outputs": sorted(set(map(str, outputs))),
        }
    )


def names_of_jobs(job_envs: Iterable[str | None]) -> set[str]:
    """The name keys that these jobs (their ``crucible_identity`` params) are made of."""
    return {key for raw in job_envs if raw for key in json.loads(raw)["names"]}


@dataclass
class JobRecord:
    command: str
    code: str
    names: dict[str, str]
    inputs: list[str]
    outputs: list[str]

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> JobRecord | None:
        raw = environ.get(ENV_VAR)
        if not raw:
            return None
        try:
            doc = json.loads(raw)
            return cls(
                command=str(doc["command"]),
                code=str(doc["code"]),
                names={str(k): str(v) for k, v in doc["names"].items()},
                inputs=[str(p) for p in doc["inputs"]],
                outputs=[str(p) for p in doc["outputs"]],
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise IdentityError(f"{ENV_VAR} is not a job description the workflow writes ({exc})") from None

    def input_names(self) -> dict[str, str]:
        """The name meanings of every input, merged with the job's own; a name that two of them
        (or an input and the job) give different meanings is an IdentityError naming both."""
        merged = dict(self.names)
        source = {key: "this job's config" for key in self.names}
        for path in self.inputs:
            record = read_record(path)
            if record is None:
                continue
            for key, value in record["names"].items():
                if key in merged and merged[key] != value:
                    raise IdentityError(
                        f"{path} was made with {key!r} meaning {short(value)}, but {source[key]} gives it "
                        f"{short(merged[key])}: a summary of results of two meanings is refused; rebuild {path} "
                        "(see `crucible names show` for what each name means here)"
                    )
                merged.setdefault(key, value)
                source.setdefault(key, str(path))
        return dict(sorted(merged.items()))

    def write_records(self, argv: Iterable[str], names: Mapping[str, str]) -> str:
        """One record per existing output; returns the job's identity."""
        from crucible.io import write_json

        inputs = {path: file_sha256(path) for path in sorted(set(self.inputs)) if Path(path).exists()}
        body = {
            "format": RECORD_FORMAT,
            "command": self.command,
            "argv": list(argv),
            "code": self.code,
            "names": dict(names),
            "inputs": inputs,
        }
        identity = digest(body)
        for output in self.outputs:
            if not Path(output).exists():
                continue
            path = record_path(output)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_json({"identity": identity, **body, "output": output}, path)
        return identity


# The ``crucible names`` commands: what a person asks of a results folder's record of names.
def show_names(book: str | os.PathLike = NAME_BOOK_FILE) -> None:
    """Every recorded name, its meaning's digest and spec, one per line."""
    names = read_name_book(book)
    if not names:
        print(f"{book}: no names recorded yet")
    for key, entry in sorted(names.items()):
        print(f"{key}\t{short(entry['digest'])}\t{canonical_json(entry['spec'])}")


def forget(keys: Iterable[str], book: str | os.PathLike = NAME_BOOK_FILE) -> None:
    """:func:`forget_names`, saying what the next run does about each."""
    for key in forget_names(keys, book):
        print(f"forgot {key}: the next run records its meaning anew and reruns the jobs made of it")


def show_record(output: str | os.PathLike) -> int:
    """The identity record of one output as JSON; exit status 1 when it has none."""
    record = read_record(output)
    if record is None:
        print(f"{output}: no identity record (not made by a workflow job of this version)")
        return 1
    print(json.dumps(record, indent=2, sort_keys=True))
    return 0
