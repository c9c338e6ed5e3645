"""crucible.mlip.metrics against FAIRChem's own Evaluator, hand vectors worked from FAIRChem's ``src/fairchem/core/modules/evaluator.py``,
and crucible.mlip.s2ef_scoring.

The peer is ``fairchem/core/modules/evaluator.py`` from the ``fairchem-core`` wheel. It imports
only numpy and torch, so that one file is taken out of the wheel (downloaded once into
``~/.cache/crucible-tests/``) and loaded from a temporary folder; it is never part of our repo.
"""

from __future__ import annotations

import ast
import importlib.util
import math
import os
import subprocess
import sys
import tempfile
import types
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crucible.core.errors import ConfigError, DataValidationError
from crucible.core.io import read_parquet, write_parquet
from crucible.mlip.metrics import (
    ADWT_THRESHOLDS,
    PRIMARY_METRIC,
    Evaluator,
    count_within_thresholds,
    metric_key,
    min_image_difference,
)
from crucible.mlip.s2ef_scoring import S2EF_PREDICTION_SCHEMA, s2ef_metric_table, score_s2ef

PEER_PACKAGE = "fairchem-core"
PEER_VERSION = "2.24.0"
PEER_MEMBER = "fairchem/core/modules/evaluator.py"
PEER_CACHE = Path.home() / ".cache" / "crucible-tests" / "fairchem"

# float64 sums in a different order (numpy pairwise vs torch) differ at ~1e-16 relative.
RTOL = 1e-12
# The peer's per-atom cosines are float32 and summed in float32; ours are float32 summed in
# float64 and our norms may round differently by an ulp, so allow float32-level differences.
COSINE_ATOL_PER_ATOM = 5e-7


# --------------------------------------------------------------------------- peer loading


def _peer_wheel() -> Path:
    pattern = f"fairchem_core-{PEER_VERSION}-*.whl"
    found = sorted(PEER_CACHE.glob(pattern))
    if found:
        return found[0]
    PEER_CACHE.mkdir(parents=True, exist_ok=True)
    # download into a private folder and move in only a complete wheel, so a killed or
    # concurrent download never leaves a truncated file that later runs would trust
    scratch = Path(tempfile.mkdtemp(prefix=".download-", dir=PEER_CACHE))
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--disable-pip-version-check",
                "--timeout",
                "15",
                "--retries",
                "1",
                f"{PEER_PACKAGE}=={PEER_VERSION}",
                "-d",
                str(scratch),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        got = sorted(scratch.glob(pattern))
        if proc.returncode != 0 or not got:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            pytest.skip(
                f"could not download {PEER_PACKAGE}=={PEER_VERSION} for the peer comparison: {' | '.join(tail)}"
            )
        os.replace(got[0], PEER_CACHE / got[0].name)
        return PEER_CACHE / got[0].name
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"could not download {PEER_PACKAGE}=={PEER_VERSION} for the peer comparison: {exc}")
    finally:
        for leftover in scratch.iterdir() if scratch.exists() else ():
            leftover.unlink()
        if scratch.exists():
            scratch.rmdir()


def _imports_of(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _stub_fairchem(source: str) -> list[str]:
    """Minimal empty modules for any fairchem import (2.24.0 has none; kept in case it gains one)."""
    added = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "fairchem":
            parts = node.module.split(".")
            for i in range(1, len(parts) + 1):
                name = ".".join(parts[:i])
                if name not in sys.modules:
                    sys.modules[name] = types.ModuleType(name)
                    added.append(name)
            for alias in node.names:
                setattr(sys.modules[node.module], alias.name, object())
    return added


@pytest.fixture(scope="module")
def peer(tmp_path_factory):
    pytest.importorskip("torch", reason="the peer evaluator needs torch")
    wheel = _peer_wheel()
    with zipfile.ZipFile(wheel) as zf:
        source = zf.read(PEER_MEMBER).decode("utf-8")
    third_party = {name.split(".")[0] for name in _imports_of(source)} - set(sys.stdlib_module_names) - {"__future__"}
    assert third_party <= {"numpy", "torch", "fairchem"}, f"peer file now imports {sorted(third_party)}"
    stubs = _stub_fairchem(source)
    path = tmp_path_factory.mktemp("peer") / "fairchem_evaluator.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("_crucible_test_peer_fairchem_evaluator", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    for name in stubs:
        sys.modules.pop(name, None)


def _torch(batch: dict) -> dict:
    import torch

    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in batch.items()}


