"""Our stability metrics against matbench-discovery 1.3.1's own ``stable_metrics`` (installed by
the test extra's Makefile line, without its dependencies), on random inputs with missing
predictions, NaNs, unrealistic predictions and values on the rounding and stability edges.

The peer's package ``__init__`` imports plotly and pymatviz and creates folders inside the
installed package; its ``data`` module downloads the WBM summary from figshare when imported, and
its ``preds`` module every model's predictions. Its ``metrics`` module needs only
``STABILITY_THRESHOLD`` of the package, so it is imported under a bare package module that holds
that constant, read from the peer's own ``__init__.py`` (nothing of the peer runs but its
metric function; nothing goes online)."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import math
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crucible.discovery import stability
from crucible.discovery.stability import E_FORM_DFT, EACH_TRUE, ID_COLUMN, METRICS, UNIQUE_PROTOTYPE

PEER = "matbench_discovery"
PEER_VERSION = "1.3.1"


def _peer_threshold(init: Path) -> float:
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["STABILITY_THRESHOLD"]:
            return ast.literal_eval(node.value)
    raise AssertionError(f"{init}: no STABILITY_THRESHOLD")


@pytest.fixture(scope="module")
def peer():
    spec = importlib.util.find_spec(PEER)
    if spec is None:
        pytest.skip(f"matbench-discovery=={PEER_VERSION} (the peer) is installed by `make install`")
    assert importlib.metadata.version("matbench-discovery") == PEER_VERSION
    folder = Path(list(spec.submodule_search_locations)[0])
    saved = {k: v for k, v in sys.modules.items() if k == PEER or k.startswith(PEER + ".")}
    bare = types.ModuleType(PEER)
    bare.__path__ = [str(folder)]
    bare.STABILITY_THRESHOLD = _peer_threshold(folder / "__init__.py")
    sys.modules[PEER] = bare
    try:
        module = importlib.import_module(f"{PEER}.metrics")
        yield module
    finally:
        for k in [k for k in sys.modules if k == PEER or k.startswith(PEER + ".")]:
            del sys.modules[k]
        sys.modules.update(saved)


def _close(ours: float, theirs: float) -> bool:
    if math.isnan(ours) or math.isnan(theirs):
        return math.isnan(ours) and math.isnan(theirs)
    return abs(ours - theirs) <= 1e-9 * max(1.0, abs(theirs))


def _hull_distances(rng, n: int, nan_true: float, nan_pred: float):
    # a grid of 1 meV steps around 0, so that exact zeros (stable by ≤ 0) are common
    each_true = np.round(rng.normal(0.05, 0.1, n), 3)
    each_pred = np.round(each_true + rng.normal(0, 0.05, n), 3)
    each_true[rng.random(n) < nan_true] = np.nan
    each_pred[rng.random(n) < nan_pred] = np.nan
    return each_true, each_pred


def _peer_metrics(peer, each_true, each_pred) -> dict | None:
    try:
        return peer.stable_metrics(pd.Series(each_true), pd.Series(each_pred), fillna=True)
    except ValueError as exc:
        # its own sanity check FPR + TNR == 1 compared in floating point: an input the peer refuses
        assert "don't add up to 1" in str(exc)
        return None


@pytest.mark.parametrize("seed", range(40))
def test_stable_metrics_equal_the_peers(peer, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 5000))
    each_true, each_pred = _hull_distances(rng, n, nan_true=0.02 * (seed % 3), nan_pred=0.05 * (seed % 4))
    theirs = _peer_metrics(peer, each_true, each_pred)
    if theirs is None:
        pytest.skip("the peer refuses this input (its FPR + TNR == 1 check in floating point)")
    ours = stability.stable_metrics(each_true, each_pred)
    for key in (*METRICS, *stability.COUNTS):
        assert _close(float(ours[key]), float(theirs[key])), (key, ours[key], theirs[key])


def _wbm_and_preds(rng, n: int):
    ids = np.array([f"wbm-{1 + k // 1000}-{k % 1000 + 1}" for k in range(n)])
    e_form = rng.normal(-0.5, 0.8, n)
    each_true = rng.normal(0.08, 0.12, n)
    each_true[rng.random(n) < 0.003] = np.nan  # rows of the summary without a hull distance
    each_true[:50] = np.round(each_true[:50], 3) + 0.0004  # stable only once rounded
    wbm = pd.DataFrame(
        {ID_COLUMN: ids, E_FORM_DFT: e_form, EACH_TRUE: each_true, UNIQUE_PROTOTYPE: rng.random(n) < 0.8},
        index=pd.Index(ids, name=ID_COLUMN),
    )
    pred = e_form + rng.normal(0.0, 0.06, n)
    pred[rng.random(n) < 0.01] = np.nan  # an empty cell in the predictions file
    pred[rng.random(n) < 0.002] += 7.0  # unrealistic: more than 5 eV/atom off
    keep = rng.random(n) > 0.01  # materials the file leaves out
    preds = pd.Series(pred[keep], index=pd.Index(ids[keep], name=ID_COLUMN))
    return wbm, preds.sample(frac=1.0, random_state=int(rng.integers(1 << 30)))  # any row order


def _peer_pipeline(peer, wbm: pd.DataFrame, preds: pd.Series) -> dict:
    """The steps of matbench-discovery 1.3.1's preds module (load_df_wbm_with_preds and the
    metric loop below it) for one model, around its own stable_metrics."""
    df = wbm.copy()
    df["model"] = preds
    bad = (df["model"] - df[E_FORM_DFT]).abs() > 5.0
    df.loc[bad, "model"] = pd.NA
    df = df.round(3)
    uniq_prevalence = (wbm.query(UNIQUE_PROTOTYPE)[EACH_TRUE] <= 0).mean()
    each_pred = df[EACH_TRUE] + df["model"] - df[E_FORM_DFT]
    full = peer.stable_metrics(df[EACH_TRUE], each_pred, fillna=True)
    uq = df[wbm[UNIQUE_PROTOTYPE]]
    each_pred_uq = uq[EACH_TRUE] + uq["model"] - uq[E_FORM_DFT]
    uniq = peer.stable_metrics(uq[EACH_TRUE], each_pred_uq, fillna=True)
    uniq["DAF"] = uniq["Precision"] / uniq_prevalence
    top = each_pred_uq.nsmallest(10_000)
    tenk = peer.stable_metrics(df[EACH_TRUE].loc[top.index], top, fillna=True)
    tenk["DAF"] = tenk["Precision"] / uniq_prevalence
    return {"full_test_set": full, "unique_prototypes": uniq, "most_stable_10k": tenk}


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_the_three_subsets_equal_the_peers_pipeline(peer, seed):
    rng = np.random.default_rng(100 + seed)
    wbm, preds = _wbm_and_preds(rng, 30_000)
    theirs = _peer_pipeline(peer, wbm, preds)
    ours = stability.discovery_metrics(wbm, preds)
    for subset in stability.SUBSETS:
        for key in (*METRICS, *stability.COUNTS):
            assert _close(float(ours[subset][key]), float(theirs[subset][key])), (subset, key)
    assert ours["absent"] == 30_000 - len(preds) + int(preds.isna().sum())
    assert ours["unrealistic"] > 0 and ours["full_test_set"]["missing_preds"] == ours["absent"] + ours["unrealistic"]
    assert ours["most_stable_10k"]["TP"] + ours["most_stable_10k"]["FP"] <= 10_000


def test_rounding_comes_before_the_threshold():
    # 0.0004 eV/atom above the hull is on it once rounded to 3 decimals: stable, as on the leaderboard
    wbm = pd.DataFrame(
        {E_FORM_DFT: [-1.0, -1.0], EACH_TRUE: [0.0004, 0.2], UNIQUE_PROTOTYPE: [True, True]},
        index=pd.Index(["a", "b"], name=ID_COLUMN),
    )
    out = stability.discovery_metrics(wbm, pd.Series([-0.9996, -0.5], index=["a", "b"]))
    assert out["full_test_set"]["TP"] == 1 and out["full_test_set"]["TN"] == 1


def test_a_missing_prediction_is_unstable_and_counted():
    wbm = pd.DataFrame(
        {E_FORM_DFT: [-1.0, -1.0, -1.0], EACH_TRUE: [-0.1, 0.1, -0.2], UNIQUE_PROTOTYPE: [True, True, False]},
        index=pd.Index(["a", "b", "c"], name=ID_COLUMN),
    )
    out = stability.discovery_metrics(wbm, pd.Series([-1.1, 9.0], index=["a", "b"]))
    full = out["full_test_set"]
    assert (full["TP"], full["FN"], full["TN"], full["FP"]) == (1, 1, 1, 0)
    assert (out["absent"], out["unrealistic"], full["missing_preds"]) == (1, 1, 2)
    assert out["unique_prototypes"]["missing_preds"] == 1


def test_predictions_of_unknown_or_repeated_materials_are_refused():
    from crucible.core.errors import DataValidationError

    wbm = pd.DataFrame(
        {E_FORM_DFT: [-1.0], EACH_TRUE: [0.1], UNIQUE_PROTOTYPE: [True]}, index=pd.Index(["a"], name=ID_COLUMN)
    )
    with pytest.raises(DataValidationError, match=r"preds.csv: 1 material_id\(s\) not in the WBM summary, e.g. 'zz'"):
        stability.discovery_metrics(wbm, pd.Series([0.1, 0.2], index=["a", "zz"]), where="preds.csv")
    with pytest.raises(DataValidationError, match="'a' predicted more than once"):
        stability.discovery_metrics(wbm, pd.Series([0.1, 0.2], index=["a", "a"]))
