"""Baselines that need no features: the Matbench Dummy model, as scikit-learn's own dummies.

The estimators are in :mod:`crucible.models.dummies`: the Snakemake process imports this module at
start-up to read the spec, and must not pay for importing scikit-learn there.
"""

from __future__ import annotations

import math

from crucible.models.registry import ModelSpec, register


def _dummy(task_type: str, random_state: int):
    from crucible.models.dummies import MeanRegressor, PriorClassifier

    return MeanRegressor() if task_type == "regression" else PriorClassifier()


register(
    ModelSpec(
        name="dummy",
        factory=_dummy,
        input_kind="composition",
        task_jobs_up_to=math.inf,
        description="training-fold mean (regression) / class prior (classification)",
    )
)
