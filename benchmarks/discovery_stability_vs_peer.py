"""Our discovery stability metrics against matbench-discovery 1.3.1's own ``stable_metrics``, on
random inputs (no figshare file is reachable here).

    python benchmarks/discovery_stability_vs_peer.py [--cases 200] [--pipelines 8]

The peer must be installed (``make install`` does it, without its dependencies). Its metric module
is imported under a bare package module holding only its ``STABILITY_THRESHOLD`` (read from its
``__init__.py``): the package ``__init__`` imports plotly and pymatviz, and its ``data`` and
``preds`` modules download from figshare at import time.

Two kinds of input: hull distances straight into ``stable_metrics`` (sizes 50…5,000, NaNs in
truth and prediction, many exact zeros), and whole WBM-like tables of 30,000 materials through the
steps of its ``preds`` module (the 5 eV/atom cut, rounding of the frame to 3 decimals, the three
subsets and their DAF), scored by ``crucible.discovery.stability.discovery_metrics``. Prints the
largest absolute and relative difference per metric; exit status 1 above --rtol (1e-9).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import math
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd

from crucible.discovery import stability
from crucible.discovery.stability import E_FORM_DFT, EACH_TRUE, ID_COLUMN, UNIQUE_PROTOTYPE

PEER = "matbench_discovery"


def peer_metrics():
    spec = importlib.util.find_spec(PEER)
    if spec is None:
        sys.exit("matbench-discovery is not installed (make install installs 1.3.1)")
    folder = Path(list(spec.submodule_search_locations)[0])
    bare = types.ModuleType(PEER)
    bare.__path__ = [str(folder)]
    for node in ast.parse((folder / "__init__.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["STABILITY_THRESHOLD"]:
            bare.STABILITY_THRESHOLD = ast.literal_eval(node.value)
    sys.modules[PEER] = bare
    return importlib.import_module(f"{PEER}.metrics")


def peer_pipeline(peer, wbm: pd.DataFrame, preds: pd.Series) -> dict:
    """The steps of 1.3.1's preds module for one model, around its own stable_metrics."""
    df = wbm.copy()
    df["model"] = preds
    df.loc[(df["model"] - df[E_FORM_DFT]).abs() > 5.0, "model"] = pd.NA
    df = df.round(3)
    prevalence = (wbm.query(UNIQUE_PROTOTYPE)[EACH_TRUE] <= 0).mean()
    out = {"full_test_set": peer.stable_metrics(df[EACH_TRUE], df[EACH_TRUE] + df["model"] - df[E_FORM_DFT])}
    uq = df[wbm[UNIQUE_PROTOTYPE]]
    each_pred = uq[EACH_TRUE] + uq["model"] - uq[E_FORM_DFT]
    out["unique_prototypes"] = peer.stable_metrics(uq[EACH_TRUE], each_pred)
    top = each_pred.nsmallest(10_000)
    out["most_stable_10k"] = peer.stable_metrics(df[EACH_TRUE].loc[top.index], top)
    for subset in ("unique_prototypes", "most_stable_10k"):
        out[subset]["DAF"] = out[subset]["Precision"] / prevalence
    return out


def random_table(rng, n: int):
    ids = np.array([f"wbm-{1 + k // 1000}-{k % 1000 + 1}" for k in range(n)])
    e_form = rng.normal(-0.5, 0.8, n)
    each_true = rng.normal(0.08, 0.12, n)
    each_true[rng.random(n) < 0.003] = np.nan
    wbm = pd.DataFrame(
        {E_FORM_DFT: e_form, EACH_TRUE: each_true, UNIQUE_PROTOTYPE: rng.random(n) < 0.8},
        index=pd.Index(ids, name=ID_COLUMN),
    )
    pred = e_form + rng.normal(0.0, 0.06, n)
    pred[rng.random(n) < 0.01] = np.nan
    pred[rng.random(n) < 0.002] += 7.0
    keep = rng.random(n) > 0.01
    return wbm, pd.Series(pred[keep], index=pd.Index(ids[keep], name=ID_COLUMN))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--pipelines", type=int, default=8)
    parser.add_argument("--rtol", type=float, default=1e-9)
    args = parser.parse_args()
    peer = peer_metrics()
    keys = (*stability.METRICS, *stability.COUNTS)
    worst = {k: [0.0, 0.0] for k in keys}
    refused = nan_mismatch = 0

    def compare(ours, theirs):
        nonlocal nan_mismatch
        for k in keys:
            a, b = float(ours[k]), float(theirs[k])
            if math.isnan(a) or math.isnan(b):
                nan_mismatch += math.isnan(a) != math.isnan(b)
                continue
            worst[k][0] = max(worst[k][0], abs(a - b))
            worst[k][1] = max(worst[k][1], abs(a - b) / max(abs(b), 1e-300))

    rng = np.random.default_rng(0)
    for case in range(args.cases):
        n = int(rng.integers(50, 5000))
        each_true = np.round(rng.normal(0.05, 0.1, n), 3)
        each_pred = np.round(each_true + rng.normal(0, 0.05, n), 3)
        each_true[rng.random(n) < 0.02 * (case % 3)] = np.nan
        each_pred[rng.random(n) < 0.05 * (case % 4)] = np.nan
        try:
            theirs = peer.stable_metrics(pd.Series(each_true), pd.Series(each_pred))
        except ValueError:
            refused += 1
            continue
        compare(stability.stable_metrics(each_true, each_pred), theirs)
    for _ in range(args.pipelines):
        wbm, preds = random_table(rng, 30_000)
        theirs = peer_pipeline(peer, wbm, preds)
        ours = stability.discovery_metrics(wbm, preds)
        for subset in stability.SUBSETS:
            compare(ours[subset], theirs[subset])
    print(f"{args.cases} stable_metrics cases ({refused} refused by the peer), {args.pipelines} pipelines x 3 subsets")
    print(f"{'metric':<10} {'max abs diff':>14} {'max rel diff':>14}")
    for k in keys:
        print(f"{k:<10} {worst[k][0]:>14.3e} {worst[k][1]:>14.3e}")
    print(f"NaN in one and not the other: {nan_mismatch}")
    return int(nan_mismatch > 0 or any(v[1] > args.rtol for v in worst.values()))


if __name__ == "__main__":
    sys.exit(main())
