"""One fold of the predict step: fit one model on the fold's training rows, predict its test rows.

The model never sees test rows before predicting them: they are removed from the table before
``fit`` is called. Models that early-stop get the fold's inner-validation rows separately;
every other model is fitted on all training rows of the fold (as the published baselines were).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crucible import __version__
from crucible.core.errors import CrucibleError
from crucible.core.io import read_parquet, write_json
from crucible.matbench.folds import split_rows
from crucible.models.registry import ModelSpec

log = logging.getLogger(__name__)


def model_inputs(
    spec: ModelSpec,
    rows: pd.DataFrame,
    features_path: str | os.PathLike | None,
    structure_features_path: str | os.PathLike | None = None,
    uses_structure: bool = False,
) -> Any:
    from crucible.matbench.structure_inputs import STRUCTURE_KINDS, structure_model_inputs

    if spec.input_kind in STRUCTURE_KINDS:
        return structure_model_inputs(spec, rows, features_path, structure_features_path, uses_structure)
    if spec.input_kind == "composition":
        return rows["formula"].reset_index(drop=True)
    if features_path is None:
        raise CrucibleError(f"model {spec.name!r} needs Magpie features: pass the feature cache")
    from crucible.features.cache import load_features

    return load_features(features_path, rows["formula"].tolist())


def fit_predict(
    spec: ModelSpec,
    data: pd.DataFrame,
    folds: pd.DataFrame,
    fold: int,
    task_type: str,
    params: dict[str, Any] | None = None,
    features_path: str | os.PathLike | None = None,
    random_state: int = 0,
    model_dir: str | os.PathLike | None = None,
    structure_features_path: str | os.PathLike | None = None,
    uses_structure: bool = False,
    task: str | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    from crucible.matbench import validation
    from crucible.models.seeds import recorded_seed

    context = validation.where(spec.name, task, fold)
    if not (data["mbid"].to_numpy() == folds["mbid"].to_numpy()).all():
        raise CrucibleError("data and folds tables list different mbids (rebuild the folds)")
    rows = split_rows(folds, fold)
    train_idx = rows["train"] if spec.uses_validation else np.sort(np.concatenate([rows["train"], rows["val"]]))
    train = data.iloc[train_idx]
    test = data.iloc[rows["test"]]
    estimator = spec.build(task_type, random_state, params)

    # One read of the features for every row of the task, then plain row selection: reading the
    # cache once per split (train, val, test) cost up to three reads per job.
    extra = {"structure_features_path": structure_features_path, "uses_structure": uses_structure}
    inputs = model_inputs(spec, data, features_path, **extra)
    X_train = inputs.iloc[train_idx].reset_index(drop=True)
    y_train = train["target"].to_numpy()
    fit_kwargs: dict[str, Any] = {}
    if spec.uses_validation:
        val = data.iloc[rows["val"]]
        fit_kwargs = {"X_val": inputs.iloc[rows["val"]].reset_index(drop=True), "y_val": val["target"].to_numpy()}
    started = time.perf_counter()
    from crucible.core.progress import heartbeat

    try:
        with heartbeat(log, context):
            estimator.fit(X_train, y_train, **fit_kwargs)
    except Exception as exc:  # a user's estimator can raise anything: name where it happened
        log.debug("fit traceback", exc_info=True)
        raise validation.ModelFitError(f"{context}: fit raised {type(exc).__name__}: {exc}") from exc
    fit_seconds = time.perf_counter() - started

    X_test = inputs.iloc[rows["test"]].reset_index(drop=True)
    started = time.perf_counter()
    out = pd.DataFrame({"mbid": test["mbid"].to_numpy()})
    n_test = len(out)
    if task_type == "regression":
        out["prediction"] = validation.regression_values(estimator.predict(X_test), n_test, context)
    else:
        if hasattr(estimator, "predict_proba"):
            classes = list(getattr(estimator, "classes_", [False, True]))
            out["probability"] = validation.classifier_probabilities(
                estimator.predict_proba(X_test), classes, n_test, context
            )
            out["prediction"] = out["probability"].to_numpy() > 0.5
        else:
            out["prediction"] = validation.classifier_labels(estimator.predict(X_test), n_test, context)
        out = out[["mbid", "prediction"] + (["probability"] if "probability" in out else [])]
    predict_seconds = time.perf_counter() - started

    if model_dir is not None and hasattr(estimator, "save"):
        estimator.save(model_dir)
    info = {
        "model": spec.name,
        "fold": fold,
        "params": _json_safe(estimator.get_params()) if hasattr(estimator, "get_params") else {},
        "n_train": int(len(train_idx)),
        "n_val": int(len(rows["val"])) if spec.uses_validation else 0,
        "n_test": int(len(rows["test"])),
        "seed": recorded_seed(estimator, random_state),
        "device": str(getattr(estimator, "device_", "cpu")),
        "fit_seconds": round(fit_seconds, 3),
        "predict_seconds": round(predict_seconds, 3),
        "structures_used": bool(uses_structure),
        "crucible_version": __version__,
    }
    fit_info = getattr(estimator, "fit_info_", None)
    if isinstance(fit_info, dict):
        # Device, precision, epochs run, ensemble size: what a reader needs to trust a number.
        info["fit_info"] = {
            k: v for k, v in sorted(fit_info.items()) if v is None or isinstance(v, (bool, int, float, str))
        }
    constant = getattr(estimator, "constant_", None)
    if constant is not None:
        # scikit-learn's DummyRegressor keeps one constant per output; we have one output.
        values = np.ravel(constant).tolist()
        info["constant_"] = values[0] if len(values) == 1 else values
    return out, info


def _json_safe(params: dict[str, Any]) -> dict[str, Any]:
    safe = {}
    for key, value in sorted(params.items()):
        if value is None or isinstance(value, (bool, int, float, str)):
            safe[key] = value
        else:
            safe[key] = repr(value)
    return safe


def run_predict(
    spec: ModelSpec,
    task: str,
    fold: int,
    data_path: str | os.PathLike,
    folds_path: str | os.PathLike,
    card: dict[str, Any],
    out_path: str | os.PathLike,
    params: dict[str, Any] | None = None,
    features_path: str | os.PathLike | None = None,
    model_dir: str | os.PathLike | None = None,
    random_state: int = 0,
    structure_features_path: str | os.PathLike | None = None,
) -> dict[str, Any]:
    from crucible.matbench.prediction_files import write_predictions
    from crucible.matbench.structure_inputs import check_card

    uses_structure = check_card(spec, card)
    data = read_parquet(data_path)
    folds = read_parquet(folds_path)
    log.info("%s %s fold %d: fitting", spec.name, task, fold)
    preds, info = fit_predict(
        spec,
        data,
        folds,
        fold,
        card["task_type"],
        params,
        features_path,
        random_state,
        model_dir,
        structure_features_path=structure_features_path,
        uses_structure=uses_structure,
        task=task,
    )
    info["task"] = task
    info["inputs"] = card.get("inputs_available", "composition")
    write_predictions(preds, out_path, card["task_type"])
    write_json(info, Path(out_path).with_suffix(".json"))
    log.info(
        "%s %s fold %d: fit %.1fs, predict %.1fs", spec.name, task, fold, info["fit_seconds"], info["predict_seconds"]
    )
    return info
