"""One pending re-evaluation timer for Snakemake's job scheduler, not one per scheduling round.

Snakemake 9's scheduler (``snakemake.scheduling.job_scheduler.JobScheduler``) rate-limits job
starts (``--max-jobs-per-timespan``, on by default at 100/1s). Each scheduling round that leaves
jobs waiting starts a new ``threading.Timer`` that wakes the scheduler one timespan later, and
that wake-up is itself a round that starts another timer. So the timers never go away: every
job that finishes adds one more wake-up per second for the rest of the run. A round re-reads the
params and resources of every ready job (our params compute each job's identity), so the
scheduler's own CPU grows with the square of the number of jobs (benchmarks/bench_scheduler.py).

A round needs at most one pending timer (a wake-up re-evaluates everything), so
:func:`install` keeps one, as a daemon thread so that it never holds up Snakemake's exit.
Nothing else changes: jobs still start as soon as a job finishes (that releases the scheduler
directly) and the rate limit still holds.
"""

from __future__ import annotations

import threading
from typing import Any

# Snakemake versions whose scheduler this was read from; on another, install() does nothing.
KNOWN_VERSIONS = ("9.",)


def _one_pending_timer(scheduler: Any, delay: float) -> None:
    pending = getattr(scheduler, "_crucible_timer", None)
    if pending is not None and pending.is_alive():
        return
    timer = threading.Timer(delay, scheduler._open_jobs.release)
    timer.daemon = True
    scheduler._crucible_timer = timer
    timer.start()


def install() -> bool:
    """Replace the scheduler's timer method, where this Snakemake has it; True if replaced."""
    import snakemake
    from snakemake.scheduling import job_scheduler

    scheduler = getattr(job_scheduler, "JobScheduler", None)
    if not snakemake.__version__.startswith(KNOWN_VERSIONS) or not hasattr(scheduler, "_schedule_reevalutation"):
        return False
    scheduler._schedule_reevalutation = _one_pending_timer
    return True
