"""The few lines a run ends with: where its tables, figures and report are, and what failed.

The Snakefile's ``onsuccess``/``onerror`` handlers print :func:`run_summary` of the run's final
outputs (the targets of ``rule all`` for its config, so a table of a model that is not in the run
is never named) and of Snakemake's own log, which names each failed job and its log file.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from pathlib import Path
from typing import Iterable, Sequence

REPORT = "results/report.zip"
_KINDS = ("tables", "figures")
_ERROR_RE = re.compile(r"^Error in rule (\S+):$")
_LOG_RE = re.compile(r"^\s+log: (.+?)(?: \(check log file\(s\) for error details\))?$")


LogFiles = str | os.PathLike | Sequence[str | os.PathLike] | None


def _log_files(snakemake_log: LogFiles) -> list[Path]:
    """Snakemake hands its handlers one log path or a list of them (Snakemake 9: a list)."""
    if not snakemake_log:
        return []
    if isinstance(snakemake_log, (str, os.PathLike)):
        snakemake_log = [snakemake_log]
    return [Path(p) for p in snakemake_log if p]


def failed_jobs(snakemake_log: LogFiles) -> list[tuple[str, str]]:
    """(rule, its log files) of every job Snakemake's log reports as failed, in order."""
    lines = []
    for path in _log_files(snakemake_log):
        if path.is_file():
            lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    failed: list[tuple[str, str]] = []
    rule = None
    for line in lines:
        m = _ERROR_RE.match(line)
        if m:
            if rule:
                failed.append((rule, ""))
            rule = m.group(1)
            continue
        m = _LOG_RE.match(line)
        if rule and m:
            failed.append((rule, m.group(1)))
            rule = None
        elif rule and not line.startswith(" "):
            failed.append((rule, ""))
            rule = None
    if rule:
        failed.append((rule, ""))
    return list(dict.fromkeys(failed))


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
) -> str:
    """The closing lines of a run: its tables and figures (those of ``outputs`` that exist under
    ``root``), how to build the report, the failed jobs with their logs, and Snakemake's log."""
    root = Path(root)
    made = [o for o in outputs if (root / o).is_file()]
    lines = ["", "crucible: the run " + ("stopped: a job failed" if failed else "is complete")]
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
    lines.append(f"  report: snakemake --report {report} (with the run's --configfile) builds it{state}")
    for rule, log in failed_jobs(snakemake_log) if failed else []:
        lines.append(f"  FAILED {rule}: see {log}" if log else f"  FAILED {rule}")
    for path in _log_files(snakemake_log):
        lines.append(f"  Snakemake's log: {path}")
    return "\n".join(lines)
