"""Registry entries of the torch networks, kept apart from their packages: the workflow reads a
network's device, inputs and granularity when it plans, which must not import torch (the
Python 3.12 leg and a CPU-only laptop plan the full DAG without it). The factory imports the
estimator, and torch with it, only when a job builds the model."""

from __future__ import annotations

from typing import Any

from crucible.models.registry import ModelSpec, register

PARAMS = (
    "amp", "batch_size", "d_ff", "d_model", "device", "dropout", "element_table", "epochs", "inference_batch_size",
    "lr", "n_heads", "n_layers", "n_models", "num_threads", "patience", "random_state", "refit", "swa_frac",
    "target_scaling", "task_type", "val_smoothing", "warmup", "weight_decay",
)  # fmt: skip


def _comp_transformer(task_type: str, random_state: int, **params: Any):
    from crucible.models.comp_transformer.estimator import CompTransformer

    return CompTransformer(task_type=task_type, random_state=random_state, **params)


register(
    ModelSpec(
        name="comp-transformer",
        factory=_comp_transformer,
        input_kind="composition",
        description=(
            "fraction-aware transformer over the elements of a formula (mat2vec embeddings), "
            "trained per fold with early stopping on the inner validation rows"
        ),
        uses_validation=True,
        device="gpu",
        runs_torch=True,
        # CompTransformer's get_params() names, written here so that planning does not import torch
        # (tests/test_comp_transformer.py holds them equal)
        params=PARAMS,
    )
)
