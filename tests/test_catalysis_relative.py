"""Surface and bulk-formation energies on the EMT demo trees, and the error analysis."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from ase.calculators.emt import EMT

from crucible.catalysis import demo
from crucible.catalysis import relative as R
from crucible.core.errors import DataValidationError


def test_surface_energy_formula_and_emt_agreement(catalysis_demo):
    systems = R.read_surface_tree(catalysis_demo / "emt-demo_surface")
    assert [s["system"] for s in systems] == ["Cu111", "Ni111", "Pt111"]
    df = R.run_relative("surface", systems, EMT(), "emt")
    assert (df["abs_error"] < 1e-5).all()  # OSZICAR keeps 8 significant digits
    (_, _, slab, e_slab), (_, _, bulk, e_bulk) = systems[0]["parts"]
    area = abs(slab.cell[0][0] * slab.cell[1][1] - slab.cell[0][1] * slab.cell[1][0])
    gamma = (e_slab - len(slab) / len(bulk) * e_bulk) / (2 * area) * 16.021766208
    assert df["reference"].iloc[0] == pytest.approx(gamma)
    assert 0.3 < gamma < 3.0  # J/m², a physical surface energy for Cu(111)


def test_formation_energy_per_atom(catalysis_demo):
    systems = R.read_formation_tree(catalysis_demo / "emt-demo_formation", demo.FORMATION_COEFFICIENTS)
    df = R.run_relative("bulk_formation", systems, EMT(), "emt")
    parts = systems[0]["parts"]
    expected = (parts[0][3] - 3 * parts[1][3] - parts[2][3]) / 4
    assert df.set_index("system").loc["Cu3Pt", "reference"] == pytest.approx(expected)
    assert (df["abs_error"] < 1e-5).all()


def test_relative_table_mae_rmse_max():
    df = pd.DataFrame(
        {
            "model": "m",
            "system": ["a", "b", "c"],
            "reference": [0, 0, 0],
            "mlip": [0.1, -0.3, math.nan],
            "abs_error": [0.1, 0.3, math.nan],
            "error": [None, None, "boom"],
        }
    )
    t = R.relative_table([df]).iloc[0]
    assert t["n_failed"] == 1 and t["MAE"] == pytest.approx(0.2)
    assert t["RMSE"] == pytest.approx(math.sqrt(0.05)) and t["max_error"] == pytest.approx(0.3)


def test_missing_folder_is_named(tmp_path):
    (tmp_path / "bulk_compounds").mkdir()
    with pytest.raises(DataValidationError, match="'elements' missing"):
        R.read_formation_tree(tmp_path, {"X": {"bulk": 1}})
