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
    from crucible.core.io import write_json, write_parquet

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
    from crucible.core.errors import CrucibleError

    _full_disk(monkeypatch)
    fig = figures.parity_figure(np.array([1.0, 2.0]), np.array([1.0, 2.5]), "t", "u")
    with pytest.raises(CrucibleError, match=r"f\.png: cannot write the figure: \[Errno 28\] No space left on device"):
        figures.save_figure(fig, tmp_path / "f.png")


def test_an_error_matplotlib_raises_while_failing_to_write_names_the_os_error(monkeypatch, tmp_path):
    from crucible.core.errors import CrucibleError

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
    # a card that says "unitless" (matbench_dielectric's n): said in words, not "MAE (unitless)"
    unitless = leaderboard(RECORDS, PUBLISHED, {"matbench_steels": "unitless", "matbench_expt_is_metal": ""})
    assert leaderboard_display(unitless, PUBLISHED)["metric (unit of the row)"].tolist() == [
        "MAE (dimensionless)",
        "ROC AUC",
    ]


# --- Matbench parity plots: density with n and the unit (issue 23, item 4) ---


def _hexbins(ax):
    from matplotlib.collections import PolyCollection

    return [c for c in ax.collections if isinstance(c, PolyCollection)]


def _scatters(ax):
    from matplotlib.collections import PathCollection

    return [c for c in ax.collections if isinstance(c, PathCollection)]


def _colourbar_axes(fig):
    return [ax for ax in fig.axes if ax.get_ylabel() == "points per bin"]


def test_parity_plot_of_many_points_is_a_log_density_with_a_labelled_colour_bar():
    from matplotlib.colors import LogNorm

    rng = np.random.default_rng(0)
    y_true = rng.normal(-1.0, 1.0, 132_752)
    y_pred = y_true + rng.normal(0.0, 0.2, y_true.size)
    fig = figures.parity_figure(y_true, y_pred, "gbm-magpie on mp_e_form: e_form", "eV/atom")
    ax = fig.axes[0]
    (bins,) = _hexbins(ax)
    assert not _scatters(ax)
    assert isinstance(bins.norm, LogNorm) and bins.norm.vmin == 1
    # every pooled point is in some drawn bin; empty bins are not drawn
    assert bins.get_array().sum() == y_true.size and bins.get_array().min() >= 1
    assert len(_colourbar_axes(fig)) == 1
    mae = np.mean(np.abs(y_true - y_pred))
    assert ax.get_title().endswith(f"\nMAE {mae:.4g} eV/atom, n = 132,752 over 5 test folds")
    assert ax.get_xlabel() == "true (eV/atom)" and ax.get_ylabel() == "predicted (eV/atom)"
    assert ax.get_aspect() == 1.0 and ax.get_xlim() == ax.get_ylim()
    assert len(fig.axes) == 2  # no zoom panel: the bulk fills the axes


def test_parity_plot_of_few_points_draws_every_point():
    y_true = np.linspace(1000.0, 2500.0, 312)
    y_pred = y_true[::-1].copy()
    fig = figures.parity_figure(y_true, y_pred, "gbm-magpie on steels", "MPa", quantity="yield strength")
    ax = fig.axes[0]
    (points,) = _scatters(ax)
    assert len(points.get_offsets()) == 312
    assert not _hexbins(ax) and not _colourbar_axes(fig)
    assert ", n = 312 over 5 test folds" in ax.get_title() and " MPa, n" in ax.get_title()
    assert ax.get_xlabel() == "true yield strength (MPa)"
    # the threshold, both sides
    n = figures.DENSITY_MIN_POINTS
    assert _scatters(figures.parity_figure(np.arange(n - 1.0), np.arange(n - 1.0), "t", "eV").axes[0])
    assert _hexbins(figures.parity_figure(np.arange(float(n)), np.arange(float(n)), "t", "eV").axes[0])
    # a constant prediction of a constant target: one panel, nothing to enlarge
    assert len(figures.parity_figure(np.full(10, 2.0), np.full(10, 2.0), "t", "eV").axes) == 1


