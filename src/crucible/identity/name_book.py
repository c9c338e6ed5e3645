"""What each configured name means, and the record of names of a results folder.

A family declares the names its run is made of with their meaning (:class:`Meaning`: a model's
class and params, a potential's spec, a generator's params, a language model's entry, a
family's settings). :class:`NameBook` records them in ``results/.identity/names.json`` with the
runs that use them (a run: a named Matbench run, ``default`` otherwise). A config that changes a
name's meaning in the only run that uses it records the new meaning and its jobs rerun (one
console line says what changed); a name whose old meaning another run still uses is refused
before any job runs: two meanings never share a path. Each job's record
(:mod:`crucible.identity.records`) holds the meanings of the names it is made of.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crucible.core.errors import ConfigError
from crucible.identity.code_closure import canonical_json, digest, short
from crucible.identity.job_code import normal_roots
from crucible.identity.records import DEFAULT_RUN, RECORD_DIR, JobCode

NAME_BOOK_FILE = Path("results") / RECORD_DIR / "names.json"


@dataclass(frozen=True)
class Meaning:
    """What a configured name stands for, and the config key that defines it."""

    spec: Any
    key: str
    # how a user gives a different meaning its own name (one sentence)
    rename: str = "give the new one a name of its own"
    # the rules whose jobs are made of it (None: every job of the family that holds the name)
    rules: tuple[str, ...] | None = None
    # what an earlier crucible made of the same config: a folder that recorded one of these
    # records this meaning instead of refusing the name
    formerly: tuple[Any, ...] = ()
    # the code the named thing runs beyond its jobs' commands (its registry entry, a user's class:
    # crucible.identity.job_code roots) and the files it loads by path (weights, checkpoints): part of
    # the code identity of exactly the jobs made of this name, never of its meaning
    code: tuple[Any, ...] = ()
    files: tuple[str, ...] = ()
    # rules whose jobs summarize every name of its kind that the run uses (a leaderboard): made of
    # it although no wildcard of theirs holds it, so that a new meaning rebuilds them also when
    # another run rebuilt what they summarize (Snakemake does not rerun a job for newer inputs alone)
    summarized_by: tuple[str, ...] = ()
    # files the user declared that the named thing reads (``files:``, paths or globs): inputs of
    # the jobs made of it (crucible.dag.rules.attach_identity)
    declared: tuple[str, ...] = ()

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
    # what check_recorded found changed in this run's names, one console line each
    changes: list[str] = field(default_factory=list)

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

    def code_of(self, keys: Iterable[str]) -> JobCode:
        """The code roots and loaded files of the names ``keys`` (a job's names)."""
        roots: list[Any] = []
        files: set[str] = set()
        for key in keys:
            meaning = self.meanings.get(key)
            if meaning is not None:
                roots += list(meaning.code)
                files |= set(meaning.files)
        return JobCode(normal_roots(roots), tuple(sorted(files)))

    def declared_files(self, keys: Iterable[str]) -> tuple[str, ...]:
        """The files declared (``files:``) by the names ``keys``, globs expanded; a glob that
        matches nothing is refused, naming its config key."""
        import glob

        out: set[str] = set()
        for key in keys:
            meaning = self.meanings.get(key)
            for pattern in meaning.declared if meaning is not None else ():
                if not glob.has_magic(pattern):
                    out.add(pattern)
                    continue
                found = [p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p)]
                if not found:
                    raise ConfigError(f"config {meaning.key}: files: {pattern!r} matches no file")
                out.update(found)
        return tuple(sorted(out))

    def for_job(self, family: str, wildcard_values: Iterable[str], rule: str | None = None) -> dict[str, str]:
        """The names a job of ``family`` (of ``rule``) is made of: its family's settings, every
        name of its family (or a shared kind: potentials, language models) that one of its
        wildcards holds, and those its rule summarizes, less those declared for other rules only."""
        values = set(wildcard_values)
        chosen = {}
        for key, meaning in sorted(self.meanings.items()):
            scope, _, rest = key.partition("/")
            if scope not in (family, *SHARED_SCOPES):
                continue
            if meaning.rules is not None and rule not in meaning.rules:
                continue
            if key == f"{family}/settings" or rest.rpartition("/")[2] in values or rule in meaning.summarized_by:
                chosen[key] = meaning.digest
        return chosen

    def check_recorded(self, book_file: str | os.PathLike = NAME_BOOK_FILE, run: str = DEFAULT_RUN) -> list[str]:
        """The keys to record anew for ``run``: those ``book_file`` lacks, and those whose meaning
        this config changes where no other run uses the old one (said in :attr:`changes`). A name
        whose old meaning another run uses (or a record that does not say which runs use it) is
        refused, naming both meanings."""
        recorded = read_name_book(book_file)
        new = []
        self.changes = []
        for key, meaning in sorted(self.meanings.items()):
            old = recorded.get(key)
            if old is None or old["digest"] in {digest(spec) for spec in meaning.formerly}:
                new.append(key)
                continue
            if old["digest"] == meaning.digest:
                continue
            others = sorted(set(old["runs"]) - {run}) if isinstance(old.get("runs"), list) else None
            if others == []:
                new.append(key)
                self.changes.append(
                    f"{key} changed ({meaning.key}): {_brief(old['spec'])} -> {_brief(meaning.spec)}; its jobs rerun"
                )
                continue
            users = (
                f"the run{'s' if len(others) > 1 else ''} {', '.join(map(repr, others))} still use{'' if len(others) > 1 else 's'} it"
                if others
                else "an earlier run of a crucible that did not record its runs made it"
            )
            elsewhere = "" if "--directory" in meaning.rename else "; or run in another --directory"
            raise ConfigError(
                f"config {meaning.key}: {key!r} already means {canonical_json(old['spec'])} in this results "
                f"folder ({book_file}: {users}), and this config makes it {canonical_json(meaning.spec)}. One name "
                f"has one meaning in one results folder, so that no run overwrites another's results: "
                f"{meaning.rename}{elsewhere}; or, to replace the old meaning here and rebuild what used it, run "
                f"`crucible names forget {key}`"
            )
        return new

    def record(
        self, keys: Iterable[str], book_file: str | os.PathLike = NAME_BOOK_FILE, run: str = DEFAULT_RUN
    ) -> None:
        """Record that ``run`` uses ``keys`` as they mean now (a changed meaning replaces the old,
        which check_recorded let no other run hold); the file is written only when it changes."""
        keys = list(keys)
        if not keys:
            return
        from crucible.core.io import write_json

        recorded = read_name_book(book_file)
        before = canonical_json(recorded)
        for key in keys:
            meaning = self.meanings[key]
            old = recorded.get(key)
            runs = set(old.get("runs") or []) if old is not None and old["digest"] == meaning.digest else set()
            recorded[key] = {
                "digest": meaning.digest,
                "spec": meaning.spec,
                "key": meaning.key,
                "runs": sorted(runs | {run}),
            }
        if canonical_json(recorded) != before:
            Path(book_file).parent.mkdir(parents=True, exist_ok=True)
            write_json(dict(sorted(recorded.items())), book_file)


def _brief(spec: Any, limit: int = 160) -> str:
    text = canonical_json(spec)
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
    from crucible.core.io import write_json

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


# The ``crucible names`` commands: what a person asks of a results folder's record of names.
def show_names(book: str | os.PathLike = NAME_BOOK_FILE) -> None:
    """Every recorded name, its meaning's digest and spec, one per line.

    Args:
        book: the record of names (default results/.identity/names.json)
    """
    names = read_name_book(book)
    if not names:
        print(f"{book}: no names recorded yet")
    for key, entry in sorted(names.items()):
        print(f"{key}\t{short(entry['digest'])}\t{canonical_json(entry['spec'])}")


def forget(keys: Iterable[str], book: str | os.PathLike = NAME_BOOK_FILE) -> None:
    """:func:`forget_names`, saying what the next run does about each.

    Args:
        keys: e.g. matbench/model/gbm-magpie (see `crucible names show`)
        book: as in :func:`crucible.identity.name_book.show_names`
    """
    for key in forget_names(keys, book):
        print(
            f"forgot {key}: the next run records its meaning anew and reruns the jobs made of it; another run's "
            "tables made from the old meaning are refused by the report until that run rebuilds them"
        )
