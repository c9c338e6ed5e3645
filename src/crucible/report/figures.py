"""Matplotlib figures, written atomically with deterministic bytes (no timestamps)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from crucible.errors import CrucibleError  # noqa: E402
from crucible.io import atomic_path  # noqa: E402

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


def scaled_error_figure(table: Any, published_names: tuple[str, ...]) -> "plt.Figure":
    """Scaled error per task ordered by dataset size: the paper's size-versus-error view."""
    tasks = list(table["task"])
    x = np.arange(len(tasks))
    fig, ax = plt.subplots(figsize=(max(7.0, 0.7 * len(tasks) + 3), 4.5))
    # Published numbers are line/outline markers drawn above ours, so neither hides the other.
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
    for i, model in enumerate(models):
        ax.scatter(
            x + dodge * (i - (len(models) - 1) / 2),
            table[f"{model}_scaled_error"],
            marker=markers[i % len(markers)],
            s=45,
            alpha=0.85,
            label=model,
            zorder=2,
        )
    for name in published_names:
        column = f"published_{name}_scaled_error"
        if column in table:
            marker, color = ref_styles.get(name, ("x", "k"))
            style = {"facecolors": "none", "edgecolors": color} if marker == "*" else {"color": color}
            ax.scatter(
                x, table[column], marker=marker, s=110, linewidths=1.4, label=f"published {name}", zorder=4, **style
            )
    ax.set_xticks(
        x,
        [f"{t.removeprefix('matbench_')} ({n})" for t, n in zip(tasks, table["n"])],
        rotation=40,
        ha="right",
        rotation_mode="anchor",
        fontsize=8,
    )
    ax.set_xlabel("task (rows), ordered by size", fontsize=8)
    ax.set_ylabel("scaled error (MAE/MAD or (1-AUC)/0.5)")
    ax.set_title("Matbench v0.1: scaled error by task (ordered by size)")
    ax.axhline(1.0, color="0.8", lw=0.8, zorder=1)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def parity_figure(y_true: np.ndarray, y_pred: np.ndarray, title: str, unit: str) -> "plt.Figure":
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.scatter(y_true, y_pred, s=4, alpha=0.4, rasterized=True)
    lo = float(np.nanmin([y_true.min(), y_pred.min()]))
    hi = float(np.nanmax([y_true.max(), y_pred.max()]))
    pad = 0.03 * (hi - lo or 1.0)
    lo, hi = lo - pad, hi + pad
    ax.plot([lo, hi], [lo, hi], color="k", lw=0.8)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal", adjustable="box")
    mae = float(np.mean(np.abs(y_true - y_pred)))
    ax.set_xlabel(f"true ({unit})")
    ax.set_ylabel(f"predicted ({unit})")
    ax.set_title(f"{title}\nMAE {mae:.4g} over all 5 test folds", fontsize=9)
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
