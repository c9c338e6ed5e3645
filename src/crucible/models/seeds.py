"""An estimator's ``random_state``: fixed by the job unless the user set one, and recorded beside
the predictions (an unseeded estimator would give different numbers on every run)."""

from __future__ import annotations

import inspect
from typing import Any


def takes_random_state(estimator: Any) -> bool:
    if hasattr(estimator, "get_params"):
        try:
            return "random_state" in estimator.get_params(deep=False)
        except TypeError:
            return "random_state" in estimator.get_params()
    try:
        return "random_state" in inspect.signature(type(estimator)).parameters
    except (TypeError, ValueError):
        return False


def seed_estimator(estimator: Any, seed: int) -> Any:
    """Give an estimator that takes ``random_state`` a fixed one unless it already has one."""
    if not takes_random_state(estimator):
        return estimator
    current = estimator.get_params().get("random_state") if hasattr(estimator, "get_params") else None
    if current is None:
        if hasattr(estimator, "set_params"):
            estimator.set_params(random_state=seed)
        else:
            estimator.random_state = seed
    return estimator


def recorded_seed(estimator: Any, default: int) -> int | None:
    """The seed to write beside the predictions: the estimator's own, or the job's."""
    if takes_random_state(estimator) and hasattr(estimator, "get_params"):
        value = estimator.get_params().get("random_state")
        return value if isinstance(value, int) else None
    return default
