"""The scoring worker processes side by side: what the audit, METRe and relax-then-match run their
matcher calls, primitive reductions and structure builds on. Each thread drives its own
:class:`~crucible.crystal.scoring.MatcherWorker`, so every call keeps its own time limit, and the
results come back in the order of the jobs, whatever the number of workers."""

from __future__ import annotations

from typing import Any

from crucible.crystal.scoring import TIMEOUT_S, MatcherWorker


def run_on_workers(
    jobs: list,
    task,
    workers: int = 1,
    timeout: float = TIMEOUT_S,
    progress: bool = False,
    desc: str = "match",
    make=None,
) -> tuple[list, list]:
    """``task(context, job)`` for every job, results in ``jobs`` order, on ``workers`` matcher
    processes side by side: each thread drives its own :class:`MatcherWorker` (so every call keeps
    its own time limit), ``make(worker)`` the thread's context (default: the worker). Returns
    (results, contexts); the results do not depend on ``workers``."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from tqdm import tqdm

    local = threading.local()
    made: list[tuple[MatcherWorker, Any]] = []
    lock = threading.Lock()

    def run(job):
        if not hasattr(local, "context"):
            worker = MatcherWorker(timeout)
            local.context = make(worker) if make else worker
            with lock:
                made.append((worker, local.context))
        return task(local.context, job)

    try:
        if workers <= 1:  # no thread: the worker process is forked from a single-threaded parent
            results = [run(job) for job in tqdm(jobs, desc=desc, disable=not progress)]
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                results = list(tqdm(pool.map(run, jobs), total=len(jobs), desc=desc, disable=not progress))
    finally:
        for worker, _ in made:
            worker.close()
    return results, [context for _, context in made]


BATCH = 16  # calls per round trip to a worker in map_calls: a call is milliseconds, a round trip as much


def map_calls(
    function,
    arg_list: list[tuple],
    workers: int = 1,
    timeout: float = TIMEOUT_S,
    progress: bool = False,
    desc: str = "match",
    failed: Any = None,
) -> list[tuple[Any, str | None]]:
    """``(function(*args), None)`` for each of ``arg_list``, in order, or ``(failed, reason)``
    past the time limit (each call its own, :meth:`MatcherWorker.call_each`), on ``workers``
    matcher processes, :data:`BATCH` calls per round trip."""
    batches = [arg_list[n : n + BATCH] for n in range(0, len(arg_list), BATCH)]
    results, _ = run_on_workers(
        batches, lambda worker, batch: worker.call_each(function, batch, failed), workers, timeout, progress, desc
    )
    return [r for batch in results for r in batch]