def _assert_same(ours: dict, theirs: dict, where: str) -> None:
    assert list(ours) == list(theirs), where
    for key, mine in ours.items():
        ref = theirs[key]
        assert mine["numel"] == ref["numel"], f"{where} {key} numel"
        if isinstance(ref["total"], (int, np.integer)):
            assert mine["total"] == int(ref["total"]), f"{where} {key} total"
            assert mine["metric"] == pytest.approx(float(ref["metric"]), rel=1e-15, abs=0), f"{where} {key}"
        elif key.endswith("cosine_similarity"):
            n = mine["numel"]
            assert abs(mine["total"] - float(ref["total"])) <= COSINE_ATOL_PER_ATOM * n, f"{where} {key} total"
            assert abs(mine["metric"] - float(ref["metric"])) <= COSINE_ATOL_PER_ATOM, f"{where} {key} metric"
        else:
            assert mine["total"] == pytest.approx(float(ref["total"]), rel=RTOL, abs=1e-300), f"{where} {key} total"
            assert mine["metric"] == pytest.approx(float(ref["metric"]), rel=RTOL, abs=1e-300), f"{where} {key}"


def _run_both(peer, task, batches, metrics=None):
    ours = Evaluator(task, metrics=metrics)
    theirs = peer.Evaluator(task=task, eval_metrics=metrics)
    prev: dict = {}
    for i, (pred, target) in enumerate(batches):
        ours.update(pred, target)
        prev = theirs.eval(_torch(pred), _torch(target), prev_metrics=prev)
        _assert_same(ours.compute(), prev, f"{task} after batch {i}")
    return ours.compute()


# --------------------------------------------------------------------------- random batches


def _s2ef_batch(rng, n_systems, dtype=np.float64):
    natoms = rng.integers(1, 12, size=n_systems)
    n = int(natoms.sum())
    f_ref = rng.normal(size=(n, 3))
    f_ref[rng.random(n) < 0.05] = 0.0  # zero-norm rows for cosine similarity
    # per-system error scales straddling the 0.02 eV / 0.03 eV/Å thresholds
    f_scale = np.repeat(rng.choice([0.002, 0.008, 0.02, 0.1], size=n_systems), natoms)
    f_pred = f_ref + rng.normal(size=(n, 3)) * f_scale[:, None]
    e_ref = rng.normal(scale=5.0, size=n_systems)
    e_pred = e_ref + rng.normal(scale=0.015, size=n_systems)
    # a few values sitting exactly on a threshold (strict comparison on both sides)
    e_pred[::4] = e_ref[::4] + 0.02
    f_pred[::7, 1] = f_ref[::7, 1] - 0.03
    pred = {"energy": e_pred, "forces": f_pred, "natoms": natoms}
    target = {"energy": e_ref, "forces": f_ref, "natoms": natoms}
    if dtype != np.float64:
        pred = {k: (v.astype(dtype) if k != "natoms" else v) for k, v in pred.items()}
        target = {k: (v.astype(dtype) if k != "natoms" else v) for k, v in target.items()}
    return pred, target


def _is2re_batch(rng, n_systems):
    e_ref = rng.normal(scale=3.0, size=n_systems)
    e_pred = e_ref + rng.normal(scale=0.03, size=n_systems)
    e_pred[::3] = e_ref[::3] - 0.02
    return {"energy": e_pred}, {"energy": e_ref}


