"""Models that read crystal structures: the published RF-SCM/Magpie baseline and ``mlip-embed``.

``rf-scm-magpie`` (Dunn et al. 2020, ``benchmarks/matbench_v0.1_rf/info.json`` of the matbench
repository): a 500-tree random forest on the 132 Magpie features of the composition plus, on
structure tasks, the Sine Coulomb matrix eigenvalues of the structure; Magpie alone on
composition tasks. The published run used automatminer's pipeline without AutoML or feature
reduction: the featurizer is fitted on the training rows (so the eigenvalue vector is padded
with zeros to the largest training cell), a structure that matminer cannot featurize becomes a
row of NaN, and NaNs are imputed with the training mean. We do the same: a test cell with more
sites than any training cell gets the training mean for its Sine Coulomb block.

``mlip-embed``: a gradient-boosting head (gbm-magpie's settings) on a pretrained potential's
per-structure embedding (CHGNet 0.3.0's 64-float crystal feature vector), no fine-tuning.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.ensemble import (
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)

from crucible.features.magpie import COLUMNS as MAGPIE_COLUMNS
from crucible.models.registry import ModelSpec, register
from crucible.models.trees import _boosting_class, _n_jobs

SCM_COLUMN = "sine_coulomb_eigenvalues"


class ScmMagpieForest(BaseEstimator):
    """Random forest on Magpie features plus zero-padded Sine Coulomb eigenvalues.

    ``X``: a DataFrame with the 132 Magpie columns and, on structure tasks, a column
    ``sine_coulomb_eigenvalues`` holding each row's eigenvalue array.
    """

    def __init__(
        self, task_type: str = "regression", n_estimators: int = 500, random_state: int = 0, n_jobs: int | None = None
    ) -> None:
        self.task_type = task_type
        self.n_estimators = n_estimators
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _matrix(self, X: pd.DataFrame, fitting: bool) -> np.ndarray:
        magpie = X[list(MAGPIE_COLUMNS)].to_numpy(dtype=np.float64)
        if SCM_COLUMN not in X:
            if fitting:
                self.scm_width_ = 0
            elif self.scm_width_:
                raise ValueError("fitted with Sine Coulomb features, but X has none")
            return magpie
        eigs = list(X[SCM_COLUMN])
        if fitting:
            self.scm_width_ = max(len(e) for e in eigs)
        scm = np.zeros((len(eigs), self.scm_width_))
        for i, e in enumerate(eigs):
            if len(e) <= self.scm_width_:
                scm[i, : len(e)] = e
            else:  # matminer's featurize fails here; automatminer imputes the training mean
                scm[i] = np.nan
        out = np.hstack([magpie, scm])
        if fitting:
            self.train_means_ = np.nanmean(out, axis=0)
        rows, cols = np.nonzero(np.isnan(out))
        out[rows, cols] = self.train_means_[cols]
        return out

    def fit(self, X: pd.DataFrame, y) -> "ScmMagpieForest":
        cls = RandomForestRegressor if self.task_type == "regression" else RandomForestClassifier
        self.forest_ = cls(
            n_estimators=self.n_estimators,
            random_state=self.random_state,
            n_jobs=self.n_jobs if self.n_jobs is not None else _n_jobs(),
        )
        self.forest_.fit(self._matrix(X, fitting=True), y)
        if self.task_type != "regression":
            self.classes_ = self.forest_.classes_
        return self

    def predict(self, X: pd.DataFrame):
        return self.forest_.predict(self._matrix(X, fitting=False))

    def predict_proba(self, X: pd.DataFrame):
        if self.task_type == "regression":
            raise AttributeError("predict_proba is for classification")
        return self.forest_.predict_proba(self._matrix(X, fitting=False))

    @property
    def fit_info_(self) -> dict:
        return {"sine_coulomb_width": int(self.scm_width_), "structures_used": bool(self.scm_width_)}


def _rf_scm_magpie(task_type: str, random_state: int, **params):
    return ScmMagpieForest(task_type=task_type, random_state=random_state, **params)


def _embedding_boosting(task_type: str, random_state: int, **params):
    cls = HistGradientBoostingRegressor if task_type == "regression" else HistGradientBoostingClassifier
    params.setdefault("early_stopping", False)
    return cls(random_state=random_state, **params)


register(
    ModelSpec(
        name="rf-scm-magpie",
        factory=_rf_scm_magpie,
        input_kind="scm-magpie",
        description="RF-SCM/Magpie as published: 500-tree random forest on Magpie + Sine Coulomb matrix "
        "eigenvalues (structure tasks), Magpie alone on composition tasks",
        defaults={"n_estimators": 500},
        inputs=("formula", "structure"),
        estimator=lambda _task_type: ScmMagpieForest,
    )
)

register(
    ModelSpec(
        name="mlip-embed",
        factory=_embedding_boosting,
        input_kind="mlip-embedding",
        description="gradient boosting on CHGNet 0.3.0 crystal feature vectors (pretrained, not fine-tuned)",
        defaults={"max_iter": 300, "learning_rate": 0.1, "max_leaf_nodes": 63, "min_samples_leaf": 10},
        inputs=("structure",),
        estimator=_boosting_class,
    )
)
