"""Tables (csv, Markdown, LaTeX) and figures for the interatomic-potential benchmarks.

Everything is written through :func:`crucible.core.io.atomic_path`. Figures are made with the Agg
backend and without the metadata that changes between runs (PNG ``Software``, PDF
``CreationDate``), so two runs give byte-identical files.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from crucible.core.io import InFile

EOS_TABLE_HEADERS = {
    "model": "model",
    "n_elements": "elements",
    "n_unsupported": "not modelled",
    "unsupported_elements": "elements not modelled",
    "n_failed": "failed",
    "failed_elements": "failed elements",
    "n_fitted": "fitted",
    "delta_mean_mev": "mean Δ, fitted (meV/atom)",
    "delta_median_mev": "median Δ, fitted (meV/atom)",
    "n_common": "fitted by all",
    "delta_mean_common_mev": "mean Δ, fitted by all (meV/atom)",
    "delta_median_common_mev": "median Δ, fitted by all (meV/atom)",
    "v0_mae_wien2k": "V0 MAE vs WIEN2k (Å³/atom)",
    "b0_mae_wien2k": "B0 MAE vs WIEN2k (GPa)",
    "b0_prime_mae_wien2k": "B0′ MAE vs WIEN2k",
    "v0_mae_exp": "V0 MAE vs exp. (Å³/atom)",
    "b0_mae_exp": "B0 MAE vs exp. (GPa)",
    "n_v0_outside_sampled_range": "V0 outside sampled range",
    "n_implausible": "implausible elements (|E| > 1e3 eV/atom)",
    "potential": "potential (class, params, version)",
}


# s2ef metrics (fairchem's Evaluator): energies are per structure, forces per component.
S2EF_TABLE_HEADERS = {
    "dataset": "dataset",
    "model": "model",
    "energy_mae": "energy MAE (eV)",
    "forcesx_mae": "force x MAE (eV/Å)",
    "forcesy_mae": "force y MAE (eV/Å)",
    "forcesz_mae": "force z MAE (eV/Å)",
    "forces_mae": "force MAE (eV/Å)",
    "forces_cosine_similarity": "force cosine",
    "forces_magnitude_error": "force magnitude error (eV/Å)",
    "energy_forces_within_threshold": "EFwT (0.02 eV, 0.03 eV/Å)",
    "n_frames": "frames",
    "n_failed": "failed",
    "n_implausible": "implausible frames (|E| > 1e3 eV/atom or |F| > 1e4 eV/Å)",
    "potential": "potential (class, params, version)",
}


def write_table(
    df: pd.DataFrame,
    csv=None,
    md=None,
    tex=None,
    headers: Mapping[str, str] | None = None,
    digits: int = 3,
    title: str | None = None,
    caption: str | None = None,
) -> None:
    """The shared table writer (:mod:`crucible.report.tables`), with the MLIP tables' rounding."""
    from crucible.report.tables import write_table as write

    write(df, csv=csv, md=md, tex=tex, digits=digits, headers=headers, title=title, caption=caption)


EOS_TITLE = "Equation of state of the Delta-set elemental crystals"


def eos_caption(table: pd.DataFrame) -> str:
    """What the EOS table shows, for its Markdown and LaTeX files."""
    n = int(table["n_elements"].max()) if len(table) else 0
    common = int(table["n_common"].max()) if len(table) else 0
    return (
        f"Per potential, {n} elemental crystals of the Delta set: how many it does not model (no parameters "
        "for the element; not run, listed in the CSV), how many failed (evaluation or equation-of-state fit) "
        "and how many it fitted; the mean and median Δ against WIEN2k over its own fitted elements "
        f"(rows average different sets) and over the {common} elements every potential in the table fitted "
        "(comparable across rows); the MAE of V0, B0 and B0′ against WIEN2k and of V0 and B0 against "
        "experiment over its fitted elements, and how many fitted V0 lie outside the sampled volumes."
    )