def _is2rs_batch(rng, n_systems, pbc):
    natoms = rng.integers(1, 10, size=n_systems)
    n = int(natoms.sum())
    cells = np.stack(
        [
            np.diag(rng.uniform(4.0, 12.0, 3)) + rng.uniform(-1.5, 1.5, (3, 3)) * (1 - np.eye(3))
            for _ in range(n_systems)
        ]
    )
    system = np.repeat(np.arange(n_systems), natoms)
    frac = rng.random((n, 3))
    ref = np.einsum("ni,nij->nj", frac, cells[system])
    # per-system displacement scales spanning the 0.01–0.5 Å threshold range, plus whole
    # lattice-vector jumps that only the periodic wrap undoes
    scale = rng.choice([0.005, 0.03, 0.1, 0.3, 0.8], size=n_systems)[system]
    jumps = rng.integers(-1, 2, size=(n, 3)) * (rng.random((n, 1)) < 0.3)
    pred = ref + rng.normal(size=(n, 3)) * scale[:, None] + np.einsum("ni,nij->nj", jumps, cells[system])
    pbc_arr = np.asarray(pbc, dtype=bool)
    pred_d = {"positions": pred, "natoms": natoms}
    target_d = {"positions": ref, "natoms": natoms, "cell": cells, "pbc": pbc_arr}
    return pred_d, target_d


SIZES = [1, 2, 5, 17, 60]


@pytest.mark.parametrize("seed", [0, 1])
def test_s2ef_matches_peer_with_accumulation(peer, seed):
    rng = np.random.default_rng(seed)
    batches = [_s2ef_batch(rng, n) for n in SIZES]
    out = _run_both(peer, "s2ef", batches)
    # the data must exercise both outcomes of the threshold metric
    efwt = out["energy_forces_within_threshold"]
    assert 0 < efwt["total"] < efwt["numel"]


def test_s2ef_single_batches_match_peer(peer):
    rng = np.random.default_rng(7)
    for n in SIZES:
        _run_both(peer, "s2ef", [_s2ef_batch(rng, n)])


def test_s2ef_float32_inputs_close_to_peer(peer):
    # the peer computes in the input dtype, we in float64: agreement at float32 level only
    rng = np.random.default_rng(3)
    pred, target = _s2ef_batch(rng, 40, dtype=np.float32)
    # move threshold-sitting values off the edge, where float32 vs float64 may legitimately split
    pred["energy"][::4] += np.float32(1e-3)
    pred["forces"][::7, 1] -= np.float32(1e-3)
    ours = Evaluator("s2ef")
    ours.update(pred, target)
    theirs = peer.Evaluator(task="s2ef").eval(_torch(pred), _torch(target))
    for key, mine in ours.compute().items():
        assert mine["numel"] == theirs[key]["numel"]
        assert mine["metric"] == pytest.approx(float(theirs[key]["metric"]), rel=1e-5, abs=1e-6), key


@pytest.mark.parametrize("seed", [0, 1])
def test_is2re_matches_peer_with_accumulation(peer, seed):
    rng = np.random.default_rng(seed)
    out = _run_both(peer, "is2re", [_is2re_batch(rng, n) for n in SIZES])
    ewt = out["energy_within_threshold"]
    assert 0 < ewt["total"] < ewt["numel"]


@pytest.mark.parametrize("pbc", [(True, True, True), (False, False, False), (True, False, True)])
def test_is2rs_matches_peer_with_accumulation(peer, pbc):
    rng = np.random.default_rng(sum(pbc) + 11)
    out = _run_both(peer, "is2rs", [_is2rs_batch(rng, n, pbc) for n in SIZES])
    adwt = out["positions_average_distance_within_threshold"]
    assert 0 < adwt["total"] < adwt["numel"]


def test_custom_metric_table_matches_peer(peer):
    table = {
        "energy": ["mae", "mse", "per_atom_mae", "per_atom_mse", "rmse", "energy_within_threshold"],
        "forces": ["forcesx_mse", "forcesy_mse", "forcesz_mse", "rmse", "magnitude_error", "cosine_similarity"],
        "misc": ["energy_forces_within_threshold"],
    }
    rng = np.random.default_rng(5)
    out = _run_both(peer, None, [_s2ef_batch(rng, n) for n in (3, 8)], metrics=table)
    assert "energy_forces_within_threshold" in out and "forces_forcesx_mse" not in out
    assert "energy_per_atom_mae" in out and "forces_rmse" in out


