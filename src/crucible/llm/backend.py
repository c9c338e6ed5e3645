"""What a backend is to the stage: the :class:`Backend` protocol every backend provides
(openai_backend, transformers_backend, replay) and the :class:`FailureBudget` they share with it.

Below both the stage (``generate``) and the backends, so that neither imports the other.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from crucible.core.errors import CrucibleError
from crucible.llm.files import Completion, Prompt


class StructuredOutputError(CrucibleError):
    """Structured output was asked for and cannot be had: no schema, or a server that ignores it."""


def too_many_failed(failed: int, n_items: int, max_failed_fraction: float) -> bool:
    """The job's verdict, one formula for the stop while sending and the check at the end."""
    return n_items > 0 and failed / n_items > float(max_failed_fraction)


class FailureBudget:
    """How many items may fail before the job is bound to fail; then nothing more is sent.

    Backends ``record`` each outcome and check ``stopped`` before each request (and before each
    retry), so that a job over its ``max_failed_fraction`` stops paying for answers it will not
    use; the items it did not send come back as failures saying why (``not_sent``). ``stop``
    also serves the stage itself (a cache that cannot be written). Thread-safe.
    """

    def __init__(self, max_failed_fraction: float | None, n_items: int):
        self.max_failed_fraction = max_failed_fraction  # None: never stop for failures
        self.n_items = n_items
        self.failed = 0
        self.reason: str | None = None
        self.not_sent_ids: list[str] = []
        self._event = threading.Event()
        self._lock = threading.Lock()

    @property
    def stopped(self) -> bool:
        return self._event.is_set()

    def stop(self, reason: str) -> None:
        with self._lock:
            if self.reason is None:
                self.reason = reason
        self._event.set()

    def record(self, c: Completion) -> None:
        if c.error is None:
            return
        with self._lock:
            self.failed += 1
            over = self.max_failed_fraction is not None and too_many_failed(
                self.failed, self.n_items, self.max_failed_fraction
            )
        if over:
            self.stop(f"{self.failed} of {self.n_items} items had already failed, more than max_failed_fraction allows")

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if the job stops meanwhile."""
        self._event.wait(seconds)

    def not_sent(self, where: str, item_id: str) -> Completion:
        with self._lock:
            self.not_sent_ids.append(item_id)
        return Completion(item_id, error=f"{where}: not sent: {self.reason}")


class Backend(Protocol):
    """What every backend provides (openai_backend, transformers_backend, replay)."""

    kind: str  # "openai" | "transformers" | "replay": part of every cache key
    model: str  # what is asked for: the served model name, or the checkpoint's name (or role)@sha256:<hex>

    def prepare(self) -> None:
        """Import the client or load the weights; called only when something is not cached."""

    def generate(
        self,
        prompts: list[Prompt],
        params: dict[str, Any],
        on_done: Callable[[int, Completion], None] | None = None,
        budget: FailureBudget | None = None,
    ) -> list[Completion]:
        """One Completion per prompt, in order; ``on_done(i, completion)`` as each one finishes
        (from a worker thread where the backend has them, before that worker asks for another);
        nothing more is asked once ``budget.stopped`` (those items: ``budget.not_sent``)."""