# the CSV keeps every column; these are too long for a printed table (the caption points to the CSV)
EOS_CSV_ONLY = ("unsupported_elements",)


def write_eos_table(table: pd.DataFrame, csv=None, md=None, tex=None) -> None:
    """The EOS summary: every column in the CSV; Markdown and LaTeX without :data:`EOS_CSV_ONLY`."""
    write_table(table, csv=csv, headers=EOS_TABLE_HEADERS)
    write_table(
        table.drop(columns=list(EOS_CSV_ONLY)),
        md=md,
        tex=tex,
        headers=EOS_TABLE_HEADERS,
        title=EOS_TITLE,
        caption=eos_caption(table),
    )


def s2ef_title(table: pd.DataFrame) -> str:
    datasets = ", ".join(sorted(table["dataset"].astype(str).unique())) if len(table) else "no dataset"
    return f"Structure to energy and forces on {datasets}"


def s2ef_caption(table: pd.DataFrame) -> str:
    frames = int(table["n_frames"].max()) if len(table) else 0
    return (
        f"Per potential, against the reference calculations of {frames} frames (failed frames are counted, "
        "not scored): MAE of each frame's total energy (eV) and of the forces per component and over all "
        "components (eV/Å), force cosine, force magnitude error (eV/Å), and EFwT, the fraction of frames "
        "within 0.02 eV and 0.03 eV/Å."
    )


# ---------------------------------------------------------------------------------------------
# figures


def periodic_position(symbol: str) -> tuple[int, int]:
    """(period, group) in the 18-column table; the lanthanide row is folded away, so La–Lu sit
    in group 3 (the Delta set has only Lu there)."""
    from ase.data import atomic_numbers

    z = atomic_numbers[symbol]
    if z > 86:
        raise ValueError(f"{symbol}: beyond the sixth period")
    period, first = max((p, s) for s, p in ((1, 1), (3, 2), (11, 3), (19, 4), (37, 5), (55, 6)) if s <= z)
    k = z - first  # 0-based position within the period
    if period == 1:
        return 1, 1 if z == 1 else 18
    if period in (2, 3):
        return period, k + 1 if k < 2 else k + 11
    if period in (4, 5):
        return period, k + 1
    if z <= 56:
        return 6, k + 1
    if z <= 71:
        return 6, 3
    return 6, z - 68  # Hf (72) → group 4


def _figure_save(fig, png: str | Path | None, pdf: str | Path | None) -> None:
    """The shared, byte-deterministic figure writer; it also closes the figure."""
    from crucible.report.figures import save_figure

    save_figure(fig, *[p for p in (png, pdf) if p])


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "crucible"
    plt.rcParams["pdf.compression"] = 6
    return plt


