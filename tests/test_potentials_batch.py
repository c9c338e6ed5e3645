"""crucible.potentials.batch.evaluate: many structures through a model's own batched pass agree
with its ASE calculator one by one within float32 noise (CHGNet, SevenNet), EMT and a user's
calculator go one by one and give the calculator's own numbers, and a raising, non-finite or
misshapen result is pinned to its structure, never passed on as a number.

Tolerances (float32 networks; measured on these structures, CPU, torch 2.13: CHGNet 0.3.0
energies 0 eV/atom, forces 5.2e-6 eV/Å, stress 1.3e-6 eV/Å³ apart; SevenNet-0 4.8e-7 eV/atom,
2.4e-7 eV/Å, 7.6e-8 eV/Å³; SevenNet-l3i5 9.5e-7 eV/atom, 8.6e-7 eV/Å, 1.3e-7 eV/Å³): energy
1e-5 eV/atom, forces 5e-5 eV/Å, stress 1e-5 eV/Å³ (1.6 MPa), about ten times the largest seen.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from ase.build import bulk
from ase.calculators.calculator import Calculator, all_changes

from crucible.potentials.batch import evaluate, one
from crucible.potentials.registry import load_potential
from crucible.potentials.spec import Potential, PotentialOutputError

E_TOL = 1e-5  # eV/atom
F_TOL = 5e-5  # eV/Å
S_TOL = 1e-5  # eV/Å³


def _displaced(atoms, seed, scale=0.03):
    atoms = atoms.copy()
    atoms.positions += np.random.default_rng(seed).normal(scale=scale, size=atoms.positions.shape)
    return atoms


def _structures():
    """Displaced rock-salt MgO cells of 2, 8 and 16 atoms (one strained), diamond Si, wurtzite
    ZnO, fcc Cu: sizes differ, so a batch is ragged."""
    return [
        _displaced(bulk("MgO", "rocksalt", a=4.21), 1),
        _displaced(bulk("MgO", "rocksalt", a=4.21, cubic=True), 2),
        _displaced(bulk("MgO", "rocksalt", a=4.25, cubic=True).repeat((2, 1, 1)), 3),
        _displaced(bulk("Si", "diamond", a=5.43), 4),
        _displaced(bulk("ZnO", "wurtzite", a=3.25, c=5.2), 5),
        _displaced(bulk("Cu", "fcc", a=3.6, cubic=True), 6),
    ]


def _counting(potential: Potential) -> tuple[Potential, list[int]]:
    """``potential`` whose batched pass records the size of each batch it was given."""
    sizes: list[int] = []

    def batched(atoms_list, forces, stress):
        sizes.append(len(atoms_list))
        return potential.batched(atoms_list, forces, stress)

    return dataclasses.replace(potential, batched=batched), sizes


def _assert_agree(batched, single, structures):
    for b, s, atoms in zip(batched, single, structures):
        assert b.ok and s.ok
        assert abs(b.energy - s.energy) / len(atoms) <= E_TOL
        assert b.forces.shape == (len(atoms), 3) and np.abs(b.forces - s.forces).max() <= F_TOL
        assert b.stress.shape == (6,) and np.abs(b.stress - s.stress).max() <= S_TOL
    # the comparison is not vacuous: the cells are off equilibrium
    assert max(np.abs(s.forces).max() for s in single) > 0.1


@pytest.mark.parametrize(
    ("name", "count"),
    [("chgnet-0.3.0", 6), ("sevennet-0", 4), ("sevennet-l3i5", 2)],  # fewer for the slower networks
)
def test_batched_pass_agrees_with_the_calculator_one_by_one(name, count):
    pytest.importorskip("torch", reason="the networks need torch, absent on the Python 3.12 CI leg")
    structures = _structures()[:count]
    potential, sizes = _counting(load_potential(name, device="cpu"))
    batched = evaluate(potential, structures, batch_size=4, stress=True)
    assert sizes == ([4, count - 4] if count > 4 else [count])  # its own pass ran, in batches of 4
    single = [one(potential, atoms, stress=True) for atoms in structures]
    _assert_agree(batched, single, structures)
    # energies alone (no backward pass) are the same energies
    energies = evaluate(potential, structures, forces=False)
    assert all(e.forces is None for e in energies)
    assert max(abs(e.energy - s.energy) / len(a) for e, s, a in zip(energies, single, structures)) <= E_TOL


def test_a_registered_name_loads_and_emt_goes_one_by_one_with_its_own_numbers():
    from ase.calculators.emt import EMT

    cells = [_displaced(bulk("Cu", "fcc", a=3.6, cubic=True), k) for k in range(3)]
    out = evaluate("emt", cells, stress=True)
    for atoms, ev in zip(cells, out):
        ref = atoms.copy()
        ref.calc = EMT()
        # a fresh EMT per reference: the shared one, having seen the cells before, differs by ~1e-15 eV
        assert ev.ok and ev.energy == pytest.approx(ref.get_potential_energy(), rel=1e-12, abs=1e-12)
        assert np.allclose(ev.forces, ref.get_forces(), rtol=0, atol=1e-12)
        assert np.allclose(ev.stress, ref.get_stress(), rtol=0, atol=1e-12)
        assert atoms.calc is None  # the input is left as it was
    assert load_potential("emt").batched is None


class _Toy(Calculator):
    """A pair potential that raises for gold and gives a NaN force for the atoms count given."""

    implemented_properties = ["energy", "forces"]

    def __init__(self, nan_for: int = -1, shape=None):
        super().__init__()
        self.nan_for, self.shape = nan_for, shape

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        if "Au" in atoms.get_chemical_symbols():
            raise RuntimeError("no parameters for Au")
        forces = np.ones((len(atoms), 3)) * 0.1
        if len(atoms) == self.nan_for:
            forces[0, 0] = math.nan
        self.results = {"energy": -float(len(atoms)), "forces": forces if self.shape is None else np.ones(self.shape)}


def test_a_raising_structure_is_raised_with_its_index_or_recorded_and_the_others_stay():
    cells = [bulk("Cu", "fcc", a=3.6), bulk("Au", "fcc", a=4.08), bulk("Cu", "fcc", a=3.6, cubic=True)]
    with pytest.raises(RuntimeError, match="no parameters for Au") as err:
        evaluate(_Toy(), cells)
    assert any("structure 1 of the batch (Au)" in note for note in err.value.__notes__)
    out = evaluate(_Toy(), cells, errors="record")
    assert [e.ok for e in out] == [True, False, True]
    assert out[1].reason == "RuntimeError: no parameters for Au" and math.isnan(out[1].energy)
    assert out[2].energy == -4.0 and out[2].forces.shape == (4, 3)


def test_non_finite_values_keep_their_reason_and_a_bad_shape_is_refused():
    out = evaluate(_Toy(nan_for=4), [bulk("Cu", "fcc", a=3.6), bulk("Cu", "fcc", a=3.6, cubic=True)])
    assert out[0].ok and out[1].reason == "non-finite forces (1 of 12 components)"
    with pytest.raises(PotentialOutputError, match=r"forces of shape \(2, 3\), expected \(1, 3\)"):
        evaluate(_Toy(shape=(2, 3)), [bulk("Cu", "fcc", a=3.6)])
    with pytest.raises(ValueError, match="errors="):
        evaluate(_Toy(), [], errors="ignore")
    with pytest.raises(ValueError, match="batch_size=0"):
        evaluate(_Toy(), [], batch_size=0)


def test_a_failing_or_non_finite_batch_is_redone_one_by_one_through_the_calculator():
    cells = [bulk("Cu", "fcc", a=3.6), bulk("Au", "fcc", a=4.08), bulk("Cu", "fcc", a=3.6, cubic=True)]

    def raises(atoms_list, forces, stress):
        raise MemoryError("batch too large")

    def nan_first(atoms_list, forces, stress):
        rows = [{"energy": -float(len(a)), "forces": np.zeros((len(a), 3))} for a in atoms_list]
        rows[0]["energy"] = math.nan  # the batch blames the first; the calculator alone does not
        return rows

    toy = Potential(name="toy", device="cpu", calculator=_Toy(), batched=raises)
    out = evaluate(toy, cells, errors="record")
    assert [e.reason for e in out] == [None, "RuntimeError: no parameters for Au", None]
    out = evaluate(dataclasses.replace(toy, batched=nan_first), [cells[0], cells[2]])
    assert [e.ok for e in out] == [True, True] and out[0].energy == -1.0
    assert np.array_equal(out[0].forces, np.full((1, 3), 0.1))  # the calculator's, not the batch's
    assert np.array_equal(out[1].forces, np.zeros((4, 3)))  # the batch's
