"""Registry entries of the torch networks, kept apart from their packages: the workflow reads a
network's device, inputs and granularity when it plans, which must not import torch (the
Python 3.12 leg and a CPU-only laptop plan the full DAG without it). The factory imports the
estimator, and torch with it, only when a job builds the model."""

from __future__ import annotations

from typing import Any

from crucible.models.registry import ModelSpec, register


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
    )
)
