"""crucible.matbench.metrics equals scikit-learn bit for bit (the score job does not import it).

Against the scikit-learn functions matbench 0.6 calls, with ``==`` (no tolerance): on generated
cases (hypothesis, derandomized: ties, one-row classes, extreme magnitudes, all predictions one
class) and on every official test fold of real tasks with predictions of several kinds.
"""

from __future__ import annotations

import io
import json
import math
import zipfile

import numpy as np
import pandas as pd
import pytest
import sklearn.metrics as skm
from hypothesis import given, settings
from hypothesis import strategies as st

from crucible.matbench import metrics
from crucible.matbench.tasks import mirror_role

from helpers import archive_member

REGRESSION = ("mean_absolute_error", "mean_squared_error", "max_error")
CLASSIFICATION = ("accuracy_score", "balanced_accuracy_score", "f1_score", "roc_auc_score")


def assert_same(name: str, y_true, y_pred) -> None:
    ours = getattr(metrics, name)(y_true, y_pred)
    theirs = float(getattr(skm, name)(y_true, y_pred))
    assert type(ours) is float
    assert ours == theirs or (math.isnan(ours) and math.isnan(theirs)), (name, ours, theirs)


floats = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=150, derandomize=True, deadline=None)
@given(st.lists(st.tuples(floats, floats), min_size=1, max_size=300), st.sampled_from([1.0, 1e-9, 1e9]))
def test_regression_metrics_equal_sklearn(pairs, scale):
    t = np.array([a for a, _ in pairs]) * scale
    p = np.array([b for _, b in pairs]) * scale
    for name in REGRESSION:
        assert_same(name, t, p)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 20)), min_size=2, max_size=400),
    st.sampled_from([1, 3, 20]),
)
def test_classification_metrics_equal_sklearn(rows, levels):
    """Scores on a coarse grid (``levels`` distinct values) make ties; labels from them too."""
    t = np.array([a for a, _ in rows])
    if t.all() or not t.any():  # both classes, as the scorer requires
        t[0] = not t[0]
    proba = np.array([b % (levels + 1) for _, b in rows], dtype=np.float64) / levels
    labels = proba > 0.5
    for name in CLASSIFICATION:
        assert_same(name, t, labels)
    assert_same("roc_auc_score", t, proba)


def test_degenerate_predictions_equal_sklearn():
    t = np.array([True, False, False, True, False])
    for pred in (np.zeros(5, dtype=bool), np.ones(5, dtype=bool), t, ~t):
        for name in CLASSIFICATION:
            with np.errstate(all="ignore"):
                assert_same(name, t, pred)
    assert metrics.f1_score(t, np.zeros(5, dtype=bool)) == 0.0


@pytest.fixture(scope="module")
def real_folds(crabnet_wheel):
    """(task, truth of each official test fold) of two regression and two classification tasks."""
    matbench = pytest.importorskip("matbench")
    from matbench.constants import MBV01_VALIDATION_DATA_PATH

    splits = json.loads(open(MBV01_VALIDATION_DATA_PATH).read())["splits"]
    out = []
    with zipfile.ZipFile(crabnet_wheel) as zf:
        for task in ("matbench_steels", "matbench_expt_gap", "matbench_expt_is_metal", "matbench_glass"):
            df = pd.read_csv(io.BytesIO(zf.read(archive_member(mirror_role(task))[0])), keep_default_na=False)
            width = math.floor(math.log10(len(df))) + 1
            prefix = task.replace("matbench", "mb").replace("_", "-")
            df.index = [f"{prefix}-{i + 1:0{width}d}" for i in range(len(df))]
            for k in range(5):
                out.append((task, df["target"].loc[splits[task][f"fold_{k}"]["test"]].to_numpy()))
    assert matbench
    return out


def test_every_real_fold_equals_sklearn(real_folds):
    rng = np.random.default_rng(0)
    for task, truth in real_folds:
        if task.endswith(("is_metal", "glass")):
            t = truth.astype(bool)
            proba = np.clip(0.5 + 0.3 * (t - 0.5) + rng.normal(0, 0.3, len(t)), 0.0, 1.0)
            proba[:7] = 0.5  # exactly at the threshold, and tied
            for scores in (proba, np.round(proba, 2), proba > 0.5, rng.random(len(t)) < 0.5):
                labels = scores > 0.5 if scores.dtype != bool else scores
                for name in CLASSIFICATION:
                    assert_same(name, t, labels)
                assert_same("roc_auc_score", t, scores)
        else:
            t = truth.astype(np.float64)
            for pred in (t + rng.normal(0.0, np.std(t), len(t)), np.full(len(t), t.mean()), t.copy()):
                for name in REGRESSION:
                    assert_same(name, t, pred)
