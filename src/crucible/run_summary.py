"""The few lines a run ends with: where its tables, figures and report are, and what failed.

The Snakefile's ``onsuccess``/``onerror`` handlers print :func:`run_summary` of the run's final
outputs (the targets of ``rule all`` for its config, so a table of a model that is not in the run
is never named) and of Snakemake's own log, which names each failed job and its log file. The
profiles keep going past a failed job, so a failure stays in its family: the summary names each
family left incomplete, each failed job with the one-line cause its log ends with and the fix
that cause names, and a report command that works as printed (:func:`report_command`).
"""

from __future__ import annotations

import os
import re
import shlex
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

REPORT = "results/report.zip"
_KINDS = ("tables", "figures")
_ERROR_RE = re.compile(r"^Error in rule (\S+):$")
_LOG_RE = re.compile(r"^\s+log: (.+?)(?: \(check log file\(s\) for error details\))?$")
_OUTPUT_RE = re.compile(r"^\s+output: (.+)$")
# the line `crucible <group>` ends a failed command with (crucible.cli)
_CRUCIBLE_ERROR_RE = re.compile(r"^crucible [\w-]+: error: (.+)$")
CAUSE_CHARS = 400  # a cause is cut there on the console; the job's log has it whole


LogFiles = str | os.PathLike | Sequence[str | os.PathLike] | None


def _log_files(snakemake_log: LogFiles) -> list[Path]:
    """Snakemake hands its handlers one log path or a list of them (Snakemake 9: a list)."""
    if not snakemake_log:
        return []
    if isinstance(snakemake_log, (str, os.PathLike)):
        snakemake_log = [snakemake_log]
    return [Path(p) for p in snakemake_log if p]


@dataclass(frozen=True)
class FailedJob:
    rule: str
    log: str = ""
    output: str = ""


def failed_job_details(snakemake_log: LogFiles) -> list[FailedJob]:
    """Every job Snakemake's log reports as failed, in order: its rule, log file and first output."""
    lines = []
    for path in _log_files(snakemake_log):
        if path.is_file():
            lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    failed: list[FailedJob] = []
    job: dict[str, str] | None = None
    for line in lines:
        m = _ERROR_RE.match(line)
        if m:
            if job:
                failed.append(FailedJob(**job))
            job = {"rule": m.group(1)}
            continue
        if job is None:
            continue
        if not line.startswith(" "):
            failed.append(FailedJob(**job))
            job = None
        elif _LOG_RE.match(line) and "log" not in job:
            job["log"] = _LOG_RE.match(line).group(1)
        elif _OUTPUT_RE.match(line) and "output" not in job:
            job["output"] = _OUTPUT_RE.match(line).group(1).split(", ")[0]
    if job:
        failed.append(FailedJob(**job))
    return list(dict.fromkeys(failed))


def failed_jobs(snakemake_log: LogFiles) -> list[tuple[str, str]]:
    """(rule, its log files) of every job Snakemake's log reports as failed, in order."""
    return list(dict.fromkeys((j.rule, j.log) for j in failed_job_details(snakemake_log)))


def cause_and_fix(job_log: str | os.PathLike | None, root: str | os.PathLike = ".") -> tuple[str, str]:
    """(the one-line cause, the fix it names or "") that a failed job's log ends with: the error
    line of a crucible command (its ``Fix: ...`` part split off), else the log's last line."""
    path = Path(root) / job_log if job_log else None
    if path is None or not path.is_file():
        return "", ""
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    errors = [m.group(1) for m in map(_CRUCIBLE_ERROR_RE.match, lines) if m]
    cause = errors[-1] if errors else (lines[-1] if lines else "")
    cause, _, fix = cause.partition(" Fix: ")
    cut = lambda text: text if len(text) <= CAUSE_CHARS else text[: CAUSE_CHARS - 1] + "…"  # noqa: E731
    return cut(cause), cut(fix)


def report_command(
    executable: str,
    configfiles: Sequence[str | os.PathLike] = (),
    snakefile: str | os.PathLike | None = None,
    workdir: str | os.PathLike | None = None,
    report: str = REPORT,
) -> str:
    """The ``--report`` call of this run as a shell line that works as printed: the Snakemake that
    runs now (``executable``: its script, or ``python -m snakemake``), the run's ``--configfile``
    files, and its Snakefile and folder where the Snakefile is not the folder's own."""
    words = shlex.split(executable) if " -m " in executable else [executable]
    if snakefile and workdir and Path(snakefile).resolve() != (Path(workdir) / "Snakefile").resolve():
        words += ["--snakefile", str(snakefile), "--directory", str(workdir)]
    words += ["--report", report]
    if configfiles:
        words += ["--configfile", *map(str, configfiles)]
    return shlex.join(words)


def snakemake_executable(argv0: str, python: str) -> str:
    """How to call the Snakemake that runs this process: its script when argv[0] is one (a
    venv's ``bin/snakemake``, not on PATH after ``make``), else ``<python> -m snakemake``."""
    if Path(argv0).name == "snakemake" and Path(argv0).is_file():
        return str(Path(argv0).resolve())
    return f"{shlex.quote(python)} -m snakemake"


