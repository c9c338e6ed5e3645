"""What a model hands back is checked before it becomes a number (issue 10, points 1, 3, 10):
classifier labels and probabilities, seeding of user estimators, errors raised in ``fit``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crucible.core.errors import CrucibleError
from crucible.matbench.fold_fit import fit_predict
from crucible.models.registry import get_spec

from helpers import clean_task

TASK = "matbench_expt_is_metal"


class _Fixed:
    """An estimator that returns whatever it is told to, to probe the checks."""

    def __init__(self, labels=None, proba=None):
        self.labels, self.proba = labels, proba

    def get_params(self, deep=True):
        return {}

    def fit(self, X, y):
        return self

    def predict(self, X):
        return self.labels(len(X))


class _FixedProba(_Fixed):
    classes_ = np.array([False, True])

    def predict_proba(self, X):
        p = self.proba(len(X))
        return np.column_stack([1 - p, p])


def _spec(estimator):
    from crucible.models.registry import ModelSpec

    return ModelSpec(
        name="probe",
        factory=lambda task_type, seed, **kw: estimator,
        input_kind="composition",
        description="test probe",
    )


def _run(estimator, task=TASK, fold=0):
    data, card, folds = clean_task(task)
    return fit_predict(_spec(estimator), data, folds, fold, card["task_type"])


def test_regressor_registered_on_a_classification_task_is_refused():
    # The reproduction: sklearn's Ridge as a custom model on expt_is_metal.
    data, card, folds = clean_task(TASK)

    class _Ridge:
        # Ridge on a one-hot of the first element: a real regressor with float output.
        def __init__(self):
            from sklearn.linear_model import Ridge

            self.model = Ridge()

        def get_params(self, deep=True):
            return {}

        def _x(self, X):
            return pd.get_dummies(pd.Series(X).str.extract(r"^([A-Z][a-z]?)")[0]).reindex(
                columns=self.cols_, fill_value=0
            )

        def fit(self, X, y):
            self.cols_ = sorted(set(pd.Series(X).str.extract(r"^([A-Z][a-z]?)")[0]))
            self.model.fit(self._x(X), y.astype(float))
            return self

        def predict(self, X):
            return self.model.predict(self._x(X))

    with pytest.raises(CrucibleError, match=r"probe.*matbench_expt_is_metal.*fold 1.*labels"):
        fit_predict(_spec(_Ridge()), data, folds, 1, card["task_type"], task=TASK)


@pytest.mark.parametrize(
    "labels, shown",
    [
        (lambda n: np.full(n, np.nan), "nan"),
        (lambda n: np.linspace(0.1, 0.9, n), "0.1"),
        (lambda n: np.arange(n) % 3, "2"),
        (lambda n: np.array(["yes"] * n), "yes"),
    ],
)
def test_labels_that_are_not_booleans_stop_the_job(labels, shown):
    with pytest.raises(CrucibleError, match=rf"model 'probe'.*fold 0.*{shown}"):
        _run(_Fixed(labels))


def test_zero_one_labels_are_accepted_as_booleans():
    preds, _ = _run(_Fixed(lambda n: np.arange(n) % 2))
    assert preds["prediction"].dtype == bool and preds["prediction"].sum() > 0
    preds, _ = _run(_Fixed(lambda n: (np.arange(n) % 2).astype(float)))
    assert preds["prediction"].dtype == bool


@pytest.mark.parametrize(
    "proba, shown",
    [
        (lambda n: np.full(n, 1.5), "1.5"),
        (lambda n: np.full(n, np.nan), "nan"),
        (lambda n: np.full(n, -0.2), "-0.2"),
    ],
)
def test_probabilities_outside_zero_one_stop_the_job(proba, shown):
    with pytest.raises(CrucibleError, match=rf"model 'probe'.*fold 0.*predict_proba.*{shown}"):
        _run(_FixedProba(lambda n: np.zeros(n, bool), proba))


def test_wrong_number_of_predictions_stops_the_job():
    with pytest.raises(CrucibleError, match=r"model 'probe'.*returned 3 .* for \d+ test rows"):
        _run(_Fixed(lambda n: np.zeros(3, bool)))


def test_an_error_raised_in_fit_names_model_task_and_fold():
    class _Broken(_Fixed):
        def fit(self, X, y):
            raise ValueError("singular matrix")

    data, card, folds = clean_task(TASK)
    with pytest.raises(
        CrucibleError, match=r"model 'probe' on matbench_expt_is_metal fold 2: fit raised ValueError: singular matrix"
    ):
        fit_predict(_spec(_Broken()), data, folds, 2, card["task_type"], task=TASK)


def test_custom_estimators_are_seeded_and_the_seed_is_recorded():
    data, card, folds = clean_task("matbench_steels")
    custom = {
        "my-rf": {
            "class": "sklearn.ensemble:RandomForestRegressor",
            "input": "composition",
            "params": {"n_estimators": 5},
        }
    }
    spec = get_spec("my-rf", custom)
    estimator = spec.build("regression", 0, custom["my-rf"]["params"])
    assert estimator.get_params()["random_state"] == 0
    # An explicit seed in the config wins.
    assert spec.build("regression", 0, {"random_state": 11}).get_params()["random_state"] == 11

    class _Composition:
        # A forest on element counts, so the randomness of the forest shows in predictions.
        def __init__(self, **kw):
            from sklearn.ensemble import RandomForestRegressor

            self.inner = RandomForestRegressor(**kw)

        def get_params(self, deep=True):
            return self.inner.get_params()

        def set_params(self, **kw):
            self.inner.set_params(**kw)
            return self

        def _x(self, X):
            return np.column_stack([pd.Series(X).str.count(el) for el in ("Fe", "C", "Ni", "Cr", "Mo", "Co", "Ti")])

        def fit(self, X, y):
            self.inner.fit(self._x(X), y)
            return self

        def predict(self, X):
            return self.inner.predict(self._x(X))

    from crucible.models.registry import ModelSpec
    from crucible.models.seeds import seed_estimator

    runs = []
    for _ in range(2):
        spec = ModelSpec(
            name="rf",
            factory=lambda t, s, **kw: seed_estimator(_Composition(**kw), s),
            input_kind="composition",
            description="",
        )
        preds, info = fit_predict(spec, data, folds, 0, "regression", random_state=3)
        runs.append(preds["prediction"].to_numpy())
        assert info["params"]["random_state"] == 3 and info["seed"] == 3
    assert (runs[0] == runs[1]).all()
