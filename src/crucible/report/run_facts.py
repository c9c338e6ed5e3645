"""What a run read and took, for the report's front page (:mod:`crucible.report.front_page`):
the jobs of its DAG, the pinned sources they read (their pins and their state on disk) and the
other files they read as they are, the meanings of the names they are made of, the code
version, and the run's wall time from its jobs' benchmark files. Pure functions of plain data
and of the files under the run's folder, testable without Snakemake.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import crucible
from crucible.core.hashes import file_sha256
from crucible.sources.downloads import locked_sha256, read_lock
from crucible.sources.pinned_files import locate

RESOURCES = "resources"


LOCK_FILE = "resources/sources.lock.json"


@dataclass(frozen=True)
class Job:
    """What the front page needs of one job of the run's DAG."""

    rule: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    benchmark: str | None = None


def dag_jobs(dag: Any) -> list[Job]:
    """The jobs of a Snakemake DAG as :class:`Job` records (paths as the rules write them)."""
    jobs = []
    for job in dag.jobs:
        bench = getattr(job, "benchmark", None)
        jobs.append(
            Job(
                rule=job.rule.name,
                inputs=tuple(str(f) for f in job.input),
                outputs=tuple(str(f) for f in job.output),
                benchmark=str(bench) if bench else None,
            )
        )
    return sorted(jobs, key=lambda j: (j.rule, j.outputs))


@dataclass(frozen=True)
class SourceFile:
    """One file under resources/ that a job of the run read, and its pin."""

    path: str  # as the rule names it: resources/downloads/<file> or resources/extracted/<artifact>/<member>
    artifact: str | None  # None: not in config/sources.yaml
    origin: str  # where it comes from (pip requirement, URL), or why it has no pin there
    sha256: str | None  # the pinned SHA-256 (None: not known before the first fetch)
    pinned: bool  # False: sha256 is that of the file on disk now, not a pin of config/sources.yaml
    on_disk: str = ""  # the file now: "matches the pin", "differs from the pin", "absent"


def relative_path(path: str, root: Path) -> str:
    p = Path(path)
    if p.is_absolute():
        try:
            return p.relative_to(root).as_posix()
        except ValueError:
            return p.as_posix()
    return Path(os.path.normpath(path)).as_posix()


def _origin(spec: Mapping[str, Any]) -> str:
    if spec.get("kind") == "pip":
        return f"PyPI {spec['requirement']}"
    return str(spec.get("url") or spec.get("kind") or "")


def _state(path: Path, pin: str | None) -> str:
    """Whether the file still is what the run read: an edit after the run shows here (a rerun
    would stop on it)."""
    if not path.is_file():
        return "absent"
    if pin is None:
        return "no SHA-256 pin yet"
    return "matches the pin" if file_sha256(path) == pin else "DIFFERS from the pin"


def sources_read(jobs: Iterable[Job], sources: Mapping[str, Any], root: str | os.PathLike = ".") -> list[SourceFile]:
    """The files under resources/ that the jobs read, each with its pin from ``sources`` (the
    parsed config/sources.yaml): downloads by file name, extracted members by artifact and name.
    A file the sources file does not pin (e.g. a matminer dataset, pinned by matminer's own
    metadata) gets the SHA-256 of the file on disk, marked as such. Sorted by artifact, download
    before its members."""
    root = Path(root)
    artifacts = sources["artifacts"]
    lock = read_lock(root / LOCK_FILE)
    read = sorted(
        {relative_path(f, root) for job in jobs for f in job.inputs if relative_path(f, root).startswith("resources/")}
    )
    out = []
    for path in read:
        artifact, member = locate(path, dict(sources)) or (None, None)
        if artifact is None:
            on_disk = root / path
            sha = file_sha256(on_disk) if on_disk.is_file() else None
            state = "no pin to compare with" if sha else "absent"
            out.append(
                SourceFile(path, None, "not in config/sources.yaml (SHA-256 of the file now)", sha, False, state)
            )
            continue
        spec = artifacts[artifact]
        if member is None:
            sha = (spec.get("sha256") or locked_sha256(lock, artifact, spec.get("git_blob")) or "").lower() or None
            origin = _origin(spec)
            if spec.get("git_blob"):
                origin += f" (git blob {spec['git_blob']})"
        else:
            sha = str(spec["members"][member]["sha256"]).lower()
            origin = f"member {spec['members'][member].get('path', member)} of {artifact}"
        out.append(SourceFile(path, artifact, origin, sha, True, _state(root / path, sha)))
    return sorted(
        out, key=lambda s: (s.artifact is None, s.artifact or "", s.path.split("/")[1] != "downloads", s.path)
    )


