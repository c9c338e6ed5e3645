"""The diatomics table (ours beside the leaderboard's published rows) and its figures."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from crucible.discovery.metrics import METRICS

HEADERS = {
    "model": "model",
    "source": "source",
    "date": "date",
    "n_elements": "elements scored",
    "n_flagged": "flagged points",
    "n_flagged_scored": "flagged points scored",
    "pbe_energy_mae": "PBE energy MAE (eV)",
    "pbe_force_mae": "PBE force MAE (eV/Å)",
    "pbe_wall_dist_mae": "PBE wall distance MAE (Å)",
    "pbe_bond_length_error": "PBE bond length error (Å)",
    "pbe_well_depth_error": "PBE well depth error (eV)",
    "pbe_vib_freq_error": "PBE vib. freq. error (cm⁻¹)",
    "tortuosity": "tortuosity",
    "energy_diff_flips": "energy diff flips",
    "energy_jump": "energy jump (eV)",
    "force_flips": "force flips",
    "force_total_variation": "force total variation (eV/Å)",
    "force_jump": "force jump (eV/Å)",
}
COLUMNS = tuple(HEADERS)
TITLE = "Matbench Discovery diatomics: homonuclear dimer curves H…U against PBE"


def table(ours: Mapping[str, Mapping[str, Any]], published: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per potential of ours (``source`` crucible, with the device it ran on), then the
    published rows sorted by model; the metrics are means over the scored elements."""
    rows = []
    for name in sorted(ours):
        m = ours[name]
        rows.append(
            {
                "model": name,
                "source": f"crucible ({m['device']})",
                "date": "",
                "n_elements": int(m["n_elements"]),
                "n_flagged": sum((m.get("flagged") or {}).values()),
                "n_flagged_scored": int(m.get("n_flagged_scored", 0)),
                **{k: float(m[k]) for k in METRICS},
            }
        )
    for p in sorted(published, key=lambda r: r["model"]):
        rows.append(
            {
                "model": p["model"],
                "source": "published",
                "date": p["date"],
                "n_elements": None,
                "n_flagged": None,
                "n_flagged_scored": None,
                **{k: p[k] for k in METRICS},
            }
        )
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    for column in ("n_elements", "n_flagged", "n_flagged_scored"):
        df[column] = df[column].astype("Int64")
    return df


def flagged_text(ours: Mapping[str, Mapping[str, Any]]) -> str:
    """The caption's sentence naming each potential's flagged curves, or nothing."""
    named = [
        f"{name}: " + ", ".join(f"{key} ({n})" for key, n in sorted(ours[name]["flagged"].items()))
        for name in sorted(ours)
        if ours[name].get("flagged")
    ]
    return f" Flagged points by curve: {'; '.join(named)}." if named else ""


def caption(df: pd.DataFrame, flagged: str = "") -> str:
    n_ours = int((df["source"] != "published").sum())
    return (
        f"{n_ours} potential(s) run here beside the {int((df['source'] == 'published').sum())} published rows of the "
        "leaderboard's model cards (commit 2c7f9fc, date of each card's diatomics run); 92 dimers, 119 separations "
        "0.1-6.0 Å, each metric the mean over the elements it scores (Materials Project elements, PBE-relative "
        "metrics without the 8 low-quality references); published values are rounded to 4 significant digits. "
        "Flagged points: a curve's points with a non-finite energy or force (left out) or one beyond the physical "
        "bounds (|E| > 1e3 eV/atom, a force component > 1e4 eV/Å, or the bare nuclei's Coulomb repulsion where larger; "
        "kept and scored as the leaderboard's code scores them); 'scored': those inside the window the metrics "
        f"score, which move the means.{flagged}"
    )


