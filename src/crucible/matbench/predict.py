"""The predict stage: fit a model on each requested fold's training rows, predict its test rows.

``crucible matbench predict`` (an official task) and ``crucible matbench user-predict`` (a user
dataset: the task is the card's) run :func:`predict_folds`. This module imports nothing heavy at
its top: ``threads`` must reach the thread variables before the estimator libraries load.
"""

from __future__ import annotations

import os
from typing import Any

from crucible.errors import ConfigError


def predict_folds(
    model: str,
    fold: list[int],
    data: str,
    card: str,
    folds: str,
    out: list[str],
    task: str | None = None,
    features: str | None = None,
    structure_features: str | None = None,
    params: dict[str, Any] | None = None,
    custom_models: dict[str, Any] | None = None,
    element_table: str | None = None,
    seed: int = 0,
    threads: int = 0,
    out_model_dir: str | None = None,
) -> None:
    """Fit and predict each of ``fold`` into its ``out`` file, in turn, in this process (per-task
    jobs of cheap models fit all five); ``task`` None: the card's task."""
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
    from crucible.io import read_json
    from crucible.matbench.inference import run_predict
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
