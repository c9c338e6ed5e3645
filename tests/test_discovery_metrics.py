"""The diatomics metrics: on curves whose values are known by hand, and on real chgnet-0.3.0
curves (a slice: H, O, Fe, Cr, Pr with its low-quality PBE reference, Po outside the Materials
Project, Ne) against the values the leaderboard's own code gives (tests/data/discovery)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from crucible.discovery import metrics
from crucible.discovery.curves import homo_curves, read_curves
from crucible.discovery.data import parse_reference

from helpers import REPO

DATA = REPO / "tests" / "data" / "discovery"


def _curve(r, e, fx=None):
    r = np.asarray(r, float)
    f = np.zeros((len(r), 2, 3))
    f[:, 0, 0] = -np.asarray(fx if fx is not None else np.gradient(e, r), float)
    f[:, 1, 0] = -f[:, 0, 0]
    return {"distances": r, "energies": np.asarray(e, float), "forces": f}


def test_smooth_well_has_tortuosity_one_and_one_flip():
    r = np.linspace(0.5, 5.0, 60)
    e = (1 - np.exp(-2 * (r - 1.5))) ** 2 - 1  # Morse, well depth 1 eV at 1.5 Å
    assert metrics.tortuosity(r, e) == pytest.approx(1.0)
    assert metrics.energy_diff_flips(r, e) == 1.0
    # a 0.2 eV step in the tail: two more flips, and the jump is the steps either side of each
    wiggly = e.copy()
    wiggly[40] += 0.2
    assert metrics.energy_diff_flips(r, wiggly) == 3.0
    assert metrics.tortuosity(r, wiggly) > 1.0


def test_differences_under_threshold_are_no_flip():
    r = np.linspace(1, 2, 10)
    e = np.array([5, 4, 3, 2, 1, 1.0004, 1.0001, 1.0003, 2, 3.0])
    assert metrics.energy_diff_flips(r, e) == 1.0
    assert metrics.energy_jump(r, e) == pytest.approx(abs(1 - 2) + abs(2 - 1.0003))


def test_force_flips_ignore_small_forces_and_total_variation_sums_steps():
    r = np.linspace(1, 2, 6)
    f = np.zeros((6, 2, 3))
    f[:, 0, 0] = [3.0, 1.0, 0.005, -0.5, -0.004, 0.2]
    assert metrics.force_flips(r, f) == 2.0  # 3, 1, -0.5, 0.2: two sign changes
    assert metrics.force_total_variation(r, f) == pytest.approx(2 + 0.995 + 0.505 + 0.496 + 0.204)


def test_quadratic_well_gives_exact_bond_length_and_wavenumber():
    r = np.linspace(0.6, 1.4, 41)
    k = 36.0  # eV/Å², so E = k/2 (r - 1)^2
    assert metrics.well_fit(r, 0.5 * k * (r - 1.0) ** 2) == pytest.approx((1.0, k))
    # H2-like: the harmonic wavenumber of a 36 eV/Å² spring between two H atoms
    mu = 1.008 * 1.66053906660e-27 / 2
    expected = math.sqrt(k * 16.02176634 / mu) / (2 * math.pi * 2.99792458e10)
    assert metrics.wavenumber("H", k) == pytest.approx(expected, rel=1e-3)
    assert math.isnan(metrics.wavenumber("H", -1.0))


def test_wall_radius_inverts_the_repulsive_branch():
    r = np.linspace(0.2, 3.0, 200)
    e = 100 * np.exp(-4 * (r - 0.2)) - 1  # repulsive only, minimum at the far end
    e[-1] = e.min() - 0.01  # a minimum inside, so a wall exists
    radius = metrics.wall_radius(r, e, 10.0)
    at = np.interp(radius, r, e)
    assert at - e.min() == pytest.approx(10.0, rel=1e-2)
    assert math.isnan(metrics.wall_radius(r, e, 1e6))  # never that high
    # a prediction that never rises 100 eV costs the reference radius at that threshold
    flat = -0.1 * np.exp(-((r - 1.5) ** 2))
    errs = metrics.wall_dist_mae(r, e, r, flat)
    assert errs > 0


def test_energy_mae_aligns_at_dissociation_and_interpolates_across_grids():
    r1 = np.linspace(1.2, 5, 50)
    r2 = np.geomspace(1.2, 5, 119)

    def morse(r):
        return (1 - np.exp(-2 * (r - 1.5))) ** 2 - 1

    assert metrics.energy_mae(r1, morse(r1), r1, morse(r1) + 3.0) == pytest.approx(0.0, abs=1e-12)
    assert metrics.energy_mae(r1, morse(r1), r2, morse(r2) + 3.0) < 5e-3
    assert metrics.energy_mae(r1, morse(r1), r2, 2 * morse(r2)) > 0.1


def test_a_curve_with_a_nan_or_repeated_point_is_refused():
    with pytest.raises(ValueError, match="non-finite"):
        metrics.tortuosity(np.array([1.0, 2.0]), np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="repeated"):
        metrics.tortuosity(np.array([1.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0]))


def test_real_curves_equal_the_leaderboards_own_code():
    pred = homo_curves(read_curves(DATA / "chgnet-0.3.0-slice.json.gz"))
    ref = parse_reference(DATA / "pbe-slice.json.gz")
    ours = metrics.per_element(pred, ref)
    expected = json.loads((DATA / "leaderboard-metrics.json").read_text())["metrics"]
    assert list(ours) == list(expected) == ["H", "O", "Fe", "Cr", "Pr", "Ne"]  # Po: not an MP element
    assert metrics.low_quality_references(ref) == {"Pr"}
    assert "pbe_energy_mae" not in ours["Pr"] and "tortuosity" in ours["Pr"]
    for symbol, values in expected.items():
        assert set(ours[symbol]) == set(values), symbol
        for name, value in values.items():
            got = ours[symbol][name]
            assert (math.isnan(got) and math.isnan(value)) or got == pytest.approx(value, rel=1e-12, abs=0), (
                symbol,
                name,
            )
    means = metrics.means(ours)
    assert means["n_tortuosity"] == 6 and means["n_pbe_energy_mae"] == 5
    assert means["tortuosity"] == pytest.approx(np.mean([expected[s]["tortuosity"] for s in expected]))


def test_a_metric_no_element_has_is_nan_in_the_means():
    out = metrics.means({"H": {"tortuosity": 1.0}})
    assert out["tortuosity"] == 1.0 and math.isnan(out["pbe_energy_mae"]) and out["n_pbe_energy_mae"] == 0


def test_a_curve_with_few_points_in_its_window_is_not_scored():
    r = np.array([0.1, 0.2, 0.3, 5.0, 6.0])
    e = np.array([5.0, 4.0, 3.0, 0.1, 0.0])
    assert metrics.element_metrics("Cu", _curve(r, e), None) is None