def inputs_read_as_they_are(jobs: Sequence[Job], root: str | os.PathLike = ".") -> list[tuple[str, str | None]]:
    """(path, SHA-256 now) of every file a job reads that no job of the run makes, outside
    resources/ (config tables, a user's own datasets): the run's unpinned inputs. A directory
    has no hash (None)."""
    root = Path(root)
    made = {relative_path(f, root) for job in jobs for f in job.outputs}
    read = {relative_path(f, root) for job in jobs for f in job.inputs}
    out = []
    for path in sorted(read - made):
        if path.startswith("resources/"):
            continue
        full = root / path if not Path(path).is_absolute() else Path(path)
        out.append((path, file_sha256(full) if full.is_file() else None))
    return out


def name_meanings(jobs: Iterable[Job], root: str | os.PathLike = ".") -> list[tuple[str, str, str]]:
    """``(name, digest, meaning)`` of every name the run's outputs were made of, from their
    identity records (crucible.identity.records), with the meaning recorded in results/. Outputs that
    disagree on a name's meaning are an IdentityError naming them: the page never summarises a mix."""
    from crucible.identity.code_closure import canonical_json
    from crucible.identity.name_book import NAME_BOOK_FILE, read_name_book
    from crucible.identity.records import IdentityError, read_record

    seen: dict[str, tuple[str, str]] = {}
    for job in jobs:
        for output in job.outputs:
            record = read_record(Path(root) / output)
            for key, value in (record or {}).get("names", {}).items():
                if key in seen and seen[key][0] != value:
                    raise IdentityError(
                        f"{output} and {seen[key][1]} were made with two meanings of {key!r}; rebuild them "
                        "before the report"
                    )
                seen.setdefault(key, (value, output))
    book = read_name_book(Path(root) / NAME_BOOK_FILE)
    for key, (value, output) in sorted(seen.items()):
        if key in book and book[key]["digest"] != value:
            # a meaning forgotten (crucible names forget) or replaced since: never shown as current
            raise IdentityError(
                f"{output} was made with an old meaning of {key!r} ({value[:12]}; it now means "
                f"{canonical_json(book[key]['spec'])}): rebuild it (run its run again, or snakemake --forcerun "
                "its rule) before the report"
            )
    return [
        (
            key,
            value,
            canonical_json(book[key]["spec"]) if key in book and book[key]["digest"] == value else "not recorded",
        )
        for key, (value, _) in sorted(seen.items())
    ]


def code_version(repo: str | os.PathLike) -> str:
    """``crucible <version>``, with the git commit of ``repo`` when it is a checkout (and whether
    tracked files differ from it)."""
    text = f"crucible {crucible.__version__}"
    try:
        commit = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=20, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return f"{text} (not a git checkout: no commit recorded)"
    return f"{text}, git commit {commit}" + (" with uncommitted changes to tracked files" if dirty else "")


@dataclass(frozen=True)
class WallTime:
    n_timed: int  # jobs with a benchmark file
    untimed: tuple[str, ...]  # rules of the jobs (with outputs) that have none
    job_seconds: float  # the jobs' own wall times, summed
    first_start: float | None  # epoch seconds: earliest (benchmark mtime - its s)
    last_end: float | None  # latest benchmark mtime

    @property
    def span_seconds(self) -> float | None:
        if self.first_start is None or self.last_end is None:
            return None
        return self.last_end - self.first_start


def _benchmark_seconds(path: Path) -> float:
    """The ``s`` column of a Snakemake benchmark file (first repeat)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    return float(lines[1].split("\t")[header.index("s")])


def wall_time(jobs: Iterable[Job], root: str | os.PathLike = ".") -> WallTime:
    """The run's time from its jobs' benchmark files (benchmarks/runs/): each file is written when
    its job ends and holds the job's wall time, so the run went from the earliest end minus time
    to the latest end. Jobs that ran in earlier invocations count too: the span then includes
    the pause between them."""
    root = Path(root)
    n, total, starts, ends, untimed = 0, 0.0, [], [], set()
    for job in jobs:
        if not job.outputs:
            continue  # aggregate targets: nothing runs
        path = root / job.benchmark if job.benchmark else None
        if path is None or not path.is_file():
            untimed.add(job.rule)
            continue
        try:
            seconds = _benchmark_seconds(path)
        except (OSError, ValueError, IndexError):
            untimed.add(job.rule)
            continue
        end = path.stat().st_mtime
        n, total = n + 1, total + seconds
        starts.append(end - seconds)
        ends.append(end)
    return WallTime(n, tuple(sorted(untimed)), total, min(starts, default=None), max(ends, default=None))


def duration(seconds: float) -> str:
    """``1 h 05 min 39 s``, ``4 min 02 s``, ``7 s``."""
    s = int(round(seconds))
    h, m, s = s // 3600, s % 3600 // 60, s % 60
    if h:
        return f"{h} h {m:02d} min {s:02d} s"
    if m:
        return f"{m} min {s:02d} s"
    return f"{s} s"


def package_version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "(not installed)"


def utc_text(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