@pytest.mark.parametrize("unit", ["unitless", "", None, "dimensionless"])
def test_a_dimensionless_target_prints_no_unit(unit):
    fig = figures.parity_figure(
        np.array([1.0, 2.0, 3.0]), np.array([1.5, 2.0, 2.0]), "dummy on dielectric: n", unit, quantity="n"
    )
    ax = fig.axes[0]
    assert ax.get_title().endswith("\nMAE 0.5, n = 3 over 5 test folds")
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("true n", "predicted n")
    assert "unitless" not in ax.get_title() + ax.get_xlabel() and "()" not in ax.get_xlabel()


def test_parity_plot_refuses_non_finite_values_instead_of_printing_mae_nan():
    with pytest.raises(ValueError, match="non-finite"):
        figures.parity_figure(np.array([1.0, 2.0]), np.array([1.0, np.nan]), "t", "eV")


def _dummy_fold_files(tmp_path, data, folds):
    """The mean-of-the-training-folds prediction of each fold, as the dummy model writes it."""
    from crucible.core.io import write_parquet

    paths = []
    by_id = data.set_index("mbid")["target"]
    for k in range(5):
        test = folds.loc[folds["fold"] == k, "mbid"]
        train_mean = float(by_id.drop(test).mean())
        path = tmp_path / f"fold_{k}.parquet"
        write_parquet(pd.DataFrame({"mbid": test.to_numpy(), "prediction": np.full(len(test), train_mean)}), path)
        paths.append(path)
    return paths


def test_dielectric_parity_plot_on_the_real_task():
    """matbench_dielectric (4,764 rows, refractive index n, card unit "unitless", most n below 5,
    a few up to 60): a density plot, no unit printed, and a panel enlarging the bulk."""
    import tempfile
    from pathlib import Path

    from crucible.core.io import write_parquet
    from crucible.matbench.figures import model_figure

    from helpers import clean_task

    data, card, folds = clean_task("matbench_dielectric")
    assert card["unit"] == "unitless" and len(data) == 4764
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_parquet(data, tmp / "data.parquet")
        fig = model_figure("dummy", card, tmp / "data.parquet", _dummy_fold_files(tmp, data, folds))
    full, zoom, bar = fig.axes
    assert bar.get_ylabel() == "points per bin"
    assert _hexbins(full) and _hexbins(zoom)
    assert full.get_title().startswith("dummy on dielectric: n\nMAE ")
    assert full.get_title().endswith(", n = 4,764 over 5 test folds") and "unitless" not in full.get_title()
    assert full.get_xlabel() == "true n"
    # the zoom holds the bulk of the points in a much smaller square, and says how many
    (zlo, zhi), (flo, fhi) = zoom.get_xlim(), full.get_xlim()
    assert zoom.get_ylim() == (zlo, zhi) and (zhi - zlo) < (fhi - flo) / 3
    inside = int(((data["target"] >= zlo) & (data["target"] <= zhi)).sum())
    assert inside / len(data) > 0.98
    assert f"{inside:,} of 4,764 points" in zoom.get_title()
    assert sum(b.get_array().sum() for b in _hexbins(zoom)) == inside


def test_model_figure_names_the_prediction_file_with_a_nan(tmp_path):
    from crucible.core.errors import PredictionFileError
    from crucible.core.io import write_parquet
    from crucible.matbench.figures import model_figure

    from helpers import clean_task

    data, card, folds = clean_task("matbench_steels")
    write_parquet(data, tmp_path / "data.parquet")
    paths = _dummy_fold_files(tmp_path, data, folds)
    bad = pd.read_parquet(paths[2])
    bad.loc[3, "prediction"] = np.nan
    write_parquet(bad, paths[2])
    with pytest.raises(
        PredictionFileError,
        match=rf"fold_2\.parquet: column 'prediction': 1 non-finite value\(s\), first at id '{bad.loc[3, 'mbid']}'",
    ):
        model_figure("dummy", card, tmp_path / "data.parquet", paths)


# --- Matbench scaled-error figure: composition-only entries on structure tasks are hollow ---


def _is_hollow(collection):
    faces = collection.get_facecolors()
    return len(faces) == 0 or bool((faces[:, 3] == 0).all())