def _grouped(paths: Iterable[str]) -> list[str]:
    """``dir/stem.{a,b}`` for the files of a tables/figures folder, ``dir/ (n files)`` for a deeper folder."""
    by_stem: dict[tuple[str, str], list[str]] = defaultdict(list)
    deeper: dict[str, int] = defaultdict(int)
    for path in paths:
        p = Path(path)
        if p.parent.name not in _KINDS:
            deeper[str(p.parent)] += 1
        else:
            by_stem[(str(p.parent), p.stem)].append(p.suffix.lstrip("."))
    out = []
    for (parent, stem), exts in sorted(by_stem.items()):
        ext = exts[0] if len(exts) == 1 else "{" + ",".join(sorted(exts)) + "}"
        out.append(f"{parent}/{stem}.{ext}")
    out += [f"{folder}/ ({n} files)" for folder, n in sorted(deeper.items())]
    return out


def run_summary(
    outputs: Sequence[str],
    snakemake_log: LogFiles = None,
    failed: bool = False,
    root: str | os.PathLike = ".",
    report: str = REPORT,
    *,
    families: Mapping[str, Sequence[str]] | None = None,
    family_of: Callable[[str, str], str] | None = None,
    report_cmd: str | None = None,
) -> str:
    """The closing lines of a run: its tables and figures (those of ``outputs`` that exist under
    ``root``), how to build the report (``report_cmd``, see :func:`report_command`), and after a
    failure each family with final outputs not built (``families``: each family's final outputs),
    each failed job with its family (``family_of(rule, output)``), cause, fix and log, and
    Snakemake's log."""
    root = Path(root)
    made = [o for o in outputs if (root / o).is_file()]
    jobs = failed_job_details(snakemake_log) if failed else []
    head = "the run is complete"
    if failed:
        n = f"{len(jobs)} jobs" if len(jobs) > 1 else "a job"
        head = f"the run failed: {n} failed (exit 1); the jobs that do not depend on {'them' if len(jobs) > 1 else 'it'} ran"
    lines = ["", f"crucible: {head}"]
    for kind in _KINDS:
        mine = [o for o in made if kind in Path(o).parts]
        lines.append(f"  {kind} ({len(mine)}):")
        lines += [f"    {entry}" for entry in _grouped(mine)] or ["    none"]
    missing = len(outputs) - len(made)
    if missing:
        lines.append(
            f"  {missing} of the config's {len(outputs)} final outputs are not built (not asked for, or failed)"
        )
    built = root / report
    state = f"; {report} is there from an earlier call" if built.is_file() else ""
    command = report_cmd or f"snakemake --report {report} (with the run's --configfile)"
    lines.append(f"  report: {command}{state}")
    if failed and families:
        for family, outs in families.items():
            absent = [o for o in outs if not (root / o).is_file()]
            if absent:
                lines.append(f"  FAILED family {family}: {len(absent)} of its {len(outs)} final outputs not built")
    for job in jobs:
        lines.append(f"  FAILED {job.rule}" + (f": see {job.log}" if job.log else ""))
        family = family_of(job.rule, job.output) if family_of else ""
        where = [f"family: {family}"] if family else []
        where += [f"output: {job.output}"] if job.output else []
        if where:
            lines.append(f"    {'; '.join(where)}")
        cause, fix = cause_and_fix(job.log, root)
        if cause:
            lines.append(f"    cause: {cause}")
        if fix:
            lines.append(f"    fix: {fix}")
    for path in _log_files(snakemake_log):
        lines.append(f"  Snakemake's log: {path}")
    return "\n".join(lines)


def summary_facts(workflow: Any, config: dict, family_list: Sequence[Any], rule_families: dict, sources: dict) -> dict:
    """What the closing summary says beyond the outputs (the Snakefile's onsuccess/onerror pass it
    to :func:`run_summary`): each family's final outputs, the family of a failed job (a download's:
    the families its files are for), and the report command of this very run (the Snakemake
    running now, its --configfile files)."""
    import sys

    from crucible.dag import families
    from crucible.sources import workflow as sources_wf

    rule_family = {r.name: rule_families.get(os.path.basename(r.snakefile), "") for r in workflow.rules}
    names = [f.name for f in family_list]

    def family_of(rule: str, output: str) -> str:
        if rule == "fetch_artifact" and output:
            return ", ".join(sources_wf.download_families(sources, os.path.basename(output), names))
        return rule_family.get(rule, "")

    command = report_command(
        snakemake_executable(sys.argv[0], sys.executable),
        workflow.overwrite_configfiles,
        workflow.main_snakefile,
        os.getcwd(),
    )
    return {
        "families": {f.name: f.final_outputs(config) for f in family_list if families.enabled(config, f.name)},
        "family_of": family_of,
        "report_cmd": command,
    }
