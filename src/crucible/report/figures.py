"""Matplotlib figures, written atomically with deterministic bytes (no timestamps)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import LogNorm, to_rgba  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402
from mpl_toolkits.axes_grid1 import make_axes_locatable  # noqa: E402

from crucible.core.errors import CrucibleError  # noqa: E402
from crucible.core.io import atomic_path  # noqa: E402
from crucible.report.units import printed_unit  # noqa: E402

_METADATA = {
    ".png": {"Software": None},
    ".pdf": {"Creator": None, "Producer": None, "CreationDate": None},
}


def _os_error(exc: BaseException | None) -> OSError | None:
    """The OSError behind ``exc``: matplotlib can fail on a full disk with an unrelated error."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def save_figure(fig: "plt.Figure", *paths: str | os.PathLike) -> None:
    try:
        for path in paths:
            suffix = Path(path).suffix
            try:
                with atomic_path(path, suffix) as tmp:
                    fig.savefig(
                        tmp, format=suffix.lstrip("."), metadata=_METADATA.get(suffix), dpi=150, bbox_inches="tight"
                    )
            except Exception as exc:
                cause = _os_error(exc)
                if cause is None:
                    raise
                raise CrucibleError(f"{path}: cannot write the figure: {cause}") from exc
    finally:
        plt.close(fig)


def scaled_error_figure(
    table: Any, published_names: tuple[str, ...], composition_only: Mapping[str, Sequence[bool]] | None = None
) -> "plt.Figure":
    """Scaled error per task ordered by dataset size: the paper's size-versus-error view.

    ``composition_only[model][i]`` is whether ``model`` saw formulas only on row ``i``'s task
    although that task's input is a structure; those entries are drawn hollow, so a reader does
    not compare them with structure-based published entries as like with like.
    """
    from matplotlib.lines import Line2D

    composition_only = composition_only or {}
    tasks = list(table["task"])
    x = np.arange(len(tasks))
    fig, ax = plt.subplots(figsize=(max(7.0, 0.7 * len(tasks) + 3), 4.8))
    # Published numbers are line markers and a see-through star drawn above ours, so neither hides the other.
    ref_styles = {
        "Dummy": ("_", "0.35"),
        "RF-SCM/Magpie": ("x", "tab:gray"),
        "CrabNet": ("+", "tab:brown"),
        "best": ("*", "goldenrod"),
    }
    models = [
        c[: -len("_scaled_error")]
        for c in table.columns
        if c.endswith("_scaled_error") and not c.startswith("published_")
    ]
    markers = "osD^vP"
    dodge = 0.12 if len(models) > 1 else 0.0  # models side by side, so equal values stay visible
    handles = []
    any_hollow = False
    for i, model in enumerate(models):
        color = f"C{i % 10}"
        marker = markers[i % len(markers)]
        values = np.asarray(table[f"{model}_scaled_error"], dtype=float)
        hollow = np.asarray(composition_only.get(model, [False] * len(tasks)), dtype=bool)
        if hollow.shape != values.shape:
            raise ValueError(f"composition_only[{model!r}] has {hollow.size} entries for {values.size} tasks")
        xs = x + dodge * (i - (len(models) - 1) / 2)
        common = {"marker": marker, "s": 45, "zorder": 2}
        ax.scatter(xs[~hollow], values[~hollow], color=color, alpha=0.85, label=model, **common)
        if hollow.any():
            any_hollow = True
            ax.scatter(
                xs[hollow],
                values[hollow],
                facecolors="none",
                edgecolors=color,
                linewidths=1.5,
                label=f"_{model} (composition only, structure task)",
                **common,
            )
        handles.append(Line2D([], [], ls="", marker=marker, color=color, alpha=0.85, markersize=7, label=model))
    for name in published_names:
        column = f"published_{name}_scaled_error"
        if column in table:
            marker, color = ref_styles.get(name, ("x", "k"))
            # A star is filled lightly: see-through over ours, and not read as "hollow".
            style = {"facecolors": to_rgba(color, 0.3), "edgecolors": color} if marker == "*" else {"color": color}
            handles.append(
                ax.scatter(
                    x, table[column], marker=marker, s=110, linewidths=1.4, label=f"published {name}", zorder=4, **style
                )
            )
    if any_hollow:
        handles.append(
            Line2D(
                [],
                [],
                ls="",
                marker="o",
                markerfacecolor="none",
                markeredgecolor="0.2",
                markeredgewidth=1.5,
                markersize=7,
                label="composition only\n(structure task)",
            )
        )
    ax.set_xticks(
        x,
        [f"{t.removeprefix('matbench_')} ({n:,})" for t, n in zip(tasks, table["n"])],
        rotation=40,
        ha="right",
        rotation_mode="anchor",
        fontsize=8,
    )
    ax.set_xlabel("task (rows), ordered by size", fontsize=8)
    ax.set_ylabel("scaled error (MAE/MAD or (1-AUC)/0.5)")
    title = "Matbench v0.1: scaled error by task (ordered by size)"
    if any_hollow:
        title += (
            "\nhollow: our model saw formulas only where the task gives structures"
            " (published RF-SCM/Magpie and most best entries used them)"
        )
    ax.set_title(title, fontsize=10)
    ax.axhline(1.0, color="0.8", lw=0.8, zorder=1)
    ax.set_ylim(bottom=0)
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


# Below this many points a scatter shows every point; above it points overlap into a blob and a
# density (hexagonal bins, log colour scale) shows where they lie.
DENSITY_MIN_POINTS = 2000
# A second, zoomed panel when the central 99 % of the values span less than this share of the
# full range: a few far outliers (dielectric n up to 60, most below 5) squeeze the bulk into a
# corner of the full-range panel.
ZOOM_BELOW_SHARE = 1 / 3
ZOOM_QUANTILE = 0.005