def _drawn_entries(ax, model):
    """{task index: hollow?} of ``model``'s markers (x is the task's position, dodged by < 0.5)."""
    entries = {}
    for c in ax.collections:
        if c.get_label() in (model, f"_{model} (composition only, structure task)"):
            for x, _ in c.get_offsets():
                entries[int(round(x))] = _is_hollow(c)
    return entries


def test_scaled_error_figure_marks_composition_only_entries_on_structure_tasks(tmp_path, monkeypatch):
    """Task cards of steels (composition) and dielectric (structure); dummy and gbm-magpie saw
    formulas only, a structure model saw structures on dielectric. Hollow exactly where a
    composition-only model ran on a structure task, as the cards' input_type says."""
    from crucible.core.io import write_json, write_parquet
    from crucible.matbench import leaderboard as lb
    from crucible.matbench.task_scores import score_prediction_files
    from crucible.matbench.tasks import COMPOSITION_ONLY, STRUCTURE

    from helpers import clean_task

    built = {task: clean_task(task) for task in ("matbench_steels", "matbench_dielectric")}
    cards = {task: card for task, (_, card, _) in built.items()}
    assert {t: c["input_type"] for t, c in cards.items()} == {
        "matbench_steels": "composition",
        "matbench_dielectric": "structure",
    }
    fold_files = {}
    for task, (data, _, folds) in built.items():
        (tmp_path / task).mkdir()
        write_parquet(data, tmp_path / task / "data.parquet")
        write_parquet(folds, tmp_path / task / "folds.parquet")
        fold_files[task] = _dummy_fold_files(tmp_path / task, data, folds)
    records = []
    for model, kinds in {
        "dummy": (COMPOSITION_ONLY, COMPOSITION_ONLY),
        "gbm-magpie": (COMPOSITION_ONLY, COMPOSITION_ONLY),
        "rf-scm-magpie": (COMPOSITION_ONLY, STRUCTURE),
    }.items():
        for (task, card), kind in zip(cards.items(), kinds):
            records.append(
                score_prediction_files(
                    task,
                    tmp_path / task / "data.parquet",
                    tmp_path / task / "folds.parquet",
                    fold_files[task],
                    task_type=card["task_type"],
                    mad=card["mad"],
                    model=model,
                    inputs_given=kind,
                )
            )
    paths = {}
    for i, rec in enumerate(records):
        write_json(rec, tmp_path / f"s{i}.json")
    for task, card in cards.items():
        write_json(card, tmp_path / f"{task}.json")
        paths[task] = tmp_path / f"{task}.json"
    drawn = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, *p: drawn.append(fig))

    def build(card_paths):
        lb.write_leaderboard_files(
            [tmp_path / f"s{i}.json" for i in range(len(records))],
            REPO / "config" / "published_matbench.yaml",
            *(str(tmp_path / name) for name in ("l.csv", "l.md", "l.tex", "f.csv", "s.png", "s.pdf")),
            card_paths,
        )
        return drawn[-1].axes[0]

    ax = build(list(paths.values()))
    order = [t.get_text().split(" ")[0] for t in ax.get_xticklabels()]
    assert order == ["steels", "dielectric"]
    assert _drawn_entries(ax, "dummy") == {0: False, 1: True}
    assert _drawn_entries(ax, "gbm-magpie") == {0: False, 1: True}
    assert _drawn_entries(ax, "rf-scm-magpie") == {0: False, 1: False}
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "composition only\n(structure task)" in labels
    assert {"dummy", "gbm-magpie", "rf-scm-magpie"} <= set(labels)
    assert "formulas only where the task gives structures" in ax.get_title()
    # published markers are never hollow, so "hollow" means one thing
    assert not any(_is_hollow(c) for c in ax.collections if c.get_label().startswith("published"))

    # Without cards (a hand call), the records' task_input says which tasks are structure tasks.
    assert _drawn_entries(build([]), "dummy") == {0: False, 1: True}


def test_scaled_error_figure_without_composition_only_entries_has_no_such_legend():
    table = leaderboard(RECORDS, PUBLISHED)
    ax = figures.scaled_error_figure(table, PUBLISHED_COLUMNS, {"dummy": [False, False]}).axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "composition only\n(structure task)" not in labels and "hollow" not in ax.get_title()
    assert not any(_is_hollow(c) for c in ax.collections if not c.get_label().startswith("published"))
