"""The predict stage: fit a model on each requested fold's training rows, predict its test rows
(each fold: :mod:`crucible.matbench.fold_fit`).

``crucible matbench predict`` (an official task) and ``crucible matbench user-predict`` (a user
dataset: the task is the card's) run :func:`predict_folds`. This module imports nothing heavy at
its top: ``threads`` must reach the thread variables before the estimator libraries load.
"""

from __future__ import annotations

import os
from typing import Any

from crucible.core.errors import ConfigError
from crucible.core.io import InFile


def predict_folds(
    model: str,
    fold: list[int],
    data: InFile,
    card: InFile,
    folds: InFile,
    out: list[str],
    task: str | None = None,
    features: InFile | None = None,
    structure_features: InFile | None = None,
    params: dict[str, Any] | None = None,
    custom_models: dict[str, Any] | None = None,
    element_table: InFile | None = None,
    seed: int = 0,
    threads: int = 0,
    out_model_dir: str | None = None,
) -> None:
    """Fit and predict each of ``fold`` into its ``out`` file, in turn, in this process (per-task
    jobs of cheap models fit all five); ``task`` None: the card's task.

    Args:
        fold: one fold, or several fitted in turn in this process (one --out each)
        data: the clean task table: results/matbench/data/{task}.parquet (or a user dataset's data.parquet)
        card: as in :func:`crucible.matbench.folds.write_task_folds`
        folds: the folds table: results/matbench/folds/{task}.parquet
        features: the task's Magpie feature file (models whose input_kind is magpie)
        structure_features: the task's per-structure feature file (structure models)
        params: JSON hyperparameter overrides
        custom_models: JSON of config's matbench.custom_models
        element_table: element embedding CSV for composition networks; checked against its pin when the model's
            element_table (default mat2vec) names a pinned table
        out_model_dir: where a model with save() writes its trained state
        seed: random_state for models that take one and do not set it in --params (recorded)
        threads: CPU threads of the fit (OMP/MKL/OpenBLAS variables; 0: leave them as they are)
        out: predictions parquet per --fold (a sidecar .json is written beside each)
    """
    if len(fold) != len(out) or len(set(fold)) != len(fold):
        raise ConfigError(
            f"predict: --fold and --out need one distinct fold per output file "
            f"(--fold {' '.join(map(str, fold))}, {len(out)} --out files)"
        )
    if out_model_dir and len(fold) > 1:
        raise ConfigError("predict: --out-model-dir holds one fold's model; give one --fold")
    if threads:
        # Before the estimator libraries start their thread pools.
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(threads)
    from crucible.core.io import read_json
    from crucible.matbench.fold_fit import run_predict
    from crucible.models.registry import get_spec

    spec = get_spec(model, custom_models or {})
    params = dict(params or {})
    if element_table:
        from crucible.models.element_tables import checked_table

        checked_table(params.get("element_table"), element_table)
        params["element_table"] = element_table
    task_card = read_json(card)
    for k, path in zip(fold, out):
        run_predict(
            spec,
            task or task_card["task"],
            k,
            data,
            folds,
            task_card,
            path,
            params=params,
            features_path=features,
            model_dir=out_model_dir,
            random_state=seed,
            structure_features_path=structure_features,
        )
