"""comp-transformer: tiny CPU training, determinism, refusal of unknown elements, save/load,
classification head, registry entry. (The profiles' CPU/GPU placement is tested in
test_workflow.py, with every other Snakemake run.)"""

from __future__ import annotations

import hashlib
import io
import zipfile

import numpy as np
import pandas as pd
import pytest

from helpers import archive_member

torch = pytest.importorskip("torch")

from crucible.core.errors import DataValidationError  # noqa: E402
from crucible.models.comp_transformer import CompTransformer  # noqa: E402
from crucible.models.registry import get_spec  # noqa: E402

# path inside the wheel -> pinned SHA-256, from config/sources.yaml
ROLES = ("element-table/mat2vec", "matbench/mirror/matbench_steels")
MEMBERS = dict(archive_member(role) for role in ROLES)
MAT2VEC, STEELS = (archive_member(role)[0] for role in ROLES)
TINY = dict(
    epochs=2, batch_size=64, n_models=1, d_model=32, n_heads=2, n_layers=1, d_ff=64, device="cpu", num_threads=1
)


@pytest.fixture(scope="module")
def data(tmp_path_factory, crabnet_wheel):
    out = tmp_path_factory.mktemp("crabnet")
    with zipfile.ZipFile(crabnet_wheel) as zf:
        blobs = {name: zf.read(name) for name in MEMBERS}
    for name, sha in MEMBERS.items():
        assert hashlib.sha256(blobs[name]).hexdigest() == sha, name
    table = out / "element_table.csv"
    table.write_bytes(blobs[MAT2VEC])
    steels = pd.read_csv(io.BytesIO(blobs[STEELS]))
    return table, steels


def _split(steels):
    # train / inner-validation / test rows, disjoint
    return steels.iloc[:150], steels.iloc[150:200], steels.iloc[250:]


def _fit(table, steels, **kw):
    tr, va, _ = _split(steels)
    model = CompTransformer(element_table=str(table), **{**TINY, "random_state": 3, **kw})
    return model.fit(tr.formula, tr.target, va.formula, va.target)


@pytest.fixture(scope="module")
def fitted(data):
    # one tiny fit shared by the tests that only read it (keeps the file well under a minute)
    return _fit(*data)


def test_tiny_steels_trains_and_predicts_on_cpu(data, fitted):
    table, steels = data
    model = fitted
    te = _split(steels)[2]
    pred = model.predict(te.formula)
    assert pred.shape == (len(te),) and pred.dtype == np.float64 and np.isfinite(pred).all()
    assert model.device_ == "cpu"
    info = model.fit_info_
    assert info["device"] == "cpu" and info["amp"] == "float32"
    assert info["epochs_run"] == 2 and 1 <= info["best_epoch"] <= 2
    assert info["element_table_sha256"] == MEMBERS[MAT2VEC]
    # fractional amounts, parentheses and unreduced formulas all parse
    other = model.predict(pd.Series(["Fe0.620C0.000953", "Ag(AuS)2", "K4Mn4O8"]))
    assert np.isfinite(other).all()


def test_same_seed_gives_identical_predictions(data, fitted):
    table, steels = data
    te = _split(steels)[2]
    a = fitted.predict(te.formula)
    b = _fit(table, steels).predict(te.formula)
    np.testing.assert_array_equal(a, b)
    c = _fit(table, steels, random_state=4).predict(te.formula)
    assert not np.array_equal(a, c)


def test_unknown_element_is_refused_clearly(data, fitted, tmp_path):
    table, steels = data
    # a table without Mo: every steel with Mo must be refused, naming row, formula and element
    short = pd.read_csv(table, index_col=0).drop(index="Mo")
    short.to_csv(tmp_path / "no_mo.csv")
    tr, va, _ = _split(steels)
    model = CompTransformer(element_table=str(tmp_path / "no_mo.csv"), **TINY)
    with pytest.raises(DataValidationError) as err:
        model.fit(tr.formula, tr.target, va.formula, va.target)
    msg = str(err.value)
    first = tr.index[tr.formula.str.contains("Mo")].tolist()[0]
    assert f"row {first!r}" in msg and "'Mo'" in msg and tr.formula[first] in msg
    # at predict time too, with a fitted model and an element absent from mat2vec's symbols
    with pytest.raises(DataValidationError, match=r"row 1: .*'Fe2Xx'.*|row 1: cannot parse"):
        fitted.predict(pd.Series(["NaCl", "Fe2Xx"]))
    # a model fitted on the table without Mo refuses a Mo formula at predict time
    X = pd.Series(["Fe3C", "FeNi", "Fe2O3", "NiO", "Fe0.9C0.1", "CrFe"] * 3)
    small = CompTransformer(element_table=str(tmp_path / "no_mo.csv"), **TINY).fit(X, np.arange(len(X), dtype=float))
    with pytest.raises(DataValidationError, match=r"row 'x': formula 'Fe2Mo' contains element 'Mo'"):
        small.predict(pd.Series(["Fe3C", "Fe2Mo"], index=["ok", "x"]))


def test_save_load_round_trip(data, fitted, tmp_path):
    table, steels = data
    model = fitted
    te = _split(steels)[2]
    model.save(tmp_path / "fold_0")
    assert sorted(p.name for p in (tmp_path / "fold_0").iterdir()) == ["model.json", "weights.pt"]
    # loading needs neither the CSV nor retraining
    loaded = CompTransformer.load(tmp_path / "fold_0")
    np.testing.assert_array_equal(model.predict(te.formula), loaded.predict(te.formula))
    assert loaded.get_params()["d_model"] == TINY["d_model"]
    assert loaded.fit_info_["epochs_run"] == 2
    # saving the same weights twice gives the same bytes (no temp-file name inside the archive)
    model.save(tmp_path / "again")
    assert (tmp_path / "again/weights.pt").read_bytes() == (tmp_path / "fold_0/weights.pt").read_bytes()
    # an ensemble of seeds round-trips too
    ens = _fit(table, steels, n_models=2)
    ens.save(tmp_path / "ens")
    np.testing.assert_array_equal(ens.predict(te.formula), CompTransformer.load(tmp_path / "ens").predict(te.formula))
    assert ens.fit_info_["n_models"] == 2


def test_classification_head_gives_probabilities(data):
    table, steels = data
    strong = steels.assign(target=steels.target > steels.target.median())
    model = _fit(table, strong, task_type="classification")
    te = _split(strong)[2]
    proba = model.predict_proba(te.formula)
    assert proba.shape == (len(te), 2)
    assert ((proba >= 0) & (proba <= 1)).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    labels = model.predict(te.formula)
    assert labels.dtype == bool
    np.testing.assert_array_equal(labels, proba[:, 1] > 0.5)


def test_registry_entry():
    spec = get_spec("comp-transformer")
    assert spec.input_kind == "composition" and spec.uses_validation and spec.device == "gpu"
    est = spec.build("regression", 5, {"epochs": 7})
    assert isinstance(est, CompTransformer)
    assert est.get_params()["epochs"] == 7 and est.random_state == 5
    assert spec.build("classification", 0).task_type == "classification"
