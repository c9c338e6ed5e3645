"""The front page of ``snakemake --report``: what this run is, from its config and its DAG.

It names every benchmark family that ran (those of :mod:`crucible.dag.families` with final outputs
for the config) and what each built, the pinned sources the run's jobs read (with the SHA-256 of
``config/sources.yaml``) and the other files they read as they are, the code version, and the
run's wall time from its jobs' benchmark files. ``workflow/report/workflow.rst`` only prints
:meth:`FrontPage.rst`; the Snakefile hands it the config and the DAG (:func:`dag_jobs`), and
everything else here is a pure function of plain data, testable without Snakemake.
"""

from __future__ import annotations

import os
import platform
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import crucible
from crucible.core.hashes import file_sha256
from crucible.dag import families as registry
from crucible.dag.config import section
from crucible.sources.downloads import locked_sha256, read_lock
from crucible.sources.pinned_files import locate

# The config key under which the Snakefile puts the front page for the report template: no
# family's section, and the schema refuses it in a config file, so a user cannot set it.
CONFIG_KEY = "_report_front_page"
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


# --------------------------------------------------------------------------- families


@dataclass(frozen=True)
class FamilyRun:
    name: str
    built: dict[str, list[str]]  # axis (tasks, datasets, models ...) -> names
    n_outputs: int


def built_by(family: registry.Family, config: dict[str, Any]) -> dict[str, list[str]]:
    """What a run of ``config`` builds in ``family``: its :attr:`~crucible.dag.families.Family.built`,
    or the section's lists of names."""
    if family.built is not None:
        return family.built(config)
    if not registry.enabled(config, family.name):
        return {}
    lists = {k: v for k, v in section(config, family.name).items() if isinstance(v, list)}
    return {k.replace("_", " "): [str(x) for x in v] for k, v in lists.items() if all(isinstance(x, str) for x in v)}


def families_run(config: Mapping[str, Any]) -> list[FamilyRun]:
    """Every registered family with final outputs for ``config``, in registry order."""
    out = []
    for family in registry.families():
        outputs = family.final_outputs(dict(config))
        if outputs:
            built = {axis: list(names) for axis, names in built_by(family, dict(config)).items() if names}
            out.append(FamilyRun(family.name, built, len(outputs)))
    return out


def families_not_run(config: Mapping[str, Any]) -> list[str]:
    ran = {f.name for f in families_run(config)}
    return [f.name for f in registry.families() if f.name not in ran]


# --------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class SourceFile:
    """One file under resources/ that a job of the run read, and its pin."""

    path: str  # as the rule names it: resources/downloads/<file> or resources/extracted/<artifact>/<member>
    artifact: str | None  # None: not in config/sources.yaml
    origin: str  # where it comes from (pip requirement, URL), or why it has no pin there
    sha256: str | None  # the pinned SHA-256 (None: not known before the first fetch)
    pinned: bool  # False: sha256 is that of the file on disk now, not a pin of config/sources.yaml
    on_disk: str = ""  # the file now: "matches the pin", "differs from the pin", "absent"


def _relative(path: str, root: Path) -> str:
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
        {_relative(f, root) for job in jobs for f in job.inputs if _relative(f, root).startswith("resources/")}
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
    made = {_relative(f, root) for job in jobs for f in job.outputs}
    read = {_relative(f, root) for job in jobs for f in job.inputs}
    out = []
    for path in sorted(read - made):
        if path.startswith("resources/"):
            continue
        full = root / path if not Path(path).is_absolute() else Path(path)
        out.append((path, file_sha256(full) if full.is_file() else None))
    return out


# --------------------------------------------------------------------------- version, time


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


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "(not installed)"


def _utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


# --------------------------------------------------------------------------- the page


def _printable(text: str) -> str:
    # a control character (a newline in a file name) is shown as its escape, never obeyed
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _escape(text: str) -> str:
    """A name as plain text in reStructuredText (``model_`` would otherwise be a link, ``a*b``
    emphasis, ``javascript:...`` a standalone link)."""
    return "".join(f"\\{c}" if c in "\\`*_|[]<>:" else c for c in _printable(text))


def _literal(text: str) -> str:
    """``text`` as an inline literal; one that an inline literal cannot hold (a backquote, white
    space at an end) as escaped plain text, so that no file name can end the literal and start
    markup of its own."""
    text = _printable(text)
    if not text:
        return ""
    if "`" in text or text != text.strip():
        return _escape(text)
    return f"``{text}``"


def _cell(text: str) -> str:
    # a list-table cell is one paragraph; an empty cell must still hold something
    return text.replace("\n", " ") or "–"


def _list_table(header: Sequence[str], rows: Sequence[Sequence[str]], widths: Sequence[int]) -> list[str]:
    lines = [".. list-table::", "   :header-rows: 1", f"   :widths: {' '.join(str(w) for w in widths)}", ""]
    for row in [header, *rows]:
        lines.append(f"   * - {_cell(row[0])}")
        lines += [f"     - {_cell(c)}" for c in row[1:]]
    return lines + [""]


def _entries_by_family(categories: Mapping[str, int], names: Iterable[str]) -> dict[str, str]:
    """The report category of each family (named as the family, case aside: ``MLIP`` for mlip)."""
    by_fold = {c.casefold(): c for c in categories}
    return {n: by_fold[n.casefold()] for n in names if n.casefold() in by_fold}


