"""Dimer curves in the leaderboard's prediction format: EMT on a slice (an element it does not
cover is recorded as such, not as a failure), a calculator that returns NaN (the point fails with
its reason; inside the scored window the curve is left out, as the leaderboard's runner does),
one that raises (the element fails, the run goes on), the file's bytes and its reader's checks."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from ase.calculators.calculator import Calculator, all_changes

from crucible.core.errors import DataValidationError
from crucible.discovery import curves
from crucible.discovery.report import HEADERS
from crucible.potentials.registry import load_potential
from crucible.potentials.spec import Potential

from helpers import REPO

DATA = REPO / "tests" / "data" / "discovery"


def test_grid_is_the_leaderboards():
    d = curves.distances()
    assert len(d) == 119 and d[0] == pytest.approx(0.1) and d[-1] == pytest.approx(6.0)
    assert np.allclose(np.diff(np.log(d)), np.log(60) / 118)
    assert len(curves.symbols()) == 92 and curves.symbols()[-1] == "U"
    atoms = curves.dimer("Cu", 2.0)
    assert atoms.cell.lengths().tolist() == [50.0] * 3 and atoms.pbc.all()
    assert atoms.get_distance(0, 1) == pytest.approx(2.0)


def test_emt_slice_records_not_covered_elements(tmp_path):
    pot = load_potential("emt")
    res = curves.compute_curves(pot, ["H", "Cu", "Fe"])
    assert list(res[curves.HOMO]) == ["H-H", "Cu-Cu"]
    meta = res["run_metadata"]
    assert meta["crucible"]["not_covered"] == ["Fe"] and meta["crucible"]["failed"] == {}
    assert meta["excluded_formula_reasons"] == {"Fe-Fe": "not covered: emt has no parameters for Fe"}
    cu = res[curves.HOMO]["Cu-Cu"]
    assert cu["distances"] == res["distances"] and len(cu["energies"]) == 119
    assert np.asarray(cu["forces"]).shape == (119, 2, 3)
    # forces along the bond, opposite on the two atoms
    f = np.asarray(cu["forces"])
    assert np.allclose(f[:, 0, 0], -f[:, 1, 0]) and np.allclose(f[:, :, 1:], 0)
    blob = curves.dumps(res)
    assert blob == curves.dumps(curves.compute_curves(pot, ["H", "Cu", "Fe"]))  # byte for byte
    path = tmp_path / "emt.json.gz"
    path.write_bytes(blob)
    back = curves.read_curves(path)
    assert back[curves.HOMO]["Cu-Cu"]["energies"] == cu["energies"]
    assert list(curves.homo_curves(back)) == ["H", "Cu"]


class _NaNAt(Calculator):
    """EMT-like toy: a Lennard-Jones pair, NaN energy at the separations given."""

    implemented_properties = ["energy", "forces"]

    def __init__(self, bad: list[float], raise_for: str | None = None):
        super().__init__()
        self.bad, self.raise_for = bad, raise_for

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        if self.raise_for and atoms.get_chemical_symbols()[0] == self.raise_for:
            raise RuntimeError("no embedding for this element")
        r = atoms.get_distance(0, 1)
        e = 4 * ((1 / r) ** 12 - (1 / r) ** 6)
        f = 4 * (12 / r**13 - 6 / r**7)
        if any(abs(r - b) < 1e-9 for b in self.bad):
            e = float("nan")
        self.results = {"energy": e, "forces": np.array([[-f, 0, 0], [f, 0, 0]])}


def _toy(calc) -> Potential:
    return Potential(name="toy", device="cpu", calculator=calc)


def test_non_finite_point_outside_the_window_is_dropped_inside_the_window_drops_the_curve():
    d = curves.distances()
    res = curves.compute_curves(_toy(_NaNAt([d[0], d[60]])), ["Cu", "Ag"])
    meta = res["run_metadata"]
    # 0.1 Å and d[60] (0.80 Å) are below 0.8 covalent radii of Cu and Ag: left out of the curves,
    # which stay
    lo_cu = curves.eval_window("Cu", 6.0, curves.WALL_R_MIN_FACTOR)[0]
    assert d[60] < lo_cu
    assert len(res[curves.HOMO]["Cu-Cu"]["energies"]) == 117
    assert meta["crucible"]["failed_points"]["Cu-Cu"][0]["reason"] == "non-finite energy (nan)"
    # a NaN at 2.5 Å (scored for Cu) leaves the curve out, with the reason
    at = d[np.argmin(abs(d - 2.5))]
    res = curves.compute_curves(_toy(_NaNAt([at])), ["Cu"])
    assert res[curves.HOMO] == {}
    assert res["run_metadata"]["excluded_formula_reasons"]["Cu-Cu"].startswith("non-finite at a scored separation")
    curves.dumps(res)  # no NaN reaches the file


def test_an_element_the_calculator_rejects_is_a_failure_with_its_reason():
    res = curves.compute_curves(_toy(_NaNAt([], raise_for="Ag")), ["Cu", "Ag"])
    assert list(res[curves.HOMO]) == ["Cu-Cu"]
    assert res["run_metadata"]["crucible"]["failed"] == {"Ag-Ag": "RuntimeError: no embedding for this element"}
    assert res["run_metadata"]["crucible"]["not_covered"] == []


def _write(path, doc):
    with gzip.open(path, "wt") as fh:
        json.dump(doc, fh)
    return path


@pytest.mark.parametrize(
    ("curve", "message"),
    [
        ({"distances": [2.0, 1.0], "energies": [0, 0], "forces": [[[0] * 3] * 2] * 2}, "ordered subset"),
        ({"distances": [1.0, 2.5], "energies": [0, 0], "forces": [[[0] * 3] * 2] * 2}, "ordered subset"),
        ({"distances": [1.0, 2.0], "energies": [0], "forces": [[[0] * 3] * 2] * 2}, "1 values for 2 distances"),
        ({"distances": [1.0, 2.0], "energies": [0, 0], "forces": [[0, 0, 0]] * 2}, r"shape \(2, 3\)"),
    ],
)
def test_reader_names_the_file_curve_and_field(tmp_path, curve, message):
    path = _write(tmp_path / "x.json.gz", {"distances": [1.0, 2.0], curves.HOMO: {"Cu-Cu": curve}})
    with pytest.raises(DataValidationError, match=message) as err:
        curves.read_curves(path)
    assert str(path) in str(err.value) and "Cu-Cu" in str(err.value)


def test_reader_refuses_what_is_not_a_curves_file(tmp_path):
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(DataValidationError, match="not valid JSON"):
        curves.read_curves(bad)
    with pytest.raises(DataValidationError, match="top-level 'distances'"):
        curves.read_curves(_write(tmp_path / "y.json.gz", {"homo-nuclear": {}}))


# --------------------------------------------------------------------------- implausible numbers


def test_a_potential_returning_1e17_is_flagged_per_point_and_counted_beside_the_leaderboards_means(tmp_path):
    """The attack case: a user's potential answering +1e17 eV and eV/Å for one element. The curve
    stays scored as the leaderboard's code scores it (the means are what it computes), and the
    metadata names each point while the table counts them beside the means."""
    from crucible.cli import main
    from crucible.discovery.data import parse_reference
    from crucible.discovery.diatomics_jobs import scored
    from crucible.discovery.metrics import means, per_element
    from crucible.discovery.report import caption, flagged_text, table
    from crucible.report.tables import write_table

    huge = json.dumps({"huge": {"class": "custom_calculators:huge_potential", "params": {"element": "O"}}})
    for name, extra in (("huge", ["--custom-potentials", huge]), ("emt", [])):
        args = ["discovery", "curves", "--potential", name, *extra, "--elements", "H,O,Cu"]
        assert main([*args, "--out", str(tmp_path / f"{name}.json.gz")]) == 0
    data = curves.read_curves(tmp_path / "huge.json.gz")
    meta = data["run_metadata"]["crucible"]
    assert meta["format"] == curves.CURVES_FORMAT == 2
    points = meta["implausible_points"]["O-O"]
    assert list(points) and len(points) == 119 and set(points[0]) == {"distance", "reason"}
    assert (
        points[0]["distance"] == pytest.approx(0.1) and "implausible energy (|E| 5e+16 eV/atom" in points[0]["reason"]
    )
    assert set(meta["implausible_points"]) == {"O-O"}  # H and Cu are EMT's own numbers
    assert len(data[curves.HOMO]["O-O"]["energies"]) == 119  # kept: the leaderboard's file holds them
    assert curves.flagged_points(data) == {"O-O": 119}

    ref = parse_reference(DATA / "pbe-slice.json.gz")
    ours = scored([tmp_path / "huge.json.gz", tmp_path / "emt.json.gz"], ref)
    expected = means(per_element(curves.homo_curves(data), ref))
    assert ours["huge"]["pbe_force_mae"] == expected["pbe_force_mae"] > 1e16  # the leaderboard's number, kept
    assert ours["huge"]["flagged"] == {"O-O": 119} and ours["emt"]["flagged"] == {}
    df = table(ours, [])
    assert df.set_index("model")["n_flagged"].to_dict() == {"emt": 0, "huge": 119}
    # the scored window of O-O (0.8 covalent radii to 3.1 van der Waals radii) holds some of them
    in_window = sum(curves.in_scored_window("O", d, 6.0) for d in curves.distances())
    assert df.set_index("model")["n_flagged_scored"].to_dict() == {"emt": 0, "huge": in_window} and 0 < in_window < 119
    write_table(
        df, md=tmp_path / "t.md", title="T", caption=caption(df, flagged_text(ours)), headers=HEADERS, significant=4
    )
    text = (tmp_path / "t.md").read_text()
    assert "| flagged points |" in text and "Flagged points by curve: huge: O-O (119)." in text
    assert f"| huge | crucible (cpu) |  | 3 | 119 | {in_window} |" in text


def test_a_steep_physical_wall_is_not_flagged_but_a_force_beyond_the_bare_coulomb_repulsion_is():
    # EMT's Pd, Pt and Au walls pass 1e3 eV/atom below 0.5 Å: real-looking, under the bare nuclei's repulsion
    res = curves.compute_curves(load_potential("emt"), ["H", "Pd", "Pt", "Au", "Cu"])
    assert res["run_metadata"]["crucible"]["implausible_points"] == {}
    assert max(abs(e) / 2 for e in res[curves.HOMO]["Pt-Pt"]["energies"]) > 1e3
    from crucible.potentials.spec import dimer_bounds, implausible_reason

    e_bound, f_bound = dimer_bounds(92, 0.1)  # U-U at 0.1 Å: 92² × 14.4 eV·Å / 0.1 Å
    assert e_bound == pytest.approx(92**2 * 14.399645 / 0.2) and f_bound == pytest.approx(92**2 * 14.399645 / 0.01)
    assert dimer_bounds(1, 6.0) == (1e3, 1e4)
    assert implausible_reason(-5.0, np.full((2, 3), 4.3e17), 2) == "implausible force (|F| 4.3e+17 eV/Å > 1e+04)"
    assert implausible_reason(-5.0, np.full((2, 3), 9e3), 2) is None
    assert implausible_reason(float("nan"), None, 2) is None  # non_finite_reason's to judge