def curve_grid(
    name: str,
    curves: Mapping[str, Mapping[str, np.ndarray]],
    reference: Mapping[str, Mapping[str, np.ndarray]],
    symbols: Sequence[str],
    missing: Mapping[str, str],
):
    """Each dimer's energy curve (shifted to 0 at its largest separation), ours against PBE."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ncols = 10
    nrows = math.ceil(len(symbols) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.0 * ncols, 1.6 * nrows), squeeze=False)
    for ax, symbol in zip(axes.flat, symbols):
        ref = reference.get(symbol)
        lows = []
        if ref is not None:
            e = ref["energies"] - ref["energies"][-1]
            ax.plot(ref["distances"], e, color="0.4", lw=1.0, label="PBE")
            lows.append(e.min())
        cur = curves.get(symbol)
        if cur is not None:
            e = cur["energies"] - cur["energies"][-1]
            ax.plot(cur["distances"], e, color="tab:blue", lw=1.0, label=name)
            lows.append(e.min())
        else:
            ax.text(
                0.5,
                0.5,
                missing.get(f"{symbol}-{symbol}", "no curve").split(":")[0],
                ha="center",
                va="center",
                fontsize=6,
                transform=ax.transAxes,
                color="tab:red",
            )
        low = min(lows) if lows else -1.0
        ax.set_ylim(min(low, -0.5) * 1.2, max(5.0, -low))
        ax.set_xlim(0, 6)
        ax.set_title(symbol, fontsize=8, pad=2)
        ax.tick_params(labelsize=5, length=2)
    for ax in list(axes.flat)[len(symbols) :]:
        ax.set_visible(False)
    fig.suptitle(f"{name}: dimer energy (eV, 0 at 6 Å) against separation (Å); grey PBE, blue {name}", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    return fig


PANEL_COLUMNS = 4


def log_ticks(ax, lo: float, hi: float) -> None:
    """Tick labels a reader can read on a log x axis from ``lo`` to ``hi``: a labelled tick at
    1, 2 and 5 of each decade where the axis spans under two decades (matplotlib's default then
    labels one or two powers of ten), at most seven powers of ten on a longer one; short numbers."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    decades = math.log10(hi / lo) if lo > 0 and hi > lo else 0.0
    subs: tuple[float, ...] = (1.0, 2.0, 5.0) if decades < 2 else (1.0,)
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12 if decades < 2 else 7))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: tick_text(v)))
    ax.xaxis.set_minor_formatter(NullFormatter())


def tick_text(value: float) -> str:
    """A log axis's tick as a reader writes it: 0.5, 20, 1000, 1e5, 1e-4."""
    if value <= 0 or 1e-3 <= value < 1e5:
        return f"{value:g}"
    mantissa, exponent = f"{value:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def coverage_label(row: Mapping[str, Any]) -> str:
    """A row of ours as the figure names it: with the elements it scores, so that a potential of
    11 elements is not read as the best of 90, and its flagged points where it has any."""
    label = f"{row['model']} ({int(row['n_elements'])} el."
    flagged = row.get("n_flagged")
    if flagged is not None and not pd.isna(flagged) and int(flagged) > 0:
        label += f", {int(flagged)} flagged pts"
    return label + ")"


