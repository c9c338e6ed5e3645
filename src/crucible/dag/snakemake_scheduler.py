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

Why a patched method and not a scheduler plugin: Snakemake's scheduler plugin interface
(``snakemake-interface-scheduler-plugins`` 2.0: ``SchedulerBase.select_jobs`` and
``dag_updated``) chooses which ready jobs start; the timer belongs to ``JobScheduler`` itself,
which no plugin reaches. So the patch is guarded instead: it replaces the method only when the
installed one is, to the character, the one read here (its source's SHA-256), and stops
planning with the reason on any other, since a changed method may no longer leak timers, or may
rely on each one.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import threading
from typing import Any

from crucible.core.errors import ConfigError

# The SHA-256 of ``inspect.getsource(JobScheduler._schedule_reevalutation)`` in the Snakemake
# versions this was read from (9.27.1; the method is unchanged since 9.0):
#     def _schedule_reevalutation(self, delay: int) -> None:
#         threading.Timer(delay, lambda: self._open_jobs.release()).start()
PATCHED_SOURCE_SHA256 = "bb09f100ea5766bbab2a2fa26d28d2a7488140ed6e74224adcebab65112bbf69"
METHOD = "_schedule_reevalutation"  # Snakemake's spelling
OFF = "CRUCIBLE_SCHEDULER_FIX"  # "off": run with Snakemake's scheduler as it is


class SchedulerChanged(ConfigError):
    """The installed Snakemake's scheduler is not the one the fix was written for."""


def _one_pending_timer(scheduler: Any, delay: float) -> None:
    pending = getattr(scheduler, "_crucible_timer", None)
    if pending is not None and pending.is_alive():
        return
    timer = threading.Timer(delay, scheduler._open_jobs.release)
    timer.daemon = True
    scheduler._crucible_timer = timer
    timer.start()


def method_digest(scheduler: Any) -> str | None:
    """The SHA-256 of the scheduler method's source; None where it has no such method."""
    method = getattr(scheduler, METHOD, None)
    if method is None:
        return None
    try:
        source = inspect.getsource(method)
    except (OSError, TypeError):
        return "no source"
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def install(job_scheduler: Any = None) -> bool:
    """Replace the scheduler's timer method; True if replaced, False when switched off
    (``CRUCIBLE_SCHEDULER_FIX=off``). Raises :class:`SchedulerChanged` when the installed method
    is not the one read here."""
    if os.environ.get(OFF, "").strip().lower() == "off":
        return False
    if job_scheduler is None:
        from snakemake.scheduling import job_scheduler
    import snakemake

    scheduler = getattr(job_scheduler, "JobScheduler", None)
    if getattr(scheduler, METHOD, None) is _one_pending_timer:
        return True
    digest = method_digest(scheduler)
    if digest != PATCHED_SOURCE_SHA256:
        found = "has no such method" if digest is None else f"has another one (source SHA-256 {digest})"
        raise SchedulerChanged(
            f"Snakemake {snakemake.__version__}'s JobScheduler.{METHOD} is not the method crucible's "
            f"scheduler fix was written for: it {found}, and crucible.dag.snakemake_scheduler replaces "
            f"that method (one pending wake-up timer instead of one per round, which makes a long "
            f"run's scheduling CPU grow with the square of its jobs). Install the Snakemake of "
            f"requirements.lock, or set {OFF}=off to run with Snakemake's scheduler as it is."
        )
    setattr(scheduler, METHOD, _one_pending_timer)
    return True
