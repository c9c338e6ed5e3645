"""Each ``crucible`` command's own CPU seconds, for measuring a run: with ``CRUCIBLE_CPU_LOG`` set,
every command appends one JSON line (command, argv, exit status, CPU seconds, and the CPU seconds
of checking its inputs against their identity records and of writing its own) to that file.

What ``benchmarks/bench_cli_startup.py --runs`` sums. Not the ``cpu_time`` of Snakemake's
``benchmark:`` files: Snakemake samples a job every 0.5 s for its first 15 s and every 30 s after,
so it records nothing for a job under 0.5 s and at most ~15 s for a 40-s fit.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
from pathlib import Path
from typing import Collection, Iterator

CPU_LOG_VAR = "CRUCIBLE_CPU_LOG"
# where a measured run keeps it, under its working directory (README, benchmarks/)
RUN_LOG = Path("logs") / "job_cpu.jsonl"


@contextlib.contextmanager
def recorded(argv: list[str], groups: Collection[str]) -> Iterator[dict[str, float]]:
    """Around a command's whole run (``argv``: group, verb, options): its CPU is logged at the end,
    whatever the exit (the caller sets ``["returncode"]``; an escaping exception is 1, argparse's
    exit its own code; keys ending ``_cpu_s`` the caller sets are parts of it). A log that cannot be written stops the command before its work, in one
    line (exit 2): a measured run never loses a job's line unnoticed."""
    path = os.environ.get(CPU_LOG_VAR) if argv and argv[0] in groups else None
    if path:
        _append(path, "")  # creates the folder and the file
    outcome = {"returncode": 1}
    try:
        yield outcome
    except SystemExit as exc:  # argparse: a usage error (2) or --help (0)
        outcome["returncode"] = exc.code if isinstance(exc.code, int) else 1
        raise
    finally:
        if path:
            parts = {k: round(v, 4) for k, v in outcome.items() if k.endswith("_cpu_s")}
            _append(path, json.dumps({**cpu_record(list(argv), outcome["returncode"]), **parts}, sort_keys=True) + "\n")


def cpu_record(command: list[str], returncode: int) -> dict:
    """This process's CPU seconds so far (user + system, start-up and waited-for children included)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "command": " ".join(command[:2]),
        "argv": command,
        "cpu_s": round(own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime, 3),
        "returncode": returncode,
    }


def _append(path: str, text: str) -> None:
    # One short line in append mode: the lines of jobs that end at once do not interleave.
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        print(f"crucible: error: {CPU_LOG_VAR}={path}: cannot append to it ({exc.strerror or exc})", file=sys.stderr)
        raise SystemExit(2) from None
