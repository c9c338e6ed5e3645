"""Answers produced elsewhere (another lab's run, a web UI, a script) replayed as a backend.

``llm.models.<name>.path`` names a JSONL of ``{"id", "response"}`` lines; it may contain
``{benchmark}`` and ``{dataset}``, filled in per prompt set, so one model entry serves every
benchmark. Nothing is sent anywhere and nothing is cached: the file is the record.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from crucible.core.hashes import file_sha256
from crucible.llm.files import Completion, Prompt, read_replay


def replay_path(template: str, benchmark: str | None = None, dataset: str | None = None) -> str:
    return template.replace("{benchmark}", benchmark or "").replace("{dataset}", dataset or "")


class ReplayBackend:
    kind = "replay"

    def __init__(self, name: str, path: str | Path):
        self.name = name
        self.path = Path(path)
        self.model = f"replay:{file_sha256(self.path)[:16]}"

    def prepare(self) -> None:
        pass

    def generate(
        self,
        prompts: list[Prompt],
        params: dict[str, Any],
        on_done: Callable[[int, Completion], None] | None = None,
        budget=None,  # nothing is sent, so nothing to hold back
    ) -> list[Completion]:
        rows = read_replay(self.path, [p.id for p in prompts])
        out = []
        for i, p in enumerate(prompts):
            c = rows[p.id]
            c.model_id = c.model_id or self.name
            out.append(c)
            if on_done is not None:
                on_done(i, c)
        return out
