"""What made a result: the code a command runs, the meaning of every configured name, and the
identity record each job writes beside its outputs.

Three parts, one per guarantee:

- :func:`crucible.identity.job_code.code_digest` -- a digest of the crucible modules a command
  imports, of the package data beside them and of the versions of the distributions they import.
- :class:`crucible.identity.name_book.NameBook` -- what each configured name means (a model's class and params, a
  potential's spec, a generator's params, a language model's entry, a family's settings), as
  recorded in ``results/.identity/names.json`` with the runs that use it (a run: a named
  Matbench run, ``default`` otherwise). A config that changes a name's meaning in the only run
  that uses it records the new meaning and its jobs rerun (one console line says what changed);
  a name whose old meaning another run still uses is refused before any job runs: two meanings
  never share a path.
- :class:`JobRecord` -- what the workflow hands each job (``CRUCIBLE_JOB``: its rule, command,
  code digest, the meanings of the names it is made of, its inputs and outputs). Once it
  succeeded, a job writes one record per output: ``<folder>/.identity/<file>.json``, holding the
  job's identity (the SHA-256 of its command line, code digest, name meanings and the SHA-256 of
  every input) and the output's own SHA-256. Before it reads anything, a job checks every input
  that has a record against it: an input whose bytes are no longer those its job wrote (edited,
  its mtime restored or not) or whose record disagrees with another on a name's meaning (a mix)
  is refused, and the job writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crucible.core.errors import CrucibleError
from crucible.identity.code_closure import canonical_json, digest, short
from crucible.identity.job_code import code_digest

RECORD_DIR = ".identity"
# The run of a config whose families name none (crucible.dag.families.run_of)
DEFAULT_RUN = "default"
ENV_VAR = "CRUCIBLE_JOB"
# 2: each record holds its output's SHA-256 and the rule that made it (checked by every reader)
# 3: and what its job ran and read (crucible.identity.job_reads), its digest kept in the journal
RECORD_FORMAT = 3
JOURNAL_DIR = "journal"
# Downloads and extraction are identified by their pinned SHA-256 (crucible.sources.downloads), not by the
# code that copies them: a change of that code must not download anything again.
UNDIGESTED_GROUPS = frozenset({"sources"})


class IdentityError(CrucibleError):
    """Inputs made under different meanings of one name, or a record that cannot be read."""


# --- job records --------------------------------------------------------------------------------


def record_path(output: str | os.PathLike) -> Path:
    """Where the identity record of ``output`` lives: a hidden folder beside it."""
    path = Path(output)
    return path.parent / RECORD_DIR / f"{path.name}.json"


def output_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a job's input or output: a file's (:func:`crucible.core.hashes.file_sha256`, from
    its stat-keyed cache: a file edited with its mtime restored is still hashed anew), or a
    folder's files (relative names and contents, sorted; the identity records left out)."""
    from crucible.core.hashes import file_sha256

    path = Path(path)
    if path.is_dir():
        h = hashlib.sha256()
        for file in sorted(p for p in path.rglob("*") if p.is_file() and RECORD_DIR not in p.parts):
            h.update(str(file.relative_to(path)).encode() + b"\0" + output_sha256(file).encode() + b"\0")
        return h.hexdigest()
    return file_sha256(path, cached=True)


def journal_path(output: str | os.PathLike) -> Path:
    """Where the digest of ``output``'s record is kept besides: the journal of the folder the
    output is under (``results/x/y.json`` -> ``results/.identity/journal/x/y.json.sha256``), so
    that removing or editing a record beside its output is seen."""
    parts = Path(output).parts
    if len(parts) < 2 or Path(output).is_absolute():
        return record_path(output).with_suffix(".sha256")
    return Path(parts[0], RECORD_DIR, JOURNAL_DIR, *parts[1:-1], f"{parts[-1]}.sha256")