def test_peer_agrees_with_hand_vectors(peer):
    # §1.5 vector 5 and the float-drift ADwT edges, run through the peer itself
    ours = Evaluator("s2ef")
    pred, target = _hand_s2ef()
    ours.update(pred, target)
    _assert_same(ours.compute(), peer.Evaluator(task="s2ef").eval(_torch(pred), _torch(target)), "hand s2ef")
    for d in (0.1, 0.1 - 5e-16, 0.09999999999999995, 0.04999999999999999, 0.1234, 0.0123):
        pred, target = _single_atom_is2rs([d])
        ours = Evaluator("is2rs")
        ours.update(pred, target)
        _assert_same(ours.compute(), peer.Evaluator(task="is2rs").eval(_torch(pred), _torch(target)), f"d={d}")


# --------------------------------------------------------------------------- hand vectors


def test_vector1_magnitude_error():
    ev = Evaluator(metrics={"forces": ["magnitude_error"]})
    ev.update({"forces": np.array([[0.0, 1.0], [-1.0, 0.0]])}, {"forces": np.zeros((2, 2))})
    assert ev.compute()["forces_magnitude_error"]["metric"] == 1.0


def test_vector2_cosine_of_independent_normals_and_task_keys():
    rng = np.random.default_rng(0)
    ev = Evaluator(metrics={"forces": ["cosine_similarity"]})
    ev.update({"forces": rng.normal(size=(10**6, 3))}, {"forces": rng.normal(size=(10**6, 3))})
    rec = ev.compute()["forces_cosine_similarity"]
    assert round(rec["metric"], 2) == 0
    assert rec["total"] / rec["numel"] == rec["metric"]
    assert {"energy_mae", "forces_mae", "forces_cosine_similarity", "energy_forces_within_threshold"} <= set(
        Evaluator("s2ef").keys
    )
    assert "positions_average_distance_within_threshold" in Evaluator("is2rs").keys
    assert Evaluator("is2re").keys == ["energy_mae", "energy_mse", "energy_within_threshold"]


def test_vectors3_4_is2re_and_pooled_accumulation():
    ev = Evaluator("is2re")
    ev.update({"energy": np.array([1.0, 2.0, 3.0])}, {"energy": np.array([1.01, 2.5, 2.0])})
    out = ev.compute()
    assert out["energy_mae"]["metric"] == pytest.approx(1.51 / 3)
    assert out["energy_mae"]["total"] == pytest.approx(1.51) and out["energy_mae"]["numel"] == 3
    assert out["energy_mse"]["metric"] == pytest.approx(1.2501 / 3)
    assert out["energy_mse"]["total"] == pytest.approx(1.2501) and out["energy_mse"]["numel"] == 3
    assert out["energy_within_threshold"] == {"metric": 1 / 3, "total": 1, "numel": 3}
    ev.update({"energy": np.array([0.0])}, {"energy": np.array([0.5])})
    assert ev.compute()["energy_mae"]["metric"] == pytest.approx(0.5025)  # not a mean of batch means
    assert ev.compute()["energy_mae"]["numel"] == 4


def _hand_s2ef():
    natoms = np.array([2, 1])
    target = {"energy": np.array([0.0, 1.0]), "forces": np.eye(3), "natoms": natoms}
    pred = {
        "energy": np.array([0.01, 1.0]),
        "forces": np.array([[1.01, 0, 0], [0, 1, 0.02], [0, 0, 0.5]]),
        "natoms": natoms,
    }
    return pred, target


