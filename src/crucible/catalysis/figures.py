"""Figures of the catalysis benchmark: parity plots (all potentials, gas-shifted, one per
potential) and the threshold sensitivity of CatBench's classes, from the ``score`` outputs.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np
import pandas as pd

from crucible.core.io import InFile


def _parity_axes(ax, df: pd.DataFrame, title: str, by_adsorbate: bool) -> None:
    ok = df[df["class"] != "calculation_error"]
    x, y = ok["dft_ads_eng"].to_numpy(float), ok["mlip_ads_eng"].to_numpy(float)
    if by_adsorbate:
        for ads in sorted(ok["adsorbate"].unique()):
            m = (ok["adsorbate"] == ads).to_numpy()
            ax.scatter(x[m], y[m], s=18, label=ads, alpha=0.8)
        ax.legend(fontsize=7, frameon=False)
    else:
        normal = (ok["class"] == "normal").to_numpy()
        ax.scatter(x[normal], y[normal], s=18, label="normal", alpha=0.8)
        ax.scatter(x[~normal], y[~normal], s=18, marker="x", label="anomaly / migration", alpha=0.8)
        ax.legend(fontsize=7, frameon=False)
    if len(x):
        lo, hi = float(min(x.min(), y.min())), float(max(x.max(), y.max()))
        pad = 0.1 * (hi - lo or 1.0)
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="k", lw=0.8)
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_ylim(lo - pad, hi + pad)
        mae = float(np.mean(np.abs(x - y)))
        title = f"{title}\nMAE over all reactions {mae:.3f} eV, n = {len(x)}"
    ax.set_xlabel("reference E_ads (eV)")
    ax.set_ylabel("MLIP E_ads, median seed (eV)")
    ax.set_title(title, fontsize=9)
    ax.set_aspect("equal")


def parity_figure(reactions: dict[str, pd.DataFrame], dataset: str, by_adsorbate: bool = True, shifted: bool = False):
    """One panel per potential; ``shifted`` plots the gas-shift-corrected energies instead."""
    import matplotlib.pyplot as plt

    names = list(reactions)
    fig, axes = plt.subplots(1, max(1, len(names)), figsize=(4.2 * max(1, len(names)), 4.4), squeeze=False)
    for ax, name in zip(axes[0], names):
        df = reactions[name]
        if shifted:
            df = df.assign(mlip_ads_eng=df["mlip_ads_eng_shifted"], **{"class": df["class_shifted"]})
        _parity_axes(ax, df, f"{dataset}: {name}" + (" (gas shift)" if shifted else ""), by_adsorbate)
    fig.tight_layout()
    return fig


def single_parity_figure(df: pd.DataFrame, dataset: str, name: str):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8.6, 4.4))
    _parity_axes(axes[0], df, f"{dataset}: {name} (mono)", by_adsorbate=False)
    _parity_axes(axes[1], df, f"{dataset}: {name} (by adsorbate)", by_adsorbate=True)
    fig.tight_layout()
    return fig


_CLASS_COLORS = {
    "normal": "tab:green",
    "adsorbate_migration": "tab:blue",
    "energy_anomaly": "tab:orange",
    "unphysical_relaxation": "tab:red",
    "reproduction_failure": "tab:purple",
}


def sensitivity_figure(sweeps: dict[str, pd.DataFrame], dataset: str):
    """Stacked areas of class rates against each threshold, one row per potential."""
    import matplotlib.pyplot as plt

    from crucible.catalysis.analysis import CLASSES

    names = list(sweeps)
    fig, axes = plt.subplots(max(1, len(names)), 2, figsize=(9.0, 3.0 * max(1, len(names))), squeeze=False)
    for row, name in zip(axes, names):
        sweep = sweeps[name]
        for ax, (thr, label) in zip(
            row,
            (
                ("disp_thrs", "displacement threshold (Å)"),
                ("bond_length_change_threshold", "bond-length change threshold (fraction of the bond length)"),
            ),
        ):
            s = sweep[sweep["threshold"] == thr].sort_values("value")
            order = list(reversed(CLASSES))  # normal at the bottom
            ax.stackplot(
                s["value"],
                *[s[c].fillna(0).to_numpy() for c in order],
                labels=[c.replace("_", " ") for c in order],
                colors=[_CLASS_COLORS[c] for c in order],
                alpha=0.85,
            )
            ax.set_xlim(float(s["value"].min()), float(s["value"].max()))
            ax.set_ylim(0, 100)
            ax.set_xlabel(label)
            ax.set_ylabel("share of reactions (%)")
            ax.set_title(f"{dataset}: {name}", fontsize=9)
    axes[0][1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# from the stage's files (what `crucible catalysis figures` writes)


def write_figure_files(
    inputs: Sequence[InFile],
    reactions: Sequence[InFile],
    dataset: str,
    out_parity: Sequence[str | os.PathLike],
    out_sensitivity: Sequence[str | os.PathLike],
    out_parity_shifted: Sequence[str | os.PathLike] | None = (),
    out_model_parity: Sequence[str | os.PathLike] | None = (),
) -> None:
    """Parity (all potentials, and gas-shifted when asked), threshold sensitivity and one parity
    plot per potential (``out_model_parity`` in analysis order), from the ``score`` outputs:
    ``inputs`` its analysis JSONs, ``reactions`` its per-reaction parquets.

    Args:
        inputs: the analysis JSONs score wrote, one per potential, in plot order: .../analysis/{model}.json
        reactions: the per-reaction parquets score wrote, one per potential: .../analysis/{model}.parquet
        dataset: the dataset's name, printed in the figure titles
        out_parity: the parity plot of every potential, one file per format by suffix (e.g. a.png a.pdf)
        out_sensitivity: anomaly shares against the displacement and bond-length thresholds, one file per
            format
        out_parity_shifted: parity on gas-shift-corrected energies, one file per format (default: not drawn)
        out_model_parity: one parity plot per potential, in the order of --inputs (default: none)
    """
    from crucible.core.io import read_json, read_parquet
    from crucible.report.figures import save_figure

    analyses = [read_json(p) for p in inputs]
    by_model = {}
    for p in reactions:
        df = read_parquet(p)
        by_model[str(df["model"].iloc[0]) if len(df) else p] = df
    order = [a["model"] for a in analyses]
    by_model = {m: by_model[m] for m in order if m in by_model}
    save_figure(parity_figure(by_model, dataset), *out_parity)
    if out_parity_shifted:
        save_figure(parity_figure(by_model, dataset, shifted=True), *out_parity_shifted)
    save_figure(
        sensitivity_figure({a["model"]: pd.DataFrame(a["sensitivity"]) for a in analyses}, dataset), *out_sensitivity
    )
    for model, path in zip(order, out_model_parity or []):
        save_figure(single_parity_figure(by_model[model], dataset, model), path)