def record_problem(output: str | os.PathLike) -> tuple[dict[str, Any] | None, str | None]:
    """``(record, None)``, or ``(None, why)`` where ``output`` has no record, an unreadable one, one
    of an earlier format, or one whose digest is not the journal's (removed or edited)."""
    try:
        record = read_record(output)
    except IdentityError as exc:
        return None, str(exc)
    if record is None:
        return None, f"{output} has no identity record ({record_path(output)})"
    if record.get("format") != RECORD_FORMAT:
        return None, f"{output}: its identity record was written by an earlier crucible ({record_path(output)})"
    try:
        kept = journal_path(output).read_text(encoding="ascii").strip()
    except OSError:
        kept = None
    if kept != digest(record):
        return None, (
            f"{output}: its identity record ({record_path(output)}) is not the one its job wrote: its digest is not "
            f"the journal's ({journal_path(output)})"
        )
    return record, None


def is_made_here(path: str | os.PathLike) -> bool:
    """An input under ``results/``: made by a crucible rule, so it has a record."""
    parts = Path(path).parts
    return not Path(path).is_absolute() and len(parts) > 1 and parts[0] == "results" and RECORD_DIR not in parts


def verify_record(path: str | os.PathLike, record: Mapping[str, Any]) -> None:
    """Refuse ``path`` unless its bytes are those the job that made it recorded."""
    made_by = (
        f"rule {record['rule']} (crucible {record.get('command')})"
        if record.get("rule")
        else f"crucible {record.get('command')}"
    )
    recorded = record.get("sha256")
    if record.get("format") != RECORD_FORMAT or not isinstance(recorded, str):
        raise IdentityError(
            f"{path}: its identity record ({record_path(path)}) holds no SHA-256 of it (made by an earlier "
            f"crucible): it cannot be checked; rebuild it (snakemake --forcerun {record.get('rule') or 'RULE'})"
        )
    actual = output_sha256(path)
    if actual != recorded:
        raise IdentityError(
            f"{path}: changed since {made_by} made it: its SHA-256 is {actual}, the job that wrote it recorded "
            f"{recorded} ({record_path(path)}). A result is not made from an input edited after the fact; "
            f"rebuild it (snakemake --forcerun {record.get('rule') or 'RULE'}), or, if the edit is meant, make it an "
            "input of its own (e.g. matbench.prediction_files)"
        )


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


@dataclass(frozen=True)
class JobCode:
    """What a job runs beyond its command: the code roots of the things its names stand for (a
    model's registry entry, a user's class) and the files they load by path (weights)."""

    roots: tuple[Any, ...] = ()
    files: tuple[str, ...] = ()


def files_digest(files: Iterable[str]) -> dict[str, str]:
    """SHA-256 of each file or folder a job's things load by path, as their loaders read them
    (crucible.core.fingerprint, cached by stat); a file that is not there is named as missing (the job
    itself then says why it needs it)."""
    from crucible.core.fingerprint import checkpoint_sha256

    return {f: checkpoint_sha256(f) if os.path.exists(f) else "missing" for f in sorted(files)}


def job_code_digest(group: str, verb: str, code: JobCode = JobCode()) -> str:
    """The code digest of one job: its command's closure with its things' roots and, when they load
    files by path, those files' digests."""
    closure = code_digest(group, verb, code.roots)
    if not code.files:
        return closure
    return digest({"closure": closure, "files": files_digest(code.files)})


def job_identity(group: str, verb: str, names: Mapping[str, str], code: JobCode = JobCode(), planned: str = "") -> str:
    """What a job is made of besides its inputs: its code digest (its command and the things its
    names stand for), the meanings of its names and, where its outputs' records say that what it
    read changed, that change (``planned``: crucible.identity.job_state): a rule param, so a change
    of any reruns it."""
    digest_of_code = "" if group in UNDIGESTED_GROUPS else job_code_digest(group, verb, code)
    doc = {"command": f"{group} {verb}", "code": digest_of_code, "names": dict(sorted(names.items()))}
    if planned:
        doc["planned"] = planned
    return canonical_json(doc)


