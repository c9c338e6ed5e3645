"""The discovery jobs: a potential's dimer curves, and the diatomics table and figures."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from crucible.core.io import InFile

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
    from crucible.core.errors import ConfigError
    from crucible.core.io import write_bytes
    from crucible.discovery.curves import compute_curves, dumps, symbols
    from crucible.potentials.registry import load_potential

    every = symbols()
    names = every if elements.strip().lower() == "all" else [s.strip() for s in elements.split(",") if s.strip()]
    unknown = [s for s in names if s not in every]
    if unknown or not names:
        raise ConfigError(f"--elements: {', '.join(unknown) or 'empty'} not among H…U")
    names = [s for s in every if s in set(names)]  # by atomic number, as the leaderboard's file
    t0 = time.process_time()
    pot = load_potential(potential, device=device, threads=threads, custom=custom_potentials or {})
    t_load = time.process_time() - t0
    results = compute_curves(pot, names)
    write_bytes(dumps(results), out)
    meta = results["run_metadata"]["crucible"]
    log.info(
        "%s: %d curves, %d not covered, %d failed, %d curves with non-finite points, %d with implausible ones; CPU %.1f s (load %.1f s) on %s -> %s",
        potential,
        len(results["homo-nuclear"]),
        len(meta["not_covered"]),
        len(meta["failed"]),
        len(meta["failed_points"]),
        len(meta["implausible_points"]),
        time.process_time() - t0,
        t_load,
        pot.device,
        out,
    )


def scored(inputs: list[InFile], ref: dict) -> dict[str, dict[str, Any]]:
    """A row of the diatomics table per curves file: the metrics' means as the leaderboard's
    code computes them, the elements scored and run, the flagged points by curve, the device."""
    from crucible.discovery.curves import flagged_in_window, flagged_points, homo_curves, read_curves
    from crucible.discovery.metrics import means, per_element
    from crucible.discovery.report import model_of

    out = {}
    for path in sorted(inputs, key=lambda p: model_of(p)):
        data = read_curves(path)
        values = per_element(homo_curves(data), ref)
        meta = (data.get("run_metadata") or {}).get("crucible") or {}
        out[model_of(path)] = {
            **means(values),
            "n_elements": len(values),
            "flagged": flagged_points(data),
            "n_flagged_scored": flagged_in_window(data),
            "device": meta.get("device", "?"),
        }
    return out


def write_table(
    inputs: list[InFile], reference: InFile, cards: list[InFile], out_csv: str, out_md: str, out_tex: str
) -> None:
    """``crucible discovery table``: the diatomics table, a row per curves file beside the
    published rows of the model cards.

    Args:
        inputs: curves files results/discovery/diatomics/{potential}.json.gz
        reference: the leaderboard's PBE dimer curves (pinned: discovery/diatomics/pbe-reference)
        cards: the leaderboard's model cards (pinned: discovery/cards/<model>), in any order
        out_csv: the table as CSV
        out_md: the table as Markdown
        out_tex: the table as LaTeX
    """
    from crucible.discovery.data import CARD_ROLE_PREFIX, published_row
    from crucible.discovery.report import HEADERS, TITLE, caption, flagged_text, table
    from crucible.report.tables import write_table as write
    from crucible.sources.pinned_files import roles

    by_file = {}
    for role, pin in roles(prefix=CARD_ROLE_PREFIX).items():
        by_file[Path(pin.location).name] = role
    published = []
    for card in cards:
        row = published_row(card, by_file.get(Path(card).name))
        if row is not None:
            published.append(row)
    from crucible.discovery.data import read_reference

    ours = scored(inputs, read_reference(reference))
    df = table(ours, published)
    write(
        df,
        csv=out_csv,
        md=out_md,
        tex=out_tex,
        title=TITLE,
        caption=caption(df, flagged_text(ours)),
        headers=HEADERS,
        significant=4,
    )


def write_curve_figure(curves: InFile, reference: InFile, out_png: str, out_pdf: str) -> None:
    """``crucible discovery curves-figure``: every dimer curve of one potential against PBE.

    Args:
        curves: the potential's curves file results/discovery/diatomics/{potential}.json.gz
        reference: as in :func:`crucible.discovery.diatomics_jobs.write_table`
        out_png: the grid as PNG
        out_pdf: the grid as PDF
    """
    from crucible.discovery.curves import homo_curves, read_curves, symbols
    from crucible.discovery.data import read_reference
    from crucible.discovery.report import curve_grid, model_of
    from crucible.report.figures import save_figure

    data = read_curves(curves)
    missing = (data.get("run_metadata") or {}).get("excluded_formula_reasons") or {}
    fig = curve_grid(model_of(curves), homo_curves(data), read_reference(reference), symbols(), missing)
    save_figure(fig, out_png, out_pdf)


def write_metrics_figure(table: InFile, out_png: str, out_pdf: str) -> None:
    """``crucible discovery metrics-figure``: each metric of ours beside the published rows.

    Args:
        table: the diatomics table's CSV
        out_png: the figure as PNG
        out_pdf: the figure as PDF
    """
    from crucible.core import reading
    from crucible.discovery.report import metrics_figure
    from crucible.report.figures import save_figure

    save_figure(metrics_figure(reading.read_csv(table, keep_default_na=False, na_values=[""])), out_png, out_pdf)