def _plain_log_axis(axis) -> None:
    """Plain numbers at 1-2-5 steps on a log axis, not matplotlib's overlapping "2×10¹" labels."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _not_fitted(df: pd.DataFrame) -> str:
    """The two reasons an element has no fit, apart: "60 not modelled (n/a), 3 failed of 71"."""
    unsupported = int((df["status"] == "unsupported").sum())
    failed = int((~df["status"].isin(["ok", "unsupported"])).sum())
    head = f"{unsupported} not modelled (n/a), " if unsupported else ""
    return f"{head}{failed} failed of {len(df)}"


def delta_periodic_table(frames_by_model: Mapping[str, pd.DataFrame], png=None, pdf=None) -> None:
    """Δ per element laid out as a periodic table, one panel per model; failed elements grey
    and hatched, elements the potential does not model dashed and "n/a", elements not run left
    blank. Colour on a log scale shared by panels."""
    plt = _pyplot()
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Rectangle

    models = sorted(frames_by_model)
    if not models:
        raise ValueError("no EOS results to plot")
    deltas = np.concatenate([frames_by_model[m]["delta_mev"].to_numpy(dtype=float) for m in models])
    finite = deltas[np.isfinite(deltas) & (deltas > 0)]
    lo = max(float(finite.min()), 0.1) if finite.size else 0.1
    hi = max(float(finite.max()), lo * 10) if finite.size else 100.0
    norm = LogNorm(vmin=lo, vmax=hi)
    cmap = plt.get_cmap("viridis")
    fig, axes = plt.subplots(len(models), 1, figsize=(11, 3.9 * len(models)), squeeze=False)
    for ax, model in zip(axes[:, 0], models):
        df = frames_by_model[model]
        for row in df.itertuples(index=False):
            period, group = periodic_position(row.element)
            x, y = group - 1, period - 1
            if row.status == "ok" and math.isfinite(row.delta_mev):
                colour = cmap(norm(max(row.delta_mev, lo)))
                ax.add_patch(Rectangle((x, y), 0.95, 0.95, facecolor=colour, edgecolor="black", lw=0.5))
                text_colour = "white" if norm(max(row.delta_mev, lo)) < 0.55 else "black"
                ax.text(
                    x + 0.475,
                    y + 0.33,
                    row.element,
                    ha="center",
                    va="center",
                    fontsize=9,
                    weight="bold",
                    color=text_colour,
                )
                label = f"{row.delta_mev:.1f}" if row.delta_mev < 100 else f"{row.delta_mev:.0f}"
                ax.text(x + 0.475, y + 0.70, label, ha="center", va="center", fontsize=7, color=text_colour)
            elif row.status == "unsupported":
                # not a failure: the potential has no parameters for this element
                ax.add_patch(Rectangle((x, y), 0.95, 0.95, facecolor="white", edgecolor="0.6", lw=0.5, ls="--"))
                ax.text(x + 0.475, y + 0.33, row.element, ha="center", va="center", fontsize=9, color="0.5")
                ax.text(x + 0.475, y + 0.72, "n/a", ha="center", va="center", fontsize=6, color="0.5")
            else:
                # Grey cell, hatch only in the lower strip: the symbol stays readable.
                ax.add_patch(Rectangle((x, y), 0.95, 0.95, facecolor="lightgrey", edgecolor="black", lw=0.5))
                ax.add_patch(
                    Rectangle((x, y + 0.56), 0.95, 0.39, facecolor="none", edgecolor="0.45", lw=0, hatch="////")
                )
                ax.text(x + 0.475, y + 0.30, row.element, ha="center", va="center", fontsize=9, weight="bold")
                ax.text(
                    x + 0.475,
                    y + 0.76,
                    "failed",
                    ha="center",
                    va="center",
                    fontsize=6,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5},
                )
        ok = df[df["status"] == "ok"]
        ax.set_title(
            f"{model}: Δ vs WIEN2k (meV/atom), mean {ok['delta_mev'].mean():.1f}, median {ok['delta_mev'].median():.1f} "
            f"over {len(ok)} fitted; {_not_fitted(df)}",
            fontsize=10,
        )
        ax.set_xlim(-0.1, 18)
        ax.set_ylim(6.1, -0.1)
        ax.set_aspect("equal")
        ax.axis("off")
        sm = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
        bar = fig.colorbar(sm, ax=ax, fraction=0.025, pad=0.01, label="Δ (meV/atom)")
        _plain_log_axis(bar.ax.yaxis)
    _figure_save(fig, png, pdf)


B0_LABELLED_OUTLIERS = 5  # per panel: more than this many labels crowd the dense 30-300 GPa band


def b0_outliers(ok: pd.DataFrame, n: int = B0_LABELLED_OUTLIERS) -> list[str]:
    """The ``n`` elements furthest from the diagonal of the log-log parity plot, i.e. with the
    largest relative B0 error |ln(B0 / B0_WIEN2k)|; ties by dcdft order (the frame's)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.abs(np.log(ok["b0"].to_numpy(float) / ok["wien2k_b0"].to_numpy(float)))
    ratio = np.where(np.isfinite(ratio), ratio, -1.0)  # no reference B0: never an outlier
    order = sorted(range(len(ok)), key=lambda i: (-ratio[i], i))
    return [str(ok["element"].iloc[i]) for i in order[:n]]


def _spread_labels(ax, texts, min_gap_pt: float = 8.0) -> None:
    """Push labels apart vertically (in points) so that no two overlap; labels keep their x."""
    if len(texts) < 2:
        return
    fig = ax.figure
    fig.canvas.draw()
    scale = fig.dpi / 72.0
    items = sorted(texts, key=lambda t: ax.transData.transform(t.xy)[1])
    placed: list[tuple[float, float, float]] = []  # (x0, x1, y) in display pixels of placed labels
    for text in items:
        box = text.get_window_extent()
        y = box.y0
        for x0, x1, py in placed:
            if box.x1 > x0 and box.x0 < x1 and abs(y - py) < min_gap_pt * scale:
                y = py + min_gap_pt * scale
        dx, dy = text.get_position()
        text.set_position((dx, dy + (y - box.y0) / scale))
        placed.append((box.x0, box.x1, y))


def b0_parity(frames_by_model: Mapping[str, pd.DataFrame], png=None, pdf=None) -> None:
    """Model B0 against WIEN2k B0 (log–log), one panel per model, on axes shared by all panels;
    only the :data:`B0_LABELLED_OUTLIERS` largest relative errors of each panel are labelled.
    Elements without a fit are left out of the plot and counted in the panel title."""
    plt = _pyplot()
    models = sorted(frames_by_model)
    if not models:
        raise ValueError("no EOS results to plot")
    fitted = {}
    for model in models:
        df = frames_by_model[model]
        fitted[model] = df[(df["status"] == "ok") & np.isfinite(df["b0"]) & (df["b0"] > 0)]
    values = np.concatenate([np.r_[f["wien2k_b0"].to_numpy(float), f["b0"].to_numpy(float)] for f in fitted.values()])
    values = values[np.isfinite(values) & (values > 0)]
    lo, hi = (max(values.min() / 1.5, 0.1), values.max() * 1.5) if values.size else (1.0, 500.0)
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 4.9), squeeze=False, sharex=True, sharey=True)
    for ax, model in zip(axes[0], models):
        df, ok = frames_by_model[model], fitted[model]
        ref = ok["wien2k_b0"].to_numpy(float)
        pred = ok["b0"].to_numpy(float)
        ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8, zorder=0)
        ax.scatter(ref, pred, s=14, color="tab:blue")
        outliers = set(b0_outliers(ok))
        labels = [
            ax.annotate(el, (r, p), fontsize=7, xytext=(4, 2), textcoords="offset points")
            for r, p, el in zip(ref, pred, ok["element"])
            if el in outliers
        ]
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_log_axis(ax.xaxis)
        _plain_log_axis(ax.yaxis)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        ax.set_xlabel("WIEN2k B0 (GPa)")
        ax.set_ylabel("potential's B0 (GPa)")
        ax.tick_params(labelleft=True)
        mae = float(np.mean(np.abs(pred - ref))) if len(ok) else math.nan
        ax.set_title(f"{model}\nMAE {mae:.1f} GPa over {len(ok)} fitted\n{_not_fitted(df)}", fontsize=9)
        _spread_labels(ax, labels)
    fig.text(
        0.5,
        0.01,
        f"Labelled: the {B0_LABELLED_OUTLIERS} largest relative errors |ln(B0/B0_WIEN2k)| of each panel.",
        ha="center",
        fontsize=8,
    )
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    _figure_save(fig, png, pdf)


