"""A potential's energy is a real number, read in one place (crucible.potentials.spec.read_energy):
an int, a float, a numpy or torch scalar passes; a string, a list, None or a bool fails that
structure, naming the potential, in every family that calls potentials (EOS, s2ef, catalysis
adsorption and relative energies, crystal relaxation and mlip-search, discovery's dimer curves),
and no module outside crucible.potentials.spec reads a potential's energy or forces itself.

Before, float() read them: a constant "1.0" failed EOS as "Birch-Murnaghan fit did not
converge", None and [1.0] as a bare TypeError naming no potential, and True was the energy 1.0."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from ase.build import bulk

from crucible.cli import main
from crucible.core.io import read_parquet
from crucible.potentials.registry import load_potential
from crucible.potentials.spec import PotentialOutputError, real_array, real_energy

from helpers import REPO

NOT_NUMBERS = ["1.0", [1.0], None, True]
SAYS = {
    "'1.0'": "returned its energy as str '1.0', not a real number",
    "[1.0]": "returned its energy as list [1.0], not a real number",
    "None": "returned its energy as NoneType None, not a real number",
    "True": "returned its energy as bool True, not a real number",
}


def _says(energy) -> str:
    return f"potential 'bad' {SAYS[repr(energy)]} (int, float, numpy or torch scalar)"


def _entry(energy=None, as_type="value"):
    return {"class": "custom_calculators:typed_potential", "params": {"energy": energy, "as_type": as_type}}


def _bad(energy):
    return load_potential("bad", "cpu", custom={"bad": _entry(energy)})


# --------------------------------------------------------------------------- the rule


def test_real_scalars_of_every_kind_are_numbers():
    torch = pytest.importorskip("torch", reason="torch scalars need torch, absent on the Python 3.12 CI leg")

    for value in (3, -2.5, np.float32(1.5), np.int64(4), np.array(2.0), np.array([7.0]), torch.tensor(0.25)):
        assert real_energy(value, "p") == float(np.asarray(value).reshape(()))
    assert real_energy(torch.tensor(1.0, dtype=torch.float32), "p") == 1.0
    assert math.isnan(real_energy(float("nan"), "p"))  # judged non-finite later, as before
    assert real_array(torch.zeros(2, 3), "p", "forces").shape == (2, 3)


@pytest.mark.parametrize(
    "value, says",
    [
        ("1.0", "its energy as str '1.0'"),
        ([1.0], "its energy as list [1.0]"),
        (None, "its energy as NoneType None"),
        (True, "its energy as bool True"),
        (np.bool_(True), "its energy as bool np.True_"),
        (1 + 0j, "its energy as complex (1+0j)"),
        (np.array([1.0, 2.0]), "its energy as ndarray array([1., 2.])"),
        ({"energy": 1.0}, "its energy as dict {'energy': 1.0}"),
        ("x" * 500, "its energy as str 'xxxxxxxx"),
    ],
)
def test_anything_else_is_refused_naming_the_potential(value, says):
    with pytest.raises(PotentialOutputError, match="^potential 'p' returned ") as err:
        real_energy(value, "p")
    assert says in str(err.value) and len(str(err.value)) < 200


def test_forces_of_strings_or_none_are_refused():
    with pytest.raises(PotentialOutputError, match=r"'p' returned its forces as ndarray of <U3"):
        real_array(np.array([["1.0", "0.0", "0.0"]]), "p", "forces")
    with pytest.raises(PotentialOutputError, match="its forces as NoneType None, not an array of real numbers"):
        real_array(None, "p", "forces")


# --------------------------------------------------------------------------- every family


@pytest.mark.parametrize("energy", NOT_NUMBERS)
def test_eos_fails_the_element_naming_the_potential(tmp_path, energy):
    out = tmp_path / "eos.parquet"
    custom = json.dumps({"bad": _entry(energy)})
    assert (
        main(["mlip", "eos", "--model", "bad", "--custom-potentials", custom, "--elements", "Cu", "--out", str(out)])
        == 0
    )
    row = read_parquet(out).iloc[0]
    assert row["status"] == "failed" and math.isnan(row["v0"])
    assert row["failure_reason"].endswith(_says(energy)), row["failure_reason"]


@pytest.mark.parametrize("as_type", ["numpy", "torch"])
def test_eos_of_numpy_and_torch_scalars_is_emts(tmp_path, as_type):
    if as_type == "torch":
        pytest.importorskip("torch", reason="torch scalars need torch, absent on the Python 3.12 CI leg")
    for name, extra in (
        ("emt", []),
        ("typed", ["--custom-potentials", json.dumps({"typed": _entry(as_type=as_type)})]),
    ):
        out = tmp_path / f"{name}.parquet"
        assert main(["mlip", "eos", "--model", name, *extra, "--elements", "Cu", "--out", str(out)]) == 0
    emt, typed = (read_parquet(tmp_path / f"{n}.parquet").iloc[0] for n in ("emt", "typed"))
    assert typed["status"] == "ok"
    assert np.allclose(typed["energies"], emt["energies"], rtol=1e-6 if as_type == "numpy" else 0, atol=1e-6)


@pytest.mark.parametrize("energy", NOT_NUMBERS)
def test_s2ef_fails_the_frame_naming_the_potential(energy):
    from crucible.mlip.frames import predict_frames, read_frames

    df = predict_frames(read_frames("ase-vasp-testdata")[1:2], _bad(energy), progress=False)
    assert df.loc[0, "status"].endswith(_says(energy)) and math.isnan(df.loc[0, "energy_pred"])


@pytest.mark.parametrize("energy", NOT_NUMBERS)
def test_catalysis_fails_the_reaction_and_relative_energies_the_system(catalysis_demo, energy):
    from crucible.catalysis import calculation
    from crucible.catalysis.catbench_files import read_catbench_json
    from crucible.catalysis.relative import read_surface_tree, run_relative

    reaction = read_catbench_json(catalysis_demo / "emt-demo_adsorption.json")[0]
    record = calculation.run_reaction(reaction, _bad(energy), {"seeds": 1})
    assert record["error"].startswith("PotentialOutputError: ") and record["error"].endswith(_says(energy))
    systems = read_surface_tree(catalysis_demo / "emt-demo_surface")[:2]
    df = run_relative("surface", systems, _bad(energy), "bad")
    assert df["error"].str.endswith(_says(energy)).all() and df["mlip"].isna().all()


@pytest.mark.parametrize("energy", NOT_NUMBERS)
def test_a_relaxation_stops_naming_the_potential(energy):
    """crucible.potentials.relax reads the energy at every step: the optimizer itself (FIRE, LBFGS)
    reads only forces, so a string energy relaxed to the end before."""
    from pymatgen.io.ase import AseAtomsAdaptor

    from crucible.crystal.relaxation import relax_structure
    from crucible.potentials.relax import relax

    atoms = bulk("Cu", "fcc", a=3.7)
    with pytest.raises(PotentialOutputError, match="^" + re.escape(_says(energy))):
        relax(atoms, _bad(energy), optimizer="FIRE", fmax=0.05, steps=5)
    with pytest.raises(PotentialOutputError, match="potential 'bad' returned its energy"):
        relax_structure(AseAtomsAdaptor.get_structure(atoms), _bad(energy), "FIRE", 0.1, 5, "frechet")


@pytest.mark.parametrize("energy", NOT_NUMBERS)
def test_discovery_fails_the_dimer_naming_the_potential(tmp_path, energy):
    """The sixth family came after the rule: its curves read float(energy), so a constant "1.0"
    (or True) was a flat curve of 1.0 eV written to the prediction file."""
    from crucible.discovery.curves import HOMO, read_curves

    out = tmp_path / "bad.json.gz"
    custom = json.dumps({"bad": _entry(energy)})
    argv = ["discovery", "curves", "--potential", "bad", "--custom-potentials", custom, "--elements", "Cu"]
    assert main([*argv, "--device", "cpu", "--out", str(out)]) == 0
    doc = read_curves(out)
    assert doc[HOMO] == {}
    failed = doc["run_metadata"]["crucible"]["failed"]
    assert list(failed) == ["Cu-Cu"] and failed["Cu-Cu"] == f"PotentialOutputError: {_says(energy)}", failed


# Modules that read an energy of ASE atoms themselves, and why that is no potential's output.
OWN_ENERGY_READS = {
    "potentials/spec.py": "the one reader",
    "mlip/frames.py": "the reference energies and forces of a dataset's frames, not a potential's",
    "catalysis/demo.py": "the demo dataset's reference values, made with EMT and written as data",
}


def test_no_module_reads_a_potentials_energy_but_the_one_reader():
    src = REPO / "src" / "crucible"
    readers = {
        str(p.relative_to(src))
        for p in src.rglob("*.py")
        if re.search(r"\.get_(potential_energy|forces|stress)\(", p.read_text(encoding="utf-8"))
    }
    assert readers == set(OWN_ENERGY_READS), readers ^ set(OWN_ENERGY_READS)
