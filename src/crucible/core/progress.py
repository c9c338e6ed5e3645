"""Progress in the logs of long jobs, at a rate a person can read.

``CRUCIBLE_PROGRESS_S`` (default 30) is the least time between two progress lines of a loop
(epochs, iterations); ``CRUCIBLE_HEARTBEAT_S`` (default 60) the interval of the "still fitting"
line for estimators that cannot report progress themselves.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from contextlib import contextmanager
from typing import Iterator


def _seconds(variable: str, default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(variable, default)))
    except ValueError:
        return default


class Throttle:
    """``ready()`` is true at most once per interval (and always the first time)."""

    def __init__(self, every_s: float | None = None) -> None:
        self.every_s = _seconds("CRUCIBLE_PROGRESS_S", 30.0) if every_s is None else every_s
        self._last = -float("inf")

    def ready(self, last: bool = False) -> bool:
        now = time.monotonic()
        if last or now - self._last >= self.every_s:
            self._last = now
            return True
        return False


@contextmanager
def heartbeat(logger: logging.Logger, what: str, every_s: float | None = None) -> Iterator[None]:
    """Log ``what: still fitting (N s)`` every interval until the block ends."""
    every_s = _seconds("CRUCIBLE_HEARTBEAT_S", 60.0) if every_s is None else every_s
    stop = threading.Event()
    started = time.monotonic()

    def beat() -> None:
        while not stop.wait(every_s):
            logger.info("%s: still fitting (%.0f s)", what, time.monotonic() - started)

    thread = threading.Thread(target=beat, name="crucible-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
