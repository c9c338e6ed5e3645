"""Each ``crucible`` command's own CPU seconds, for measuring a run: with ``CRUCIBLE_CPU_LOG`` set,
every command appends one JSON line (command, argv, exit status, CPU seconds) to that file.

What ``benchmarks/bench_cli_startup.py --runs`` sums. Not the ``cpu_time`` of Snakemake's
``benchmark:`` files: Snakemake samples a job every 0.5 s for its first 15 s and every 30 s after,
so it records nothing for a job under 0.5 s and at most ~15 s for a 40-s fit.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
from pathlib import Path
from typing import Collection, Iterator

CPU_LOG_VAR = "CRUCIBLE_CPU_LOG"
# where a measured run keeps it, under its working directory (README, benchmarks/)
RUN_LOG = Path("logs") / "job_cpu.jsonl"


@contextlib.contextmanager
def recorded(argv: list[str], groups: Collection[str]) -> Iterator[dict[str, int]]:
    """Around a command's whole run (``argv``: group, verb, options): its CPU is logged at the end,
    whatever the exit (the caller sets ``["returncode"]``; an escaping exception is 1, argparse's
    exit its own code)."""
    outcome = {"returncode": 1}
    try:
        yield outcome
    except SystemExit as exc:  # argparse: a usage error (2) or --help (0)
        outcome["returncode"] = exc.code if isinstance(exc.code, int) else 1
        raise
    finally:
        if argv and argv[0] in groups:
            log_cpu(list(argv), outcome["returncode"])


def log_cpu(command: list[str], returncode: int) -> None:
    """Append this process's CPU seconds (user + system, start-up and waited-for children
    included) to ``$CRUCIBLE_CPU_LOG``, if set."""
    path = os.environ.get(CPU_LOG_VAR)
    if not path:
        return
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    record = {
        "command": " ".join(command[:2]),
        "argv": command,
        "cpu_s": round(own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime, 3),
        "returncode": returncode,
    }
    # One short line in append mode: the lines of jobs that end at once do not interleave.
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, sort_keys=True) + "\n")
