"""Long jobs say where they are (issue 10, point 11): a fit that takes minutes logs a heartbeat,
comp-transformer logs its epochs, EOS logs each element."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest

from helpers import clean_task


def test_a_slow_fit_logs_a_heartbeat_with_model_task_and_fold(caplog, monkeypatch):
    from crucible.matbench.fold_fit import fit_predict
    from crucible.models.registry import ModelSpec

    monkeypatch.setenv("CRUCIBLE_HEARTBEAT_S", "0.05")

    class _Slow:
        def get_params(self, deep=True):
            return {}

        def fit(self, X, y):
            time.sleep(0.3)
            self.mean_ = float(np.mean(y))
            return self

        def predict(self, X):
            return np.full(len(X), self.mean_)

    spec = ModelSpec(name="slow", factory=lambda t, s, **kw: _Slow(), input_kind="composition", description="")
    data, card, folds = clean_task("matbench_steels")
    with caplog.at_level(logging.INFO):
        fit_predict(spec, data, folds, 4, "regression", task="matbench_steels")
    beats = [r.getMessage() for r in caplog.records if "still fitting" in r.getMessage()]
    assert len(beats) >= 2, caplog.text
    assert "model 'slow' on matbench_steels fold 4" in beats[0]


@pytest.mark.slow
def test_comp_transformer_logs_its_epochs(caplog, monkeypatch):
    from crucible.models.comp_transformer import CompTransformer

    from helpers import matbench_members

    monkeypatch.setenv("CRUCIBLE_PROGRESS_S", "0")
    data, card, folds = clean_task("matbench_steels")
    model = CompTransformer(
        task_type="regression",
        epochs=3,
        d_model=8,
        n_heads=2,
        n_layers=1,
        d_ff=16,
        device="cpu",
        n_models=1,
        refit=False,
        element_table=str(matbench_members()["element-table/mat2vec"]),
    )
    with caplog.at_level(logging.INFO, logger="crucible.models.comp_transformer"):
        model.fit(data["formula"].iloc[:80].reset_index(drop=True), data["target"].to_numpy()[:80])
    epochs = [r.getMessage() for r in caplog.records if "epoch" in r.getMessage()]
    assert any("epoch 3/3" in m for m in epochs), caplog.text


def test_eos_logs_each_element(caplog):
    from ase.calculators.emt import EMT

    from crucible.mlip.eos import run_eos

    with caplog.at_level(logging.INFO, logger="crucible.mlip.eos"):
        run_eos(EMT(), ["Cu", "Al"], model="emt", progress=False)
    text = caplog.text
    assert "emt Al (1/2)" in text and "emt Cu (2/2)" in text
