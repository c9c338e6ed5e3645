"""The scoring worker pool: results in job order whatever the number of processes, each call of a
batch with its own time limit (a slow call times out alone, a hanging batch is redone call by
call), and a pool of two closes at once (workers forked one at a time)."""

from __future__ import annotations

import time

from crucible.crystal.pool import map_calls, run_on_workers
from crucible.crystal.scoring import MatcherWorker


def _nap(seconds: float, value: int) -> int:
    time.sleep(seconds)
    return value


def test_results_come_in_job_order_on_any_number_of_workers():
    args = [(0.0, n) for n in range(40)]
    one = map_calls(_nap, args, workers=1)
    assert one == map_calls(_nap, args, workers=2) == [(n, None) for n in range(40)]


def test_each_call_of_a_batch_keeps_its_own_time_limit():
    with MatcherWorker(timeout=0.4) as worker:
        # the slow call is past its limit though the batch is within the sum of theirs
        assert worker.call_each(_nap, [(0.0, 1), (0.6, 2), (0.0, 3)], failed=-1) == [
            (1, None),
            (-1, "timeout"),
            (3, None),
        ]
        # a call that hangs past the whole batch's limit: the batch is redone call by call
        assert worker.call_each(_nap, [(0.0, 1), (5.0, 2)], failed=-1) == [(1, None), (-1, "timeout")]
        assert worker.restarts >= 2


def test_a_pool_of_two_closes_at_once(monkeypatch):
    """A worker forked while another's start was under way kept that one's pipe ends open, and
    its close() waited 5 s for an exit it could not see, then killed it (a race: tried a few
    times). Each worker must have left on its own when close() ends it: exited, not still running
    to be killed after the wait."""
    exits = []
    kill = MatcherWorker._kill

    def recording(self):
        if self._proc is not None:
            exits.append(self._proc.exitcode)  # None: still running after close()'s wait
        kill(self)

    monkeypatch.setattr(MatcherWorker, "_kill", recording)
    for _ in range(4):
        results, workers = run_on_workers(list(range(8)), lambda w, n: w.call(abs, -n)[0], workers=2)
        assert results == list(range(8)) and len(workers) == 2
    assert len(exits) == 8 and None not in exits, exits