def render(
    config: Mapping[str, Any],
    jobs: Sequence[Job],
    *,
    sources: Mapping[str, Any],
    configfiles: Sequence[str] = (),
    repo: str | os.PathLike = ".",
    root: str | os.PathLike = ".",
    categories: Mapping[str, int] | None = None,
) -> str:
    """The front page as reStructuredText. ``categories``: the report's categories and how many
    entries each holds (links to them are the report's own ``Name_`` targets)."""
    categories = dict(categories or {})
    ran = families_run(config)
    entries = _entries_by_family(categories, [f.name for f in ran])
    lines = ["crucible: the run's tables and figures", "=" * 38, ""]

    time = wall_time(jobs, root)
    if time.span_seconds is not None:
        took = (
            f"**Wall time: {duration(time.span_seconds)}**, from the first job's start "
            f"({_utc(time.first_start)}) to the last job's end ({_utc(time.last_end)}); the {time.n_timed} "
            f"timed jobs' own times sum to {duration(time.job_seconds)} (their files under benchmarks/runs/)."
        )
    else:
        took = "**Wall time: not known**: no job of this run has a benchmark file under benchmarks/runs/."
    if time.untimed:
        took += f" Jobs without a benchmark file: {', '.join(time.untimed)}."
    config_text = ", ".join(_literal(_relative(c, Path(root))) for c in configfiles) or "the workflow's defaults"
    lines += [
        f"**Code:** {code_version(repo)}; Snakemake {_version('snakemake')}, Python {platform.python_version()}.",
        "",
        f"**Config:** {config_text}.",
        "",
        took,
        "",
        "Families that ran",
        "-----------------",
        "",
    ]
    rows = []
    for f in ran:
        built = " × ".join(f"{_escape(axis)} ({len(v)}): {', '.join(map(_escape, v))}" for axis, v in f.built.items())
        link = f"`{entries[f.name]}`_ ({categories[entries[f.name]]})" if f.name in entries else "none"
        rows.append([f"**{_escape(f.name)}**", built, f"{f.n_outputs}", link])
    lines += _list_table(["family", "what it built", "outputs", "report entries"], rows, [12, 62, 10, 16])
    idle = families_not_run(config)
    if idle:
        lines += [f"Not in this run (nothing configured): {', '.join(idle)}.", ""]
    lines += [
        "Each family's tables (CSV) and figures (PNG), with their captions, are under its entry in the "
        "menu; the rule graph is under Workflow, each job's time under Statistics.",
        "",
    ]

    meanings = name_meanings(jobs, root)
    if meanings:
        lines += [
            "What the names mean",
            "-------------------",
            "",
            "Every name the run's outputs are made of, as their identity records give it (one meaning "
            "each; `crucible names show` lists them, results/.identity/names.json keeps them):",
            "",
        ]
        rows = [[_literal(key), _literal(value[:12]), _literal(meaning)] for key, value, meaning in meanings]
        lines += _list_table(["name", "digest", "meaning"], rows, [30, 14, 56])

    read = sources_read(jobs, sources, root)
    lines += ["Sources", "-------", ""]
    if read:
        lines += [
            "The raw files the run's jobs read, with the SHA-256 that config/sources.yaml pins (every "
            "read checks the file against it):",
            "",
        ]
        rows = [
            [_literal(s.path), _escape(s.origin), _literal(s.sha256 or "recorded on first fetch"), s.on_disk]
            for s in read
        ]
        lines += _list_table(["file", "from", "SHA-256", "on disk now"], rows, [30, 22, 36, 12])
    else:
        lines += ["The run's jobs read no file under resources/.", ""]
    other = inputs_read_as_they_are(jobs, root)
    if other:
        lines += ["Files the jobs read as they are (no job makes them; no pin), with their SHA-256 now:", ""]
        lines += _list_table(
            ["file", "SHA-256"], [[_literal(p), _literal(h or "a directory")] for p, h in other], [50, 50]
        )
    return "\n".join(lines) + "\n"


class FrontPage:
    """What the report template prints, computed when it renders (after Snakemake has built the
    DAG): ``{{ snakemake.config[CONFIG_KEY].rst(categories) }}``. Holds the config and a function
    returning the DAG; copying it (Snakemake may copy the config) shares them."""

    def __init__(
        self,
        config: Mapping[str, Any],
        dag: Callable[[], Any],
        *,
        sources: Mapping[str, Any],
        configfiles: Callable[[], Sequence[str]],
        repo: str | os.PathLike,
    ):
        self._config, self._dag, self._sources = config, dag, sources
        self._configfiles, self._repo = configfiles, repo

    def __copy__(self) -> FrontPage:
        return self

    def __deepcopy__(self, memo: dict) -> FrontPage:
        return self

    def __repr__(self) -> str:
        return "<crucible report front page>"

    def rst(self, categories: Mapping[Any, Mapping[Any, Sequence[Any]]] | None = None) -> str:
        """The page; ``categories``: the report's results, category -> subcategory -> entries."""
        counts = {
            getattr(cat, "name", cat): sum(len(v) for v in subcats.values())
            for cat, subcats in (categories or {}).items()
            if getattr(cat, "name", cat)
        }
        config = {k: v for k, v in self._config.items() if k != CONFIG_KEY}
        return render(
            config,
            dag_jobs(self._dag()),
            sources=self._sources,
            configfiles=[str(c) for c in self._configfiles()],
            repo=self._repo,
            root=os.getcwd(),
            categories=counts,
        )
