"""Baselines that need no features: the Matbench Dummy model."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin

from crucible.models.registry import ModelSpec, register


class MeanRegressor(RegressorMixin, BaseEstimator):
    """Predicts the training-fold mean: Matbench's published Dummy regressor.

    Fitted on every training row of the fold (inner-validation rows included), as the published
    Dummy was; this reproduces its per-fold MAE on the official folds to 1e-9.
    """

    def fit(self, X, y):
        self.constant_ = float(np.mean(np.asarray(y, dtype=np.float64)))
        self.n_features_in_ = 1
        return self

    def predict(self, X):
        return np.full(len(X), self.constant_, dtype=np.float64)


class PriorClassifier(ClassifierMixin, BaseEstimator):
    """Predicts the training-fold class prior: a deterministic Dummy classifier.

    ``predict_proba`` returns the fraction of True labels in the training fold for every row and
    ``predict`` the majority label. The published Matbench Dummy classifier instead drew labels
    at random in proportion to the prior (scikit-learn's 'stratified' strategy, seed unknown),
    so its per-fold scores scatter around 0.5 and cannot be reproduced bit for bit; this
    baseline's label-based ROC AUC and balanced accuracy are exactly 0.5.
    """

    def fit(self, X, y):
        y = np.asarray(y, dtype=bool)
        self.classes_ = np.array([False, True])
        self.prior_ = float(np.mean(y))
        self.n_features_in_ = 1
        return self

    def predict_proba(self, X):
        p = np.full(len(X), self.prior_, dtype=np.float64)
        return np.column_stack([1.0 - p, p])

    def predict(self, X):
        return np.full(len(X), self.prior_ > 0.5, dtype=bool)


def _dummy(task_type: str, random_state: int):
    return MeanRegressor() if task_type == "regression" else PriorClassifier()


register(ModelSpec(
    name="dummy",
    factory=_dummy,
    input_kind="composition",
    granularity="task",
    description="training-fold mean (regression) / class prior (classification)",
))