def metrics_figure(df: pd.DataFrame, metrics: Sequence[str] = METRICS):
    """A panel per metric (laid out from ``metrics``, :data:`PANEL_COLUMNS` to a row): the
    published rows (grey), ours (coloured diamonds, labelled with their element coverage) and, for
    a potential of ours that has a published row, that row in its colour (hollow circle); on a log
    axis where every value is positive and they span a decade or more."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ours = df[df["source"] != "published"].reset_index(drop=True)
    pub = df[df["source"] == "published"]
    rebuilt = set(ours["model"]) & set(pub["model"])
    ncols = min(PANEL_COLUMNS, max(len(metrics), 1))
    nrows = max(math.ceil(len(metrics) / ncols), 1)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.5 * ncols, 2.6 * nrows + 0.8), squeeze=False)
    colors = plt.get_cmap("tab10")
    color_of = {name: colors(k % 10) for k, name in enumerate(ours["model"])}
    top = 0.5 + 0.15 * len(ours)
    for ax, m in zip(axes.flat, metrics):
        others = pub[~pub["model"].isin(rebuilt)]
        vals = others[m].dropna().to_numpy(dtype=float)
        ax.scatter(vals, np.zeros_like(vals), color="0.6", s=14, label="published")
        for _, row in pub[pub["model"].isin(rebuilt)].iterrows():
            if math.isfinite(row[m]):
                ax.scatter(
                    [row[m]],
                    [0.0],
                    facecolors="none",
                    edgecolors=[color_of[row["model"]]],
                    s=60,
                    linewidths=1.5,
                    label=f"{row['model']} (published)",
                    zorder=3,
                )
        for k, row in ours.iterrows():
            if math.isfinite(row[m]):
                ax.scatter(
                    [row[m]],
                    [0.3 + 0.15 * k],
                    color=color_of[row["model"]],
                    s=30,
                    marker="D",
                    label=coverage_label(row),
                )
        pos = pub[m].dropna().to_numpy(dtype=float)
        pos = np.concatenate([pos, ours[m].to_numpy(dtype=float)])
        pos = pos[np.isfinite(pos)]
        if len(pos) and (pos > 0).all() and pos.max() >= 10 * pos.min():
            ax.set_xscale("log")
            log_ticks(ax, float(pos.min()), float(pos.max()))
        ax.tick_params(axis="x", labelsize=7)
        ax.set_yticks([])
        ax.set_ylim(-0.5, top)
        ax.set_title(HEADERS.get(m, m), fontsize=9)
    for ax in list(axes.flat)[len(metrics) :]:
        ax.set_visible(False)
    handles: dict[str, Any] = {}
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=min(len(handles), 4), fontsize=8)
    fig.suptitle(
        "Diatomics metrics: ours beside the leaderboard's published rows (lower is better; "
        "a mean over fewer elements is not comparable)",
        fontsize=10,
    )
    legend_rows = math.ceil(len(handles) / 4)
    fig.tight_layout(rect=(0, min(0.03 + 0.035 * legend_rows, 0.3), 1, 0.95))
    return fig


def model_of(path: str | Path) -> str:
    name = Path(path).name
    return name[: -len(".json.gz")] if name.endswith(".json.gz") else Path(path).stem


STABILITY_METRICS = ("F1", "DAF", "Precision", "Recall", "Accuracy", "TPR", "TNR", "FPR", "FNR", "MAE", "RMSE", "R2")
STABILITY_HEADERS = {
    "model": "model",
    "source": "source",
    "date": "date",
    "subset": "subset",
    **{m: m for m in STABILITY_METRICS},
    "MAE": "MAE (eV/atom)",
    "RMSE": "RMSE (eV/atom)",
    "R2": "R²",
    "missing_preds": "missing predictions",
}
STABILITY_COLUMNS = tuple(STABILITY_HEADERS)
STABILITY_TITLE = "Matbench Discovery: stability classification of the WBM test set"


def stability_table(ours: Sequence[Mapping[str, Any]], published: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """A row per model and subset: ours (``source`` crucible) first, by model, then the published
    rows of the cards by model; subsets in the leaderboard's order."""
    from crucible.discovery.stability import SUBSETS

    order = {s: k for k, s in enumerate(SUBSETS)}
    rows = []
    for source, group in (("crucible", ours), ("published", published)):
        for r in sorted(group, key=lambda r: (r["model"], order[r["subset"]])):
            row = {"model": r["model"], "source": source, "date": r.get("date", ""), "subset": r["subset"]}
            row.update({m: float(r.get(m, math.nan)) for m in STABILITY_METRICS})
            row["missing_preds"] = r.get("missing_preds", math.nan)
            rows.append(row)
    df = pd.DataFrame(rows, columns=list(STABILITY_COLUMNS))
    df["missing_preds"] = pd.array(
        [None if v is None or (isinstance(v, float) and math.isnan(v)) else int(v) for v in df["missing_preds"]],
        dtype="Int64",
    )
    return df


def stability_caption(df: pd.DataFrame) -> str:
    n_ours = df.loc[df["source"] != "published", "model"].nunique()
    n_pub = df.loc[df["source"] == "published", "model"].nunique()
    return (
        f"{n_ours} model(s) scored here from the leaderboard's own prediction files beside the {n_pub} published "
        "rows of its model cards (commit 2c7f9fc, date of each card's predictions file); the WBM test set "
        "(full_test_set), its unique prototypes and the 10,000 of those predicted most stable; stable at a "
        "predicted hull distance ≤ 0 eV/atom, predictions rounded to 3 decimals, a missing one counted unstable."
    )
