"""scikit-learn's dummies as the Matbench Dummy model (registered as "dummy" by crucible.models.baselines)."""

from __future__ import annotations

from sklearn.dummy import DummyClassifier, DummyRegressor


class MeanRegressor(DummyRegressor):
    """``DummyRegressor(strategy="mean")``: predicts the training-fold mean, Matbench's published
    Dummy regressor.

    Fitted on every training row of the fold (inner-validation rows included), as the published
    Dummy was; this reproduces its per-fold MAE on the official folds to 1e-9. The strategy is
    fixed, so ``get_params()`` is empty and the recorded hyperparameters stay ``{}``.
    """

    def __init__(self):
        super().__init__(strategy="mean")


class PriorClassifier(DummyClassifier):
    """``DummyClassifier(strategy="prior")``: the training-fold class prior, deterministically.

    ``predict_proba`` returns the fraction of each class in the training fold for every row and
    ``predict`` the majority label. The published Matbench Dummy classifier instead drew labels
    at random in proportion to the prior (scikit-learn's 'stratified' strategy, seed unknown),
    so its per-fold scores scatter around 0.5 and cannot be reproduced bit for bit; this
    baseline's label-based ROC AUC and balanced accuracy are exactly 0.5.
    """

    def __init__(self):
        super().__init__(strategy="prior")