def test_vector5_s2ef_hand():
    ev = Evaluator("s2ef")
    ev.update(*_hand_s2ef())
    out = ev.compute()
    approx = lambda x: pytest.approx(x, abs=1e-6)  # noqa: E731
    assert (out["forcesx_mae"]["metric"], out["forcesx_mae"]["total"], out["forcesx_mae"]["numel"]) == (
        approx(0.01 / 3),
        approx(0.01),
        3,
    )
    assert out["forcesy_mae"]["metric"] == 0
    assert out["forcesz_mae"]["metric"] == approx(0.52 / 3) and out["forcesz_mae"]["total"] == approx(0.52)
    assert out["forces_mae"]["total"] == approx(0.53) and out["forces_mae"]["numel"] == 9
    assert out["forces_mae"]["metric"] == approx(0.0588889)
    assert out["forces_cosine_similarity"]["metric"] == approx(0.99993335)
    assert out["forces_magnitude_error"]["metric"] == approx(0.17006666)
    assert out["energy_mae"]["metric"] == approx(0.005)
    assert out["energy_forces_within_threshold"] == {"metric": 0.5, "total": 1, "numel": 2}


def _single_atom_is2rs(distances, pbc=(False, False, False)):
    # an 8 Å cubic cell: dividing by and multiplying with a power of two is exact, so the
    # distance that reaches the threshold test is exactly the one written here
    d = np.asarray(distances, dtype=np.float64)
    n = d.size
    pred = np.zeros((n, 3))
    pred[:, 0] = d
    natoms = np.ones(n, dtype=np.int64)
    cell = np.tile(8.0 * np.eye(3), (n, 1, 1))
    return (
        {"positions": pred, "natoms": natoms},
        {"positions": np.zeros((n, 3)), "natoms": natoms, "cell": cell, "pbc": np.array(pbc)},
    )


@pytest.mark.parametrize(
    "distances, success",
    [
        ([0.1234], 376),
        ([0.0123], 487),
        ([0.4995], 0),
        ([0.0, 0.6], 490),
        ([0.1], 399),
        ([0.1 - 5e-16], 400),  # the 0.1 threshold is stored as 0.09999999999999992
        # between a drifted threshold and its decimal value: only arange's grid gives these
        ([0.09999999999999995], 399),
        ([0.04999999999999999], 449),
    ],
)
def test_vector6_adwt_threshold_counts(distances, success):
    assert count_within_thresholds(distances) == success
    ev = Evaluator("is2rs")
    ev.update(*_single_atom_is2rs(distances))
    rec = ev.compute()["positions_average_distance_within_threshold"]
    assert (rec["total"], rec["numel"]) == (success, 490 * len(distances))
    assert rec["metric"] == success / (490 * len(distances))


def test_adwt_threshold_grid_is_numpy_arange():
    assert ADWT_THRESHOLDS.size == 490
    assert ADWT_THRESHOLDS[40] == 0.04999999999999997 and ADWT_THRESHOLDS[90] == 0.09999999999999992


def test_vector7_min_image():
    cell = 10.0 * np.eye(3)
    diff = min_image_difference(
        np.array([[1.1, 1, 1], [0.1, 2, 2]]), np.array([[1.0, 1, 1], [10, 2, 2]]), cell, [True] * 3
    )
    np.testing.assert_allclose(np.linalg.norm(diff, axis=1), [0.1, 0.1], atol=1e-12)
    # non-periodic quirk: +0.7 of the cell shrinks to -0.3, -0.7 is left alone
    off = [False] * 3
    assert np.linalg.norm(
        min_image_difference(np.array([[8.0, 0, 0]]), np.array([[1.0, 0, 0]]), cell, off)
    ) == pytest.approx(3.0)
    assert np.linalg.norm(
        min_image_difference(np.array([[1.0, 0, 0]]), np.array([[8.0, 0, 0]]), cell, off)
    ) == pytest.approx(7.0)


# --------------------------------------------------------------------------- interface


def test_key_naming_rule():
    assert metric_key("forces", "forcesx_mae") == "forcesx_mae"
    assert metric_key("forces", "energy_forces_within_threshold") == "energy_forces_within_threshold"
    assert metric_key("positions", "average_distance_within_threshold") == "positions_average_distance_within_threshold"
    assert metric_key("misc", "mae") == "mae"
    assert metric_key("energy", "mae") == "energy_mae"


