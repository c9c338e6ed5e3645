"""crucible.matbench.taskdata on a real task (matbench_steels from the pinned crabnet wheel, with
its official folds): test ids per fold, the Dummy's published per-fold MAE through the score
stage's file lists, the results file of several tasks, and refusals naming the file."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from crucible.core.errors import DataValidationError, PredictionFileError
from crucible.matbench import clean, folds
from crucible.matbench import resultsfile as rf
from crucible.matbench.prediction_files import write_predictions
from crucible.matbench.submission import split_per_task, write_results_files
from crucible.matbench.task_scores import score_prediction_files, score_task_files
from crucible.matbench.taskdata import TaskData, card_values, check_fold_paths
from crucible.matbench.tasks import COMPOSITION_ONLY

from helpers import PUBLISHED_DUMMY_MAE, TEST_FOLD_SIZES, clean_task

TASK = "matbench_steels"


@pytest.fixture(scope="module")
def stage_files(members, tmp_path_factory):
    """The clean and folds stages' files of matbench_steels, and the Dummy's five fold files
    (the training-fold mean, as DummyRegressor(strategy="mean") predicts)."""
    root = tmp_path_factory.mktemp("steels")
    data, card, table = clean_task(TASK)
    data_path, card_path, folds_path = root / f"{TASK}.parquet", root / f"{TASK}.json", root / "folds.parquet"
    clean.write_clean(data, card, data_path, card_path)
    folds.write_folds(table, folds_path)
    fold_of = table.set_index("mbid")["fold"].loc[data["mbid"]].to_numpy()
    preds = []
    for k in range(5):
        train, test = data[fold_of != k], data[fold_of == k]
        path = root / "pred" / TASK / f"fold_{k}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        frame = pd.DataFrame({"mbid": test["mbid"], "prediction": float(np.mean(train["target"]))})
        write_predictions(frame, path, "regression")
        preds.append(str(path))
    return {"data": str(data_path), "card": str(card_path), "folds": str(folds_path), "predictions": preds}


def test_test_ids_are_the_official_folds_in_data_order(stage_files):
    td = TaskData(TASK, stage_files["data"], stage_files["folds"])
    assert [len(ids) for ids in td.test_ids] == TEST_FOLD_SIZES[TASK]
    data = pd.read_parquet(stage_files["data"])
    order = {m: i for i, m in enumerate(data["mbid"])}
    for ids in td.test_ids:
        assert [order[m] for m in ids] == sorted(order[m] for m in ids)
    assert sorted(sum(td.test_ids, [])) == sorted(data["mbid"])
    assert td.truth.loc[td.test_ids[0][0]] == data.set_index("mbid").loc[td.test_ids[0][0], "target"]
    assert td.task_type == "regression" and td.inputs_given == COMPOSITION_ONLY


def test_folds_that_do_not_match_the_data_are_refused(stage_files, tmp_path):
    short = pd.read_parquet(stage_files["folds"]).iloc[:-1]
    folds.write_folds(short, tmp_path / "short.parquet")
    with pytest.raises(DataValidationError, match=r"short.parquet: rows do not match .*311 vs 312 rows"):
        TaskData(TASK, stage_files["data"], tmp_path / "short.parquet")
    with pytest.raises(DataValidationError, match=r"nowhere.parquet: file not found \(task matbench_steels\)"):
        TaskData(TASK, stage_files["data"], tmp_path / "nowhere.parquet")
    with pytest.raises(DataValidationError, match="but matbench_expt_is_metal is classification"):
        TaskData("matbench_expt_is_metal", stage_files["data"], stage_files["folds"])


def test_score_files_reproduce_the_published_dummy(stage_files, tmp_path):
    out = tmp_path / "scores.json"
    record = score_task_files(
        TASK, stage_files["data"], stage_files["folds"], stage_files["predictions"], out, card=stage_files["card"]
    )
    assert json.loads(out.read_text()) == json.loads(json.dumps(record))
    maes = [f["scores"]["mae"] for f in record["folds"]]
    assert maes == pytest.approx(PUBLISHED_DUMMY_MAE[TASK], abs=1e-9)
    assert round(record["leaderboard_value"], 4) == 229.7445
    # Type and MAD given instead of the card: the same record.
    task_type, mad = card_values(json.loads(open(stage_files["card"]).read()), TASK)
    explicit = score_task_files(
        TASK,
        stage_files["data"],
        stage_files["folds"],
        stage_files["predictions"],
        tmp_path / "b.json",
        task_type=task_type,
        mad=mad,
    )
    assert (
        explicit
        == record
        == score_prediction_files(
            TASK,
            stage_files["data"],
            stage_files["folds"],
            stage_files["predictions"],
            task_type=task_type,
            mad=mad,
            model=None,
        )
    )
    with pytest.raises(DataValidationError, match="score needs --card, or both --task-type and --mad"):
        score_task_files(TASK, stage_files["data"], stage_files["folds"], stage_files["predictions"], out, mad=1.0)
    with pytest.raises(DataValidationError, match="--task-type classification disagrees"):
        score_task_files(
            TASK,
            stage_files["data"],
            stage_files["folds"],
            stage_files["predictions"],
            out,
            task_type="classification",
            mad=0.5,
        )


def test_card_of_another_task_is_refused(stage_files):
    card = json.loads(open(stage_files["card"]).read())
    with pytest.raises(DataValidationError, match=r"c.json: task card of 'matbench_steels', not 'matbench_glass'"):
        card_values(card, "matbench_glass", "c.json")


def test_fold_files_out_of_order_are_refused(stage_files):
    paths = stage_files["predictions"]
    assert check_fold_paths(paths) == paths
    with pytest.raises(PredictionFileError, match="given as fold 0's predictions but named fold_1"):
        check_fold_paths([paths[1], paths[0], *paths[2:]])
    with pytest.raises(PredictionFileError, match="needs 5 files"):
        check_fold_paths(paths[:4])


def test_split_per_task_checks_counts_and_names():
    tasks = ["matbench_steels", "matbench_glass"]
    assert split_per_task("--data", ["d/matbench_steels.parquet", "d/matbench_glass.parquet"], tasks) == {
        "matbench_steels": ["d/matbench_steels.parquet"],
        "matbench_glass": ["d/matbench_glass.parquet"],
    }
    with pytest.raises(DataValidationError, match="--data: d/matbench_glass.parquet is given for task matbench_steels"):
        split_per_task("--data", ["d/matbench_glass.parquet", "d/matbench_steels.parquet"], tasks)
    with pytest.raises(DataValidationError, match=r"--folds needs 1 file\(s\) per task \(2\), got 1"):
        split_per_task("--folds", ["f.parquet"], tasks)
    preds = [f"p/{t}/fold_{k}.parquet" for t in tasks for k in range(5)]
    assert split_per_task("--predictions", preds, tasks, 5)["matbench_glass"] == preds[5:]


def test_results_file_holds_the_predictions_and_loads(stage_files, tmp_path):
    out, info = tmp_path / "results.json.gz", tmp_path / "info.json"
    text = write_results_files(
        "dummy",
        [TASK],
        stage_files["predictions"],
        [stage_files["data"]],
        [stage_files["folds"]],
        out,
        out_info=info,
        authors="someone",
        notes=None,
    )
    assert text == COMPOSITION_ONLY
    td = TaskData(TASK, stage_files["data"], stage_files["folds"])
    d = rf.read_results_file(out, {TASK: td.test_ids})
    fold0 = d["tasks"][TASK]["results"]["fold_0"]
    expected = pd.read_parquet(stage_files["predictions"][0])
    assert fold0["data"] == dict(zip(expected["mbid"], expected["prediction"]))
    assert d["user_metadata"]["input"] == COMPOSITION_ONLY
    written = json.loads(info.read_text())
    assert written["authors"] == "someone" and written["algorithm"] == "dummy"
    assert written["algorithm_long"].startswith("dummy, run by crucible") and written["bibtex_refs"]
