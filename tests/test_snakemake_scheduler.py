"""Snakemake's scheduler keeps one pending re-evaluation timer (crucible.dag.snakemake_scheduler)."""

from __future__ import annotations

import threading
import time
import types

import pytest
from snakemake.scheduling import job_scheduler

from crucible.dag import snakemake_scheduler


class FakeScheduler:
    def __init__(self):
        self._open_jobs = threading.Semaphore(0)


def test_the_pinned_snakemake_has_the_method_that_is_replaced():
    """An upgrade that renames or drops it fails here, not silently in a slow run."""
    original = job_scheduler.JobScheduler._schedule_reevalutation
    try:
        assert snakemake_scheduler.install() is True
        assert job_scheduler.JobScheduler._schedule_reevalutation is snakemake_scheduler._one_pending_timer
    finally:
        job_scheduler.JobScheduler._schedule_reevalutation = original


def test_upstream_starts_a_timer_per_round_and_ours_one():
    """The cause, shown on the upstream method: every round starts another timer thread (each one
    wakes the scheduler once more per timespan); the replacement keeps one, a daemon."""
    upstream = job_scheduler.JobScheduler._schedule_reevalutation
    fake = FakeScheduler()
    before = threading.active_count()
    for _ in range(20):
        upstream(fake, 0.3)
    assert threading.active_count() - before >= 20
    time.sleep(0.6)
    assert sum(fake._open_jobs.acquire(blocking=False) for _ in range(40)) == 20  # 20 wake-ups

    fake = FakeScheduler()
    before = threading.active_count()
    for _ in range(20):
        snakemake_scheduler._one_pending_timer(fake, 0.3)
    assert threading.active_count() - before == 1
    assert fake._crucible_timer.daemon  # never holds up Snakemake's exit
    time.sleep(0.6)
    assert sum(fake._open_jobs.acquire(blocking=False) for _ in range(40)) == 1  # one wake-up
    snakemake_scheduler._one_pending_timer(fake, 0.05)  # once it fired, the next round arms a new one
    time.sleep(0.3)
    assert fake._open_jobs.acquire(blocking=False)


def _module_with(method):
    class JobScheduler:
        pass

    if method is not None:
        JobScheduler._schedule_reevalutation = method
    return types.SimpleNamespace(JobScheduler=JobScheduler)


def test_another_scheduler_method_stops_planning_with_the_reason(monkeypatch):
    """The guard: a Snakemake whose method differs from the one read (or lacks it) is refused
    loudly, not patched blindly nor left slow without a word; switched off, nothing is touched."""
    monkeypatch.delenv(snakemake_scheduler.OFF, raising=False)

    def _schedule_reevalutation(self, delay: int) -> None:
        threading.Timer(delay, self._open_jobs.release).start()  # another body

    changed = _module_with(_schedule_reevalutation)
    with pytest.raises(snakemake_scheduler.SchedulerChanged, match=r"has another one \(source SHA-256 [0-9a-f]{64}\)"):
        snakemake_scheduler.install(changed)
    assert changed.JobScheduler._schedule_reevalutation is _schedule_reevalutation
    with pytest.raises(snakemake_scheduler.SchedulerChanged, match="has no such method.*CRUCIBLE_SCHEDULER_FIX=off"):
        snakemake_scheduler.install(_module_with(None))
    monkeypatch.setenv(snakemake_scheduler.OFF, "off")
    assert snakemake_scheduler.install(changed) is False
    assert changed.JobScheduler._schedule_reevalutation is _schedule_reevalutation