def _padded(lo: float, hi: float) -> tuple[float, float]:
    pad = 0.03 * (hi - lo or 1.0)
    return lo - pad, hi + pad


def _parity_panel(ax, y_true, y_pred, lo: float, hi: float, dense: bool):
    """One square panel on [lo, hi]²; returns the hexbin collection (None for a scatter)."""
    ax.set_aspect("equal", adjustable="box")
    bins = None
    if dense:
        bins = ax.hexbin(
            y_true,
            y_pred,
            gridsize=60,
            extent=(lo, hi, lo, hi),
            mincnt=1,
            norm=LogNorm(vmin=1),
            cmap="viridis",
            linewidths=0.1,
            zorder=1,
        )
    else:
        ax.scatter(y_true, y_pred, s=10, alpha=0.6, edgecolors="none", color="tab:blue", zorder=1)
    ax.plot([lo, hi], [lo, hi], color="k", lw=0.8, zorder=2)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    return bins


def parity_figure(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    title: str,
    unit: str,
    *,
    quantity: str = "",
    pooled_over: str = "5 test folds",
) -> "plt.Figure":
    """Predicted against true with the y = x line, on equal axes; the title gives MAE (in
    ``unit``) and n. From :data:`DENSITY_MIN_POINTS` points on, a hexbin density with a log
    colour scale replaces the scatter. When a few outliers stretch the axes (see
    :data:`ZOOM_BELOW_SHARE`), a second panel zooms on the central 99 % of the values."""
    from matplotlib.patches import Rectangle

    y_true = np.asarray(y_true, dtype=float)
    y_pred = np.asarray(y_pred, dtype=float)
    if y_true.shape != y_pred.shape or y_true.ndim != 1 or not y_true.size:
        raise ValueError(f"parity_figure needs two equal 1-d arrays, got {y_true.shape} and {y_pred.shape}")
    if not (np.isfinite(y_true).all() and np.isfinite(y_pred).all()):
        raise ValueError("parity_figure: non-finite values")
    n = y_true.size
    dense = n >= DENSITY_MIN_POINTS
    unit = printed_unit(unit)
    lo, hi = _padded(min(y_true.min(), y_pred.min()), max(y_true.max(), y_pred.max()))
    zoom_lo = min(np.quantile(y_true, ZOOM_QUANTILE), np.quantile(y_pred, ZOOM_QUANTILE))
    zoom_hi = max(np.quantile(y_true, 1 - ZOOM_QUANTILE), np.quantile(y_pred, 1 - ZOOM_QUANTILE))
    zoom = 0 < zoom_hi - zoom_lo < ZOOM_BELOW_SHARE * (hi - lo)
    width = (4.3 if dense else 4.0) * (2 if zoom else 1) + (0.7 if dense else 0.5)
    fig, axes = plt.subplots(1, 2 if zoom else 1, figsize=(width, 4.5), squeeze=False)
    axes = list(axes[0])
    panels = [_parity_panel(axes[0], y_true, y_pred, lo, hi, dense)]
    described = " ".join(part for part in (quantity, f"({unit})" if unit else "") if part)
    mae = float(np.mean(np.abs(y_true - y_pred)))
    mae_text = f"MAE {mae:.4g} {unit}" if unit else f"MAE {mae:.4g}"
    axes[0].set_title(f"{title}\n{mae_text}, n = {n:,} over {pooled_over}", fontsize=9)
    if zoom:
        zoom_lo, zoom_hi = _padded(zoom_lo, zoom_hi)
        inside = (y_true >= zoom_lo) & (y_true <= zoom_hi) & (y_pred >= zoom_lo) & (y_pred <= zoom_hi)
        panels.append(_parity_panel(axes[1], y_true[inside], y_pred[inside], zoom_lo, zoom_hi, dense))
        axes[1].set_title(
            f"red square enlarged: {int(inside.sum()):,} of {n:,} points ({inside.mean():.1%})", fontsize=9
        )
        axes[0].add_patch(
            Rectangle(
                (zoom_lo, zoom_lo), zoom_hi - zoom_lo, zoom_hi - zoom_lo, fill=False, ec="tab:red", lw=0.9, zorder=3
            )
        )
        for spine in axes[1].spines.values():
            spine.set_edgecolor("tab:red")
    for ax in axes:
        ax.set_xlabel(f"true {described}".rstrip())
        ax.set_ylabel(f"predicted {described}".rstrip())
    if dense:
        # One log scale for both panels, on a bar as tall as the square axes.
        top = max(float(b.get_array().max()) for b in panels)
        for b in panels:
            b.set_clim(1, max(top, 10.0))
        cax = make_axes_locatable(axes[-1]).append_axes("right", size="4%", pad=0.08)
        bar = fig.colorbar(panels[0], cax=cax)
        bar.set_label("points per bin", fontsize=8)
        bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        bar.ax.yaxis.set_minor_formatter(NullFormatter())
        cax.tick_params(labelsize=7)
    fig.tight_layout()
    return fig


def roc_figure(y_true: np.ndarray, score: np.ndarray, title: str, from_labels: bool) -> "plt.Figure":
    from sklearn.metrics import roc_auc_score, roc_curve

    fpr, tpr, _ = roc_curve(y_true, score)
    auc = roc_auc_score(y_true, score)
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.plot(fpr, tpr, lw=1.5)
    ax.plot([0, 1], [0, 1], color="0.6", lw=0.8, ls="--")
    kind = "labels" if from_labels else "probabilities"
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_aspect("equal", adjustable="box")
    ax.set_title(f"{title}\nROC from {kind}; AUC {auc:.4f} of the 5 test folds pooled", fontsize=9)
    fig.tight_layout()
    return fig
