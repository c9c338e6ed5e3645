"""The potential a catalysis job runs: registered or the user's own, loaded the one way every
job loads one (torch configured, device resolved). ``relax`` and ``relative`` both load theirs
here, so where potentials come from is named in one place."""

from __future__ import annotations

from typing import Any, Mapping


def load(
    model: str,
    device: str | None = None,
    threads: int | None = None,
    custom_potentials: Mapping[str, Any] | None = None,
):
    """The potential ``model`` on ``device`` with ``threads`` torch CPU threads; a user's potential
    is found in ``custom_potentials`` (config ``potentials:``, the job's own entry)."""
    from crucible.potentials.registry import load_potential

    return load_potential(model, device=device, threads=threads, custom=dict(custom_potentials or {}))
