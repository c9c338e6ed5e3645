"""The diatomics metrics figure read as a reader reads it: a panel per metric whatever their
number, tick labels on every axis, the coverage of each potential of ours in its label, the
published row of a potential we rebuilt marked in its colour."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from crucible.discovery.metrics import METRICS
from crucible.discovery.report import HEADERS, coverage_label, metrics_figure, tick_text


def _table(metrics):
    rng = np.random.default_rng(0)
    rows = [
        {"model": "emt", "source": "crucible (cpu)", "n_elements": 11, "n_flagged": 0},
        {"model": "chgnet-0.3.0", "source": "crucible (cpu)", "n_elements": 89, "n_flagged": 3},
    ]
    rows += [{"model": f"pub-{k}", "source": "published", "n_elements": None, "n_flagged": None} for k in range(10)]
    rows.append({"model": "chgnet-0.3.0", "source": "published", "n_elements": None, "n_flagged": None})
    df = pd.DataFrame(rows)
    for m in metrics:
        # tortuosity-like (1.0-3.0, under a decade) and 4.5 decades, alternately
        span = 3.0 if len(m) % 2 else 3e4
        df[m] = np.exp(rng.uniform(0, math.log(span), len(df)))
    return df


@pytest.mark.parametrize("metrics", [METRICS, (*METRICS, "a_thirteenth_metric")])
def test_a_panel_per_metric_each_axis_with_readable_ticks(metrics):
    fig = metrics_figure(_table(metrics), metrics)
    fig.canvas.draw()
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(shown) == len(metrics)
    assert [ax.get_title() for ax in shown] == [HEADERS.get(m, m) for m in metrics]
    for ax in shown:
        lo, hi = ax.get_xlim()
        labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text() and lo <= t.get_position()[0] <= hi]
        assert len(labels) >= 3, (ax.get_title(), ax.get_xscale(), labels)
    labels = fig.legends[0].get_texts()
    assert [t.get_text() for t in labels] == [
        "published",
        "chgnet-0.3.0 (published)",
        "emt (11 el.)",
        "chgnet-0.3.0 (89 el., 3 flagged pts)",
    ]


def test_the_published_row_of_a_rebuilt_potential_is_drawn_in_its_colour_not_grey():
    df = _table(METRICS)
    fig = metrics_figure(df)
    ax = fig.axes[0]
    value = float(df[(df["model"] == "chgnet-0.3.0") & (df["source"] == "published")][METRICS[0]].iloc[0])
    grey = ax.collections[0].get_offsets()[:, 0]
    assert value not in grey.tolist() and len(grey) == 10
    ours_published = [c for c in ax.collections if c.get_label() == "chgnet-0.3.0 (published)"]
    ours = [c for c in ax.collections if c.get_label().startswith("chgnet-0.3.0 (89")]
    assert ours_published[0].get_offsets()[0, 0] == pytest.approx(value)
    assert np.allclose(ours_published[0].get_edgecolor()[0], ours[0].get_facecolor()[0])


def test_tick_and_coverage_texts():
    assert [tick_text(v) for v in (0.5, 20, 1000, 1e5, 1e17, 1e-4)] == ["0.5", "20", "1000", "1e5", "1e17", "1e-4"]
    assert coverage_label({"model": "emt", "n_elements": 11, "n_flagged": 0}) == "emt (11 el.)"
    assert coverage_label({"model": "x", "n_elements": 3, "n_flagged": 119}) == "x (3 el., 119 flagged pts)"
