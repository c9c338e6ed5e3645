"""Tree ensembles on the 132 Magpie composition features."""

from __future__ import annotations

import os

from crucible.models.registry import ModelSpec, register

# scikit-learn is imported by the factories, not here: the Snakemake process imports this module
# at start-up to read the specs (a model's input kind and job layout), and must not pay ~2 CPU-s
# for scikit-learn there.


def _n_jobs() -> int:
    # Snakemake exports the job's thread count; outside it use every core.
    return int(os.environ.get("OMP_NUM_THREADS", "0")) or -1


def _random_forest(task_type: str, random_state: int, **params):
    """The RF-SCM/Magpie setup on composition input: 500 trees, scikit-learn defaults otherwise."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    cls = RandomForestRegressor if task_type == "regression" else RandomForestClassifier
    params.setdefault("n_jobs", _n_jobs())
    return cls(random_state=random_state, **params)


def _gradient_boosting(task_type: str, random_state: int, **params):
    """Histogram gradient boosting: minutes instead of hours on the 100k-row tasks."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    cls = HistGradientBoostingRegressor if task_type == "regression" else HistGradientBoostingClassifier
    # A fixed number of iterations (no internal early-stopping split) keeps cost predictable
    # and the model a function of the training rows alone.
    params.setdefault("early_stopping", False)
    return cls(random_state=random_state, **params)


def _forest_class(task_type: str) -> type:
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    return RandomForestRegressor if task_type == "regression" else RandomForestClassifier


def _boosting_class(task_type: str) -> type:
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    return HistGradientBoostingRegressor if task_type == "regression" else HistGradientBoostingClassifier


register(
    ModelSpec(
        name="rf-magpie",
        factory=_random_forest,
        input_kind="magpie",
        description="500-tree random forest on Magpie features (RF-SCM/Magpie, composition only)",
        defaults={"n_estimators": 500},
        estimator=_forest_class,
    )
)

register(
    ModelSpec(
        name="gbm-magpie",
        factory=_gradient_boosting,
        input_kind="magpie",
        description="histogram gradient boosting on Magpie features",
        defaults={"max_iter": 300, "learning_rate": 0.1, "max_leaf_nodes": 63, "min_samples_leaf": 10},
        # A fold fits in 1-5 s up to perovskites (18,928 rows), 20-30 s on the mp tasks (106k-133k).
        task_jobs_up_to=20_000,
        estimator=_boosting_class,
    )
)