def test_primary_metric_is_an_emitted_key():
    for task in ("s2ef", "is2re", "is2rs"):
        ev = Evaluator(task)
        assert ev.primary_metric == PRIMARY_METRIC[task] and ev.primary_metric in ev.keys
    assert Evaluator("is2rs").primary_metric == "positions_average_distance_within_threshold"
    assert Evaluator(metrics={"energy": ["mae"]}).primary_metric is None
    assert Evaluator("s2ef", metrics={"energy": ["mae"]}).primary_metric is None


def test_unknown_task_and_metric_names():
    with pytest.raises(ValueError, match="is2re, is2rs, s2ef"):
        Evaluator("ocp")
    with pytest.raises(ConfigError):
        Evaluator("S2EF")
    with pytest.raises(ValueError, match="unknown metric 'r2'"):
        Evaluator(metrics={"energy": ["r2"]})
    with pytest.raises(ValueError, match="both"):
        Evaluator(metrics={"forces": ["energy_forces_within_threshold"], "misc": ["energy_forces_within_threshold"]})
    with pytest.raises(ValueError):
        Evaluator()


def test_shape_mismatch_names_key_and_shapes():
    ev = Evaluator("is2re")
    with pytest.raises(ValueError, match=r"energy.*\(3,\).*\(3, 1\)"):
        ev.update({"energy": np.zeros(3)}, {"energy": np.zeros((3, 1))})
    ev = Evaluator("s2ef")
    pred, target = _hand_s2ef()
    with pytest.raises(ValueError, match=r"forces.*\(2, 3\).*\(3, 3\)"):
        ev.update({**pred, "forces": pred["forces"][:2]}, target)
    with pytest.raises(DataValidationError, match=r"natoms \[2, 2\] sum to 4 but forces has 3 rows"):
        ev.update({**pred, "natoms": np.array([2, 2])}, {**target, "natoms": np.array([2, 2])})
    with pytest.raises(ValueError, match="natoms"):
        ev.update({**pred, "natoms": np.array([1, 2])}, target)  # prediction and target disagree
    with pytest.raises(ValueError, match="'energy'"):
        ev.update({"forces": pred["forces"]}, target)


def test_failed_update_leaves_state_untouched_and_reset():
    ev = Evaluator("s2ef")
    pred, target = _hand_s2ef()
    ev.update(pred, target)
    before = ev.compute()
    with pytest.raises(ValueError):
        ev.update(pred, {**target, "natoms": np.array([1, 1])})
    assert ev.compute() == before
    ev.reset()
    empty = ev.compute()
    assert list(empty) == ev.keys
    assert all(math.isnan(r["metric"]) and r["total"] == 0 and r["numel"] == 0 for r in empty.values())


def test_torch_tensor_inputs_with_grad():
    torch = pytest.importorskip("torch")
    pred, target = _hand_s2ef()
    tp = {
        k: torch.tensor(v, requires_grad=(k != "natoms")) if k != "natoms" else torch.tensor(v) for k, v in pred.items()
    }
    ev_t, ev_n = Evaluator("s2ef"), Evaluator("s2ef")
    ev_t.update(tp, _torch(target))
    ev_n.update(pred, target)
    assert ev_t.compute() == ev_n.compute()


def test_is2rs_per_system_pbc_and_singular_cell():
    pred, target = _single_atom_is2rs([0.05, 0.2])
    ev = Evaluator("is2rs")
    ev.update(pred, {**target, "pbc": np.array([[True] * 3, [False] * 3])})
    assert ev.compute()["positions_average_distance_within_threshold"]["total"] == count_within_thresholds([0.05, 0.2])
    with pytest.raises(ValueError, match="singular"):
        ev.update(pred, {**target, "cell": np.zeros((2, 3, 3))})


# --------------------------------------------------------------------------- s2ef scoring


