"""At planning: does what a job's outputs' records say it ran and read still hold?

A job's record (crucible.identity.records) holds what it ran and read (crucible.identity.job_reads):
files with their SHA-256 and installed distributions by version. :func:`planned_state` compares
them with the files as they are now (SHA-256 cached by stat) and checks the distributions against
their RECORD, and returns a string that goes into the job's ``crucible_identity`` param
(crucible.identity.records.job_identity):

- ``""`` where the job has not run (no output) -- what Snakemake stored for a first run;
- the ``planned`` string the record holds where nothing changed: exactly what Snakemake stored
  when that job ran, so an unchanged job is never replanned;
- a new string where a file it read changed (one console line names the file), or where an output
  has no record, an unreadable one or one whose digest is not the journal's: the job reruns,
  and writes this string into its new records, so that it is stable from then on.

Installed code a job reached that no RECORD vouches for (a distribution whose RECORD was removed,
an edited file) stops planning, naming the distribution and how to reinstall it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from functools import lru_cache

from crucible.core.errors import ConfigError
from crucible.identity.code_closure import digest, short

_SAID: set[str] = set()


def _say(line: str, about: str | None = None) -> None:
    """One console line per file (``about``) or line, however many jobs it concerns."""
    key = about or line
    if key not in _SAID:
        _SAID.add(key)
        print(line, file=sys.stderr)


def _version(dist: str) -> str:
    from crucible.identity.installed_code import _version as installed_version  # cached per process

    return installed_version(dist) or "not installed"


def _current(path: str) -> str:
    from crucible.core.hashes import file_sha256

    try:
        return file_sha256(path, cached=True) if os.path.isfile(path) else "missing"
    except Exception:  # unreadable: a change all the same
        return "unreadable"


@lru_cache(maxsize=1)
def _startup() -> list[str]:
    from crucible.identity.job_reads import startup_files

    return startup_files()


def planned_state(rule: str, outputs: Iterable[str]) -> str:
    """See the module's doc; ``outputs`` are one job's."""
    return _planned_state(rule, tuple(sorted(map(str, outputs))))


@lru_cache(maxsize=None)
def _planned_state(rule: str, outputs: tuple[str, ...]) -> str:
    from crucible.identity.installed_code import check_distributions
    from crucible.identity.records import record_problem

    present = [o for o in outputs if os.path.exists(o)]
    if not present:
        return ""
    records = []
    for output in present:
        record, problem = record_problem(output)
        if problem is not None:
            if "earlier crucible" in problem:  # every output of a folder made before: one line, not one each
                _say(f"{problem}: its job reruns, as does every job whose records are of that format", "format")
            else:
                _say(f"{problem}: rule {rule} remakes it")
            return "remake " + digest([output, problem])
        records.append(record)
    record = records[0]
    ran = record.get("ran") or {}
    changed = {}
    startup = _startup()
    if "startup" in ran and ran["startup"] != startup:
        came = sorted(set(startup) - set(ran["startup"])) + sorted(set(ran["startup"]) - set(startup))
        changed["startup"] = startup
        _say(
            f"{', '.join(came)}: Python runs it at every start, and it came or went since the jobs ran: they rerun",
            "startup",
        )
    for dist, version in sorted((ran.get("distributions") or {}).items()):
        now = _version(dist)
        if now != version:
            changed[dist] = now
            _say(f"{dist} {version} is now {now}: the jobs that ran it rerun (e.g. rule {rule}: {present[0]})", dist)
    try:
        check_distributions(d for d in (ran.get("distributions") or {}) if d not in changed)
    except ConfigError as exc:
        raise ConfigError(f"{exc} (run by rule {rule} making {present[0]})") from None
    for path, recorded in sorted((ran.get("files") or {}).items()):
        now = _current(path)
        if now != recorded:
            changed[path] = now
            _say(
                f"{path} changed since a job read it ({short(recorded)} -> {short(now)}): the jobs that read it "
                f"rerun (e.g. rule {rule}: {present[0]})",
                path,
            )
    if changed:
        return "changed " + digest([record.get("identity"), changed])
    return str(record.get("planned", ""))
