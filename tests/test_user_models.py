"""Plugging in your own model: an estimator by class path, or one predictions file per fold
made elsewhere, validated like our own and scored the same way."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml

from crucible.errors import ConfigError
from crucible.models.registry import get_spec

from helpers import REPO, clean_task

pytestmark = [pytest.mark.slow, pytest.mark.network]


def _write_fold_files(root, task, value=None):
    data, card, folds = clean_task(task)
    for k in range(5):
        test = data[folds["fold"].to_numpy() == k]
        pred = np.full(len(test), value if value is not None else float(data["target"].median()))
        out = root / task / f"fold_{k}.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"mbid": test["mbid"].to_numpy(), "prediction": pred}).to_parquet(out, index=False)


def _run(workdir, config, env, *args):
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
        "--cores",
        "2",
        *args,
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def test_custom_estimator_and_prediction_files(tmp_path, venv_env):
    preds = tmp_path / "elsewhere"
    _write_fold_files(preds, "matbench_steels")
    config = {
        "matbench": {
            "tasks": ["matbench_steels"],
            "models": ["my-ridge", "my-preds"],
            "custom_models": {
                "my-ridge": {"class": "sklearn.linear_model:Ridge", "input": "magpie", "params": {"alpha": 10.0}}
            },
            "prediction_files": {"my-preds": {"dir": str(preds)}},
        },
        "mlip": {"models": []},
    }
    work = tmp_path / "run"
    work.mkdir()
    proc = _run(work, config, venv_env, "matbench")
    assert proc.returncode == 0, proc.stderr[-4000:]
    ridge = json.loads((work / "results/matbench/scores/my-ridge/matbench_steels.json").read_text())
    files = json.loads((work / "results/matbench/scores/my-preds/matbench_steels.json").read_text())
    assert ridge["leaderboard_value"] < 200 and files["leaderboard_value"] > 200
    info = json.loads((work / "results/matbench/predictions/my-ridge/matbench_steels/fold_0.json").read_text())
    assert info["params"]["alpha"] == 10.0

    # A broken file: a duplicated id. The run stops naming file, fold and id; the scores made
    # before stay as they were.
    before = (work / "results/matbench/scores/my-preds/matbench_steels.json").read_bytes()
    fold2 = preds / "matbench_steels" / "fold_2.parquet"
    df = pd.read_parquet(fold2)
    pd.concat([df, df.iloc[[0]]]).to_parquet(fold2, index=False)
    proc = _run(work, config, venv_env, "matbench")
    assert proc.returncode != 0
    log = (work / "logs/matbench/import/my-preds/matbench_steels/fold_2.log").read_text()
    assert "fold_2.parquet" in log and "fold 2" in log and df["mbid"].iloc[0] in log
    assert (work / "results/matbench/scores/my-preds/matbench_steels.json").read_bytes() == before


def test_custom_model_class_errors_are_named():
    with pytest.raises(ConfigError, match="cannot import 'nowhere.mod:Model'"):
        get_spec("x", {"x": {"class": "nowhere.mod:Model"}})
    with pytest.raises(ConfigError, match="unknown model 'nope'; known models: .*comp-transformer.*dummy.*gbm-magpie"):
        get_spec("nope")