def _frame_rows():
    rng = np.random.default_rng(42)
    rows = []
    for i, n in enumerate([2, 3, 1, 4, 2]):
        f_ref = rng.normal(size=(n, 3))
        f_pred = f_ref + rng.normal(scale=0.01, size=(n, 3))
        e_ref = float(rng.normal())
        rows.append(
            {
                "frame_id": f"frame-{i:02d}",
                "natoms": n,
                "energy_ref": e_ref,
                "energy_pred": e_ref + 0.01 * i,
                "forces_ref": f_ref.tolist(),
                "forces_pred": f_pred.tolist(),
                "status": "ok",
            }
        )
    rows[1].update(energy_pred=np.nan, forces_pred=None, status="calculator_error")
    rows[3].update(energy_pred=np.nan, forces_pred=None, status="timeout")
    return rows


def _table(rows):
    return pd.DataFrame(rows).astype({"natoms": "int64", "energy_ref": "float64", "energy_pred": "float64"})


def test_score_s2ef_counts_failures_and_scores_ok_rows(tmp_path):
    rows = _frame_rows()
    table = _table(rows)
    scores = score_s2ef(table)
    assert scores["n_frames"] == 5 and scores["n_ok"] == 3
    assert scores["failures"] == {"calculator_error": 1, "timeout": 1}

    ok = [r for r in rows if r["status"] == "ok"]
    natoms = np.array([r["natoms"] for r in ok])
    ev = Evaluator("s2ef")
    ev.update(
        {
            "energy": np.array([r["energy_pred"] for r in ok]),
            "forces": np.concatenate([r["forces_pred"] for r in ok]),
            "natoms": natoms,
        },
        {
            "energy": np.array([r["energy_ref"] for r in ok]),
            "forces": np.concatenate([r["forces_ref"] for r in ok]),
            "natoms": natoms,
        },
    )
    assert scores["metrics"] == ev.compute()
    assert scores["metrics"]["energy_mae"]["numel"] == 3

    # through the shared parquet contract, and independent of row order
    path = tmp_path / "preds.parquet"
    write_parquet(table.iloc[::-1], path, schema=S2EF_PREDICTION_SCHEMA)
    assert score_s2ef(read_parquet(path)) == scores


def test_score_s2ef_all_failed_and_metric_table():
    rows = _frame_rows()
    for r in rows:
        r.update(energy_pred=np.nan, forces_pred=None, status="weights_unavailable")
    failed = score_s2ef(_table(rows))
    assert failed["n_ok"] == 0 and failed["failures"] == {"weights_unavailable": 5}
    assert all(r["numel"] == 0 and math.isnan(r["metric"]) for r in failed["metrics"].values())

    good = score_s2ef(_table(_frame_rows()))
    table = s2ef_metric_table({"zeta": failed, "alpha": good})
    assert table["model"].tolist() == ["alpha", "zeta"]
    # the last column: the potential's provenance, "" for scores that carry none
    assert list(table.columns) == [
        "model",
        *Evaluator("s2ef").keys,
        "n_frames",
        "n_failed",
        "n_implausible",
        "potential",
    ]
    assert table["n_failed"].tolist() == [2, 5] and table["n_frames"].tolist() == [5, 5]
    assert table["potential"].tolist() == ["", ""]
    assert table.loc[0, "energy_forces_within_threshold"] == good["metrics"]["energy_forces_within_threshold"]["metric"]


def test_score_s2ef_rejects_bad_rows():
    rows = _frame_rows()
    rows[0]["forces_pred"] = rows[0]["forces_pred"][:1]
    with pytest.raises(DataValidationError, match=r"frame-00.*forces_pred.*\(1, 3\).*\(2, 3\)"):
        score_s2ef(_table(rows))
    rows = _frame_rows()
    rows[2]["energy_pred"] = np.nan  # NaN on an "ok" row must not vanish into the metrics
    with pytest.raises(DataValidationError, match="frame-02.*energy_pred"):
        score_s2ef(_table(rows))
    with pytest.raises(DataValidationError, match="duplicate"):
        score_s2ef(_table(_frame_rows() + _frame_rows()[:1]))
    with pytest.raises(DataValidationError, match="status"):
        score_s2ef(_table(_frame_rows()).drop(columns="status"))