def load_eos_frames(paths: Sequence[str | Path]) -> dict[str, pd.DataFrame]:
    """:func:`load_frames` of EOS results files, each checked to be of the current format."""
    from crucible.mlip.eos import check_eos_format

    for path in paths:
        check_eos_format(path)
    return load_frames(paths)


def load_frames(paths: Sequence[str | Path], key: str = "model") -> dict[str, pd.DataFrame]:
    """Read per-model parquet files into {model: frame}; the model name comes from the ``model``
    column (one value per file) or, failing that, the file stem. Each frame's
    ``attrs["potential"]`` holds the provenance stored with the file (empty if none)."""
    from crucible.core.errors import DataValidationError
    from crucible.core.io import read_parquet
    from crucible.potentials.provenance import read_provenance

    out: dict[str, pd.DataFrame] = {}
    for path in paths:
        df = read_parquet(path)
        names = sorted(set(df[key])) if key in df.columns else [Path(path).stem]
        if len(names) != 1:
            raise DataValidationError(f"{path}: expected one {key} per file, found {names}")
        if names[0] in out:
            raise DataValidationError(f"{path}: {key} {names[0]!r} given twice")
        df.attrs["potential"] = read_provenance(path)
        out[names[0]] = df
    return out


def write_eos_table_files(
    inputs: Sequence[InFile],
    out_csv: str | os.PathLike | None = None,
    out_md: str | os.PathLike | None = None,
    out_tex: str | os.PathLike | None = None,
) -> None:
    """``crucible mlip eos-table``: the EOS summary of the per-model EOS files.

    Args:
        inputs: per-model files: results/mlip/eos/{model}.parquet or results/mlip/s2ef/{dataset}/{model}.parquet
        out_csv: the table, CSV
        out_md: the table, Markdown
        out_tex: the table, LaTeX
    """
    from crucible.mlip.eos import eos_summary_table

    write_eos_table(eos_summary_table(load_eos_frames(inputs)), csv=out_csv, md=out_md, tex=out_tex)