def job_env(
    group: str,
    verb: str,
    names: Mapping[str, str],
    inputs: Iterable[str],
    outputs: Iterable[str],
    code: JobCode = JobCode(),
    rule: str = "",
    planned: str = "",
) -> str:
    """The value of ``CRUCIBLE_JOB`` for one job: :func:`job_identity` with its rule, inputs,
    outputs and code roots."""
    return canonical_json(
        {
            **json.loads(job_identity(group, verb, names, code, planned)),
            "rule": rule,
            "inputs": sorted(set(map(str, inputs))),
            "outputs": sorted(set(map(str, outputs))),
            "roots": [list(r) for r in code.roots],
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
    roots: list[Any] = field(default_factory=list)
    rule: str = ""
    # what planning found of the record of its outputs (crucible.identity.job_state.planned_state)
    planned: str = ""

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
                roots=[list(r) for r in doc.get("roots", [])],
                rule=str(doc.get("rule", "")),
                planned=str(doc.get("planned", "")),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise IdentityError(f"{ENV_VAR} is not a job description the workflow writes ({exc})") from None

    def checked_input_names(self) -> dict[str, str]:
        """The name meanings of every input, merged with the job's own, each input that has a
        record checked against it first (:func:`verify_record`); a name that two of them (or an
        input and the job) give different meanings is an IdentityError naming both."""
        merged = dict(self.names)
        source = {key: "this job's config" for key in self.names}
        for path in self.inputs:
            if is_made_here(path) and os.path.exists(path):
                record, problem = record_problem(path)
                if problem is not None:
                    raise IdentityError(
                        f"{problem}: it cannot be checked, so it is not read; remake it (snakemake --forcerun {path})"
                    )
            else:
                record = read_record(path)
            if record is None:
                continue
            verify_record(path, record)
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

    def start(self, timings: dict[str, float]) -> dict[str, str]:
        """Before the job runs: its outputs' old records dropped, its inputs checked
        (:meth:`checked_input_names`, returned); the check's CPU seconds put in ``timings``."""
        from crucible.identity.job_reads import watch

        self.drop_records()
        started = time.process_time()
        names = self.checked_input_names()
        watch()
        timings["verify_cpu_s"] = time.process_time() - started
        return names

    def finish(self, argv: Iterable[str], names: Mapping[str, str], timings: dict[str, float]) -> None:
        """Once the job succeeded: its outputs' records written, their CPU seconds in ``timings``."""
        from crucible.identity.job_reads import collect, refusal

        started = time.process_time()
        ran = collect(self.inputs, self.outputs)
        refused = refusal(ran.pop("refused"))
        if refused is not None:
            raise IdentityError(refused)
        self.write_records(argv, names, ran)
        timings["record_cpu_s"] = time.process_time() - started

    def drop_records(self) -> None:
        """Remove the records of this job's outputs before it runs: Snakemake removed (or the job
        replaces) the files they describe, and a job that fails must leave no record behind."""
        for output in self.outputs:
            record_path(output).unlink(missing_ok=True)
            journal_path(output).unlink(missing_ok=True)

    def write_records(self, argv: Iterable[str], names: Mapping[str, str], ran: Mapping[str, Any] | None = None) -> str:
        """One record per existing output, its digest in the journal; returns the job's identity."""
        from crucible.core.io import write_json

        inputs = {path: output_sha256(path) for path in sorted(set(self.inputs)) if Path(path).exists()}
        body = {
            "format": RECORD_FORMAT,
            "rule": self.rule,
            "command": self.command,
            "argv": list(argv),
            "code": self.code,
            "names": dict(names),
            "inputs": inputs,
            "ran": dict(ran or {}),
            "planned": self.planned,
        }
        identity = digest(body)
        for output in self.outputs:
            if not Path(output).exists():
                continue
            path = record_path(output)
            path.parent.mkdir(parents=True, exist_ok=True)
            doc = {"identity": identity, **body, "output": output, "sha256": output_sha256(output)}
            write_json(doc, path)
            journal = journal_path(output)
            journal.parent.mkdir(parents=True, exist_ok=True)
            tmp = journal.with_name(f".{journal.name}.{os.getpid()}")
            tmp.write_text(digest(json.loads(path.read_text(encoding="utf-8"))) + "\n", encoding="ascii")
            os.replace(tmp, journal)
        return identity


def show_record(output: str | os.PathLike) -> int:
    """The identity record of one output as JSON; exit status 1 when it has none.

    Args:
        output: an output file of the workflow
    """
    record = read_record(output)
    if record is None:
        print(f"{output}: no identity record (not made by a workflow job of this version)")
        return 1
    print(json.dumps(record, indent=2, sort_keys=True))
    return 0
