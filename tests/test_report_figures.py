"""Figures and tables good enough for a paper (issue 10, point 12). Each check is one defect a
reader saw: markers hidden, labels misaligned, hatches over symbols, an unreadable colour bar,
stretched parity plots, internal ids as titles, code names as headers, units missing, notes in
numeric cells, a .tex that needs a package without saying so. The rendered PNGs were looked at."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crucible.matbench.leaderboard import PUBLISHED_COLUMNS, leaderboard, leaderboard_display, load_published
from crucible.report import figures
from crucible.report.tables import to_latex

from helpers import REPO

PUBLISHED = load_published(REPO / "config" / "published_matbench.yaml")


def _record(model, task, value, task_type="regression", proba=None):
    return {
        "model": model,
        "task": task,
        "n_test": 312 if task == "matbench_steels" else 4921,
        "leaderboard_metric": "mae" if task_type == "regression" else "rocauc",
        "leaderboard_value": value,
        "leaderboard_std": 0.1 * value,
        "scaled_error": {"mean": value / 229.37 if task_type == "regression" else (1 - value) / 0.5},
        "input_kind": "composition-only",
        "stats": {"rocauc_proba": {"mean": proba}} if proba else {},
        "task_type": task_type,
        "mad": 229.3743,
    }


RECORDS = [
    _record("dummy", "matbench_steels", 229.7),
    _record("gbm-magpie", "matbench_steels", 104.0),
    _record("dummy", "matbench_expt_is_metal", 0.5, "classification"),
    _record("gbm-magpie", "matbench_expt_is_metal", 0.91, "classification", proba=0.96),
]


def test_scaled_error_published_markers_are_on_top_and_tick_labels_aligned():
    table = leaderboard(RECORDS, PUBLISHED)
    fig = figures.scaled_error_figure(table, PUBLISHED_COLUMNS)
    ax = fig.axes[0]
    published = [c for c in ax.collections if c.get_label().startswith("published")]
    ours = [c for c in ax.collections if not c.get_label().startswith("published")]
    assert published and ours
    assert min(c.get_zorder() for c in published) > max(c.get_zorder() for c in ours)
    for label in ax.get_xticklabels():
        assert label.get_rotation_mode() == "anchor" and label.get_ha() == "right"
        assert "\n" not in label.get_text()


def test_parity_plot_has_equal_axes_and_the_title_it_is_given():
    fig = figures.parity_figure(np.array([1.0, 2.0, 3.0]), np.array([1.5, 2.0, 2.0]), "gbm-magpie on steels", "MPa")
    ax = fig.axes[0]
    assert ax.get_aspect() == 1.0
    assert ax.get_xlim() == ax.get_ylim()


def test_model_figure_titles_are_readable(tmp_path):
    from crucible.cli import main
    from crucible.io import write_json, write_parquet

    from helpers import clean_task

    data, card, folds = clean_task("matbench_steels")
    write_json(card, tmp_path / "card.json")
    write_parquet(data, tmp_path / "data.parquet")
    preds = pd.DataFrame({"mbid": data["mbid"], "prediction": np.full(len(data), float(data["target"].mean()))})
    write_parquet(preds, tmp_path / "p.parquet")
    captured = {}
    original = figures.save_figure

    def capture(fig, *paths):
        captured["title"] = fig.axes[0].get_title()
        original(fig, *paths)

    figures.save_figure = capture
    try:
        assert (
            main(
                [
                    "matbench",
                    "figures",
                    "--model",
                    "dummy",
                    "--card",
                    str(tmp_path / "card.json"),
                    "--data",
                    str(tmp_path / "data.parquet"),
                    "--predictions",
                    str(tmp_path / "p.parquet"),
                    "--out-png",
                    str(tmp_path / "f.png"),
                    "--out-pdf",
                    str(tmp_path / "f.pdf"),
                ]
            )
            == 0
        )
    finally:
        figures.save_figure = original
    assert "matbench_" not in captured["title"]
    assert "steels" in captured["title"] and "yield strength" in captured["title"]


def test_roc_title_and_caption_say_the_auc_is_pooled_not_the_fold_mean():
    fig = figures.roc_figure(
        np.array([0, 1, 0, 1]), np.array([0.1, 0.8, 0.4, 0.6]), "gbm-magpie on expt_is_metal", False
    )
    assert "pooled" in fig.axes[0].get_title()
    caption = (REPO / "workflow" / "report" / "model_figure.rst").read_text()
    assert "pooled" in caption and "mean of the five per-fold" in caption


def test_latex_says_it_needs_booktabs_and_numeric_cells_hold_numbers_only():
    table = leaderboard(RECORDS, PUBLISHED)
    display = leaderboard_display(table, PUBLISHED)
    tex = to_latex(display)
    assert tex.startswith("% requires \\usepackage{booktabs}")
    for column in display.columns:
        if column.startswith("gbm-magpie (") or column.startswith("dummy ("):
            assert not display[column].str.contains("proba").any(), column
    assert "AUC from probabilities" in " ".join(display.columns)


def _full_disk(monkeypatch):
    import contextlib
    from pathlib import Path

    @contextlib.contextmanager
    def to_dev_full(path, suffix=""):
        yield Path("/dev/full")

    monkeypatch.setattr(figures, "atomic_path", to_dev_full)


def test_a_full_disk_is_one_clear_error_naming_the_figure(monkeypatch, tmp_path):
    from crucible.errors import CrucibleError

    _full_disk(monkeypatch)
    fig = figures.parity_figure(np.array([1.0, 2.0]), np.array([1.0, 2.5]), "t", "u")
    with pytest.raises(CrucibleError, match=r"f\.png: cannot write the figure: \[Errno 28\] No space left on device"):
        figures.save_figure(fig, tmp_path / "f.png")


def test_an_error_matplotlib_raises_while_failing_to_write_names_the_os_error(monkeypatch, tmp_path):
    from crucible.errors import CrucibleError

    fig = figures.parity_figure(np.array([1.0, 2.0]), np.array([1.0, 2.5]), "t", "u")

    def broken(*args, **kwargs):
        try:
            raise OSError(28, "No space left on device")
        except OSError:
            raise AttributeError("'NoneType' object has no attribute 'write'")  # noqa: B904 (implicit context, as matplotlib raises it)

    monkeypatch.setattr(fig, "savefig", broken)
    with pytest.raises(CrucibleError, match=r"f\.pdf: cannot write the figure: \[Errno 28\] No space left on device"):
        figures.save_figure(fig, tmp_path / "f.pdf")
    assert not list(tmp_path.iterdir())


def test_leaderboard_rows_say_the_unit_of_their_mae():
    """Each task row's MAEs (ours and published) are in its target's unit, from the task card;
    the metric column says it (ROC AUC has none)."""
    table = leaderboard(RECORDS, PUBLISHED, {"matbench_steels": "MPa", "matbench_expt_is_metal": ""})
    assert table.set_index("task")["unit"].to_dict() == {"matbench_steels": "MPa", "matbench_expt_is_metal": ""}
    display = leaderboard_display(table, PUBLISHED).set_index("task")
    assert display["metric (unit of the row)"].to_dict() == {"steels": "MAE (MPa)", "expt_is_metal": "ROC AUC"}
    # without cards (a hand call): the metric alone, never a wrong unit
    bare = leaderboard_display(leaderboard(RECORDS, PUBLISHED), PUBLISHED)
    assert bare["metric (unit of the row)"].tolist() == ["MAE", "ROC AUC"]
