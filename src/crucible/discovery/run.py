"""The discovery jobs: a potential's dimer curves, and the diatomics table and figures."""

from __future__ import annotations

import logging
import time
from typing import Any

from crucible.io import InFile

log = logging.getLogger(__name__)


def write_curves(
    potential: str,
    out: str,
    device: str | None = None,
    threads: int | None = None,
    custom_potentials: dict[str, Any] | None = None,
    elements: str = "all",
) -> None:
    """``crucible discovery curves``: the homonuclear dimer curves H…U of one potential
    (``custom_potentials``: a user's entry named ``potential``), in the leaderboard's
    prediction format.

    Args:
        potential: registered potential (emt, chgnet-0.3.0, sevennet-0, ...) or a user's
        out: the curves file to write: results/discovery/diatomics/{potential}.json.gz
        device: cpu or cuda (default: cuda when available)
        threads: torch CPU threads
        custom_potentials: JSON of config's potentials: entry of a user's potential named by --potential
        elements: 'all' (H…U) or comma-separated symbols, e.g. H,Cu (a slice, for tests)
    """
    from crucible.discovery.curves import compute_curves, dumps, symbols
    from crucible.errors import ConfigError
    from crucible.io import write_bytes
    from crucible.potentials.registry import load_potential

    every = symbols()
    names = every if elements.strip().lower() == "all" else [s.strip() for s in elements.split(",") if s.strip()]
    unknown = [s for s in names if s not in every]
    if unknown or not names:
        raise ConfigError(f"--elements: {', '.join(unknown) or 'empty'} not among H…U")
    t0 = time.process_time()
    pot = load_potential(potential, device=device, threads=threads, custom=custom_potentials or {})
    t_load = time.process_time() - t0
    results = compute_curves(pot, names)
    write_bytes(dumps(results), out)
    meta = results["run_metadata"]["crucible"]
    log.info(
        "%s: %d curves, %d not covered, %d failed, %d curves with non-finite points; CPU %.1f s (load %.1f s) on %s -> %s",
        potential,
        len(results["homo-nuclear"]),
        len(meta["not_covered"]),
        len(meta["failed"]),
        len(meta["failed_points"]),
        time.process_time() - t0,
        t_load,
        pot.device,
        out,
    )