def write_eos_figures(
    inputs: Sequence[InFile],
    out_png: str | os.PathLike | None = None,
    out_pdf: str | os.PathLike | None = None,
    out_parity_png: str | os.PathLike | None = None,
    out_parity_pdf: str | os.PathLike | None = None,
) -> None:
    """``crucible mlip eos-figures``: the Δ periodic table and the B0 parity figure, each where asked.

    Args:
        inputs: EOS fits results/mlip/eos/{model}.parquet, one per potential
        out_png: the Δ periodic-table figure, PNG
        out_pdf: the Δ periodic-table figure, PDF
        out_parity_png: the B0 parity figure (against experiment), PNG
        out_parity_pdf: the B0 parity figure, PDF
    """
    frames = load_eos_frames(inputs)
    if out_png or out_pdf:
        delta_periodic_table(frames, png=out_png, pdf=out_pdf)
    if out_parity_png or out_parity_pdf:
        b0_parity(frames, png=out_parity_png, pdf=out_parity_pdf)


def write_s2ef_table(
    inputs: Sequence[InFile],
    out_csv: str | os.PathLike | None = None,
    out_md: str | os.PathLike | None = None,
    out_tex: str | os.PathLike | None = None,
) -> None:
    """``crucible mlip s2ef-table``: the s2ef metrics of per-model prediction files.

    Args:
        inputs: as in :func:`crucible.mlip.report.write_eos_table_files`
        out_csv: as in :func:`crucible.mlip.report.write_eos_table_files`
        out_md: as in :func:`crucible.mlip.report.write_eos_table_files`
        out_tex: as in :func:`crucible.mlip.report.write_eos_table_files`
    """
    from crucible.mlip.s2ef_scoring import s2ef_table_from_files

    table = s2ef_table_from_files(inputs)
    write_table(
        table,
        csv=out_csv,
        md=out_md,
        tex=out_tex,
        digits=4,
        headers=S2EF_TABLE_HEADERS,
        title=s2ef_title(table),
        caption=s2ef_caption(table),
    )
