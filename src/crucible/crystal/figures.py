"""The crystal benchmark's figure: match rate by number of sites, per responder, with Wilson
95 % intervals, from the score summaries (:mod:`crucible.crystal.report`)."""

from __future__ import annotations

import os
from typing import Any, Iterable

import numpy as np

from crucible.core.io import InFile
from crucible.crystal.report import NSITE_BINS, nsite_bin, read_summaries
from crucible.crystal.scoring import DEFAULT_CONVENTION

# z of a two-sided 95 % interval
Z95 = 1.959963984540054


def wilson_interval(matched: int, total: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval of a binomial proportion (fractions, 0-1); (0, 1) without items.
    Unlike the normal approximation it stays inside [0, 1] and is not empty at 0 or n matches."""
    if total <= 0:
        return 0.0, 1.0
    p = matched / total
    denom = 1.0 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * np.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    # at 0 or n matches one bound is exactly 0 or 1; rounding would put it a hair off
    lo = 0.0 if matched == 0 else max(0.0, centre - half)
    hi = 1.0 if matched == total else min(1.0, centre + half)
    return float(lo), float(hi)


def chance_by_nsites(scores, items: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """``{size bin: (matched, total)}`` of the chance responder's first samples (rank 0, the
    default convention) from its CSP per-sample scores, binned by the items' number of sites: the
    floor a match rate at one answer per item is read against."""
    nsites = {str(it["id"]): int(it["meta"]["nsites"]) for it in items}
    first = scores[(scores["rank"] == 0) & (scores["convention"] == DEFAULT_CONVENTION)]
    out: dict[str, list[int]] = {}
    for ident, matched in zip(first["id"], first["matched"]):
        if str(ident) not in nsites:
            continue
        tally = out.setdefault(nsite_bin(nsites[str(ident)]), [0, 0])
        tally[0] += bool(matched)
        tally[1] += 1
    return {k: (m, n) for k, (m, n) in out.items()}


def match_rate_by_nsites_figure(
    summaries: list[dict[str, Any]], dataset: str, chance: dict[str, tuple[int, int]] | None = None
):
    """Bars of match rate per size bin and responder with Wilson 95 % intervals. A bin a responder
    matched nothing in has a floor line and a "0"; one it has no items in (while others do) is a
    hatched "n/a" slot. Artists carry ids (``gid``): ``rate|{generator}|{bin}`` (a bar),
    ``zero|…`` (the "0" and floor of an unmatched bin), ``not-evaluated|…`` (slot and label) and
    ``wilson95|{generator}`` (the interval lines, one per evaluated bin in bin order) and
    ``chance|{bin}`` (the chance floor across a bin's group, from :func:`chance_by_nsites`)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    labels = [nsite_bin(lo) for lo, _ in NSITE_BINS]
    present = [lab for lab in labels if any(_bin(s, lab) for s in summaries)]
    x = np.arange(len(present))
    width = 0.8 / max(1, len(summaries))
    evaluated = [[(j, _bin(s, lab)) for j, lab in enumerate(present) if _bin(s, lab)] for s in summaries]
    bounds = [[wilson_interval(int(b["matched"]), int(b["total"])) for _, b in done] for done in evaluated]
    # the axis ends above the highest interval (in steps of 10 %), so small rates stay legible
    chance = chance or {}
    floors = {lab: 100.0 * m / n for lab, (m, n) in chance.items() if n and lab in present}
    highest = max([hi for per in bounds for _, hi in per] + [f / 100.0 for f in floors.values()], default=1.0)
    top = 10.0 * np.ceil(100.0 * highest * 1.08 / 10.0)
    top = 100.0 if top >= 80.0 else float(top)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(present) + 3), 4.2))
    unevaluated = False
    for i, (s, done, per) in enumerate(zip(summaries, evaluated, bounds)):
        gen, color = s["generator"], f"C{i % 10}"
        slots = x + (i - (len(summaries) - 1) / 2) * width
        where = [slots[j] for j, _ in done]
        rates = [100.0 * b["matched"] / b["total"] for _, b in done]
        overall = f"{100.0 * s['matched'] / s['total']:.1f} % of {s['total']}" if s.get("total") else "no items"
        bars = ax.bar(where, rates, width, color=color, label=f"{gen} ({overall})")
        for patch, (j, _) in zip(bars.patches, done):
            patch.set_gid(f"rate|{gen}|{present[j]}")
        if done:
            low = [r - 100 * lo for r, (lo, _) in zip(rates, per)]
            high = [100 * hi - r for r, (_, hi) in zip(rates, per)]
            lines = ax.errorbar(where, rates, yerr=[low, high], fmt="none", ecolor="0.2", elinewidth=1, capsize=2.5)
            lines.lines[2][0].set_gid(f"wilson95|{gen}")
        for j, b in done:
            if b["matched"]:
                continue
            ident = f"zero|{gen}|{present[j]}"
            ax.plot(
                [slots[j] - width / 2, slots[j] + width / 2],
                [0, 0],
                color=color,
                lw=3,
                solid_capstyle="butt",
                gid=ident,
                clip_on=False,
            )
            ax.text(
                slots[j],
                0.012 * top,
                "0",
                ha="center",
                va="bottom",
                fontsize=8,
                color=color,
                fontweight="bold",
                gid=ident,
                zorder=4,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.3},
            )
        for j, lab in enumerate(present):
            if _bin(s, lab):
                continue
            unevaluated = True
            ident = f"not-evaluated|{gen}|{lab}"
            ax.bar(slots[j], top, width, fill=False, hatch="///", edgecolor="0.75", linewidth=0, gid=ident)
            ax.text(
                slots[j],
                0.012 * top,
                "n/a",
                ha="center",
                va="bottom",
                fontsize=7,
                color="0.3",
                rotation=90,
                gid=ident,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.3},
            )
    for j, lab in enumerate(present):
        if lab in floors:
            ax.hlines(
                floors[lab],
                x[j] - 0.45,
                x[j] + 0.45,
                colors="black",
                linestyles="--",
                lw=1.4,
                gid=f"chance|{lab}",
                zorder=5,
            )
    # the floor's value under each bin too: a floor of 0 lies under the bars' "0" marks
    ax.set_xticks(
        x,
        [
            f"{lab}\n(n={_bin_counts(summaries, lab)})" + (f"\n{floors[lab]:.0f} %" if lab in floors else "")
            for lab in present
        ],
    )
    floor_note = "; %: the chance floor, a random cell's 1st sample" if floors else ""
    ax.set_xlabel(f"sites in the reference cell (n: test items in the bin{floor_note})")
    ax.set_ylabel(f"match rate (%) [{DEFAULT_CONVENTION}]")
    ax.set_ylim(0, top)
    ax.set_title(f"{dataset}: StructureMatcher match rate by cell size")
    handles, _ = ax.get_legend_handles_labels()
    handles.append(ax.errorbar([], [], yerr=[], fmt="none", ecolor="0.2", capsize=2.5, label="Wilson 95 % interval"))
    handles.append(plt.Line2D([], [], color="0.4", lw=3, label='"0": no item matched'))
    if floors:
        handles.append(
            plt.Line2D([], [], color="black", ls="--", lw=1.4, label="chance floor: a random cell, 1st sample")
        )
    if unevaluated:
        handles.append(Patch(fill=False, hatch="///", edgecolor="0.6", label="n/a: no items of that responder"))
    ax.legend(handles=handles, fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def _bin(summary: dict[str, Any], label: str) -> dict[str, Any] | None:
    """A size bin's scores, or None where the responder has no items in it."""
    block = summary["by_nsites"].get(label)
    return block if block and block.get("total") else None


def _bin_counts(summaries: list[dict[str, Any]], label: str) -> str:
    """A bin's item count; the counts of the responders evaluated on it in order ("10/8") where
    they differ (a responder without items there has its "n/a" in the plot)."""
    counts = [int(b["total"]) for b in (_bin(s, label) for s in summaries) if b]
    return str(counts[0]) if len(set(counts)) == 1 else "/".join(map(str, counts))


def write_match_rate_figure(
    inputs: Iterable[InFile],
    dataset: str,
    out_png: str | os.PathLike,
    out_pdf: str | os.PathLike,
    chance: InFile | None = None,
    prompts: InFile | None = None,
) -> None:
    """The match rate by number of sites of the summary JSONs ``inputs`` (a bar each), as PNG and
    PDF, with the chance floor per size bin where the chance responder's CSP scores are given.

    Args:
        chance: the chance responder's CSP per-sample scores: results/crystal/{dataset}/csp/chance.parquet
        prompts: the dataset's test items, for their number of sites: results/crystal/{dataset}/prompts.jsonl
        out_png: the figure to write as PNG: results/figures/crystal_{dataset}_match_by_nsites.png
        out_pdf: the same figure as PDF: results/figures/crystal_{dataset}_match_by_nsites.pdf
        inputs: as in :func:`crucible.crystal.report.write_table_from_files`
        dataset: as in :func:`crucible.crystal.report.write_table_from_files`
    """
    from crucible.report.figures import save_figure

    floor = None
    if chance and prompts:
        from crucible.core.io import read_parquet
        from crucible.crystal.items import read_jsonl

        floor = chance_by_nsites(read_parquet(chance), read_jsonl(prompts))
    save_figure(match_rate_by_nsites_figure(read_summaries(inputs), dataset, floor), out_png, out_pdf)
