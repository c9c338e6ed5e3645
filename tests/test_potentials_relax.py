"""crucible.potentials.relax: fixed atoms, the cell filter crystal mlip-search uses (equal to the loop it
replaced), step and time accounting, and a potential that returns NaN stopping with a failure
status (in relax itself, in catalysis, relative energies, EOS and s2ef)."""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import pytest
from ase.build import bulk, fcc111
from ase.calculators.calculator import Calculator, all_changes
from ase.calculators.emt import EMT
from ase.constraints import FixAtoms

from crucible.potentials.relax import NON_FINITE, relax


class NaNAfter(Calculator):
    """EMT until its ``after``-th evaluation, then NaN in ``what`` ("energy", "forces", "stress")."""

    implemented_properties = ["energy", "free_energy", "forces", "stress"]

    def __init__(self, after: int = 0, what: str = "energy"):
        super().__init__()
        self.after, self.what, self.calls = after, what, 0
        self._emt = EMT()

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        wanted = ["energy", "forces"] + (["stress"] if self.atoms.pbc.all() else [])
        self._emt.calculate(self.atoms, wanted, all_changes)
        self.results = {k: np.array(v, copy=True) for k, v in self._emt.results.items()}
        for k in ("energy", "free_energy"):
            self.results[k] = float(self.results[k])
        if self.calls >= self.after:
            if self.what == "energy":
                self.results["energy"] = self.results["free_energy"] = float("nan")
            else:
                self.results[self.what] = np.full_like(self.results[self.what], np.nan)
        self.calls += 1


def _slab():
    slab = fcc111("Cu", size=(2, 2, 3), vacuum=6.0)
    slab.rattle(0.05, seed=1)
    slab.set_constraint(FixAtoms(indices=[a.index for a in slab if a.tag == 3]))  # bottom layer
    return slab


def test_fixed_atoms_stay_and_the_rest_relax():
    slab = _slab()
    extra = [4]  # a middle-layer atom, held on top of the structure's own bottom-layer constraint
    result = relax(slab, EMT(), optimizer="LBFGS", fmax=0.05, steps=200, fixed=extra)
    held = sorted({a.index for a in slab if a.tag == 3} | set(extra))
    moved = np.linalg.norm(result.atoms.positions - slab.positions, axis=1)
    assert result.ok and result.converged and result.steps > 0
    assert np.all(moved[held] == 0.0)
    assert np.all(moved[[i for i in range(len(slab)) if i not in held]] > 1e-4)
    assert np.abs(result.atoms.get_forces()).max() < 0.05
    assert slab.constraints[0].get_indices().tolist() == held[:-1]  # the input is not touched


def test_lbfgs_is_exactly_the_loop_catalysis_ran():
    from ase.optimize import LBFGS

    slab = _slab()
    work = slab.copy()
    work.calc = EMT()
    opt = LBFGS(work, logfile=None)
    opt.run(fmax=0.05, steps=999)
    result = relax(slab, EMT(), optimizer="LBFGS", fmax=0.05, steps=999)
    assert result.steps == opt.get_number_of_steps()
    assert result.energy == work.get_potential_energy()
    assert np.array_equal(result.atoms.positions, work.positions)


def _old_mlip_search_relax(atoms, calc, fmax, steps):
    """What crystal's MlipSearchGenerator._relax did before it used crucible.potentials.relax."""
    from ase.filters import FrechetCellFilter
    from ase.optimize import FIRE

    atoms.calc = calc
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = FIRE(FrechetCellFilter(atoms), logfile=None)
        opt.run(fmax=fmax, steps=steps)
        energy = float(atoms.get_potential_energy()) / len(atoms)
    return energy, atoms, opt.get_number_of_steps()


@pytest.mark.parametrize("steps", [100, 7])
def test_cell_filter_relaxation_equals_what_mlip_search_did(steps):
    strained = bulk("Cu", "fcc", a=3.75, cubic=True)  # EMT's a0 is about 3.59
    strained.rattle(0.02, seed=3)
    energy, old, old_steps = _old_mlip_search_relax(strained.copy(), EMT(), 0.1, steps)
    result = relax(strained, EMT(), optimizer="FIRE", fmax=0.1, steps=steps, cell_filter="frechet", quiet=True)
    assert result.ok and result.steps == old_steps
    assert result.energy / len(result.atoms) == energy
    assert np.array_equal(result.atoms.cell.array, old.cell.array)
    assert np.array_equal(result.atoms.positions, old.positions)
    assert result.atoms.get_volume() < strained.get_volume()  # the cell relaxed, not only the atoms


def test_mlip_search_generator_relaxes_with_the_cell_filter():
    from pymatgen.io.ase import AseAtomsAdaptor

    from crucible.crystal.mlip_search import MlipSearchGenerator

    gen = MlipSearchGenerator(model="emt", fmax=0.1, steps=60)
    strained = bulk("Cu", "fcc", a=3.75, cubic=True)
    energy, structure = gen._relax(AseAtomsAdaptor.get_structure(strained))
    expected, old, _ = _old_mlip_search_relax(strained.copy(), EMT(), 0.1, 60)
    assert energy == expected
    assert np.allclose(structure.lattice.matrix, old.cell.array, atol=1e-12)


def test_step_and_time_accounting():
    slab = _slab()
    t0 = time.perf_counter()
    capped = relax(slab, EMT(), fmax=1e-6, steps=5)
    capped_wall = time.perf_counter() - t0
    assert capped.steps == 5 and not capped.converged and capped.ok
    none = relax(slab, EMT(), fmax=1e-6, steps=0)
    assert none.steps == 0 and none.energy == pytest.approx(relax(slab, EMT(), steps=0).energy)
    t0 = time.perf_counter()
    full = relax(slab, EMT(), fmax=0.05, steps=999)
    wall = time.perf_counter() - t0
    assert full.converged and 5 < full.steps < 999
    # each relaxation's time is its own, bounded by the wall time around it (comparing the two
    # relaxations' times with each other would be a timing test, flaky on a loaded machine)
    assert 0 < capped.time <= capped_wall and 0 < full.time <= wall


def test_unknown_optimizer_or_filter_is_refused():
    with pytest.raises(ValueError, match="optimizer 'SGD'"):
        relax(_slab(), EMT(), optimizer="SGD")
    with pytest.raises(ValueError, match="cell filter 'strain'"):
        relax(_slab(), EMT(), cell_filter="strain")


@pytest.mark.parametrize(
    ("after", "what", "cell_filter", "reason"),
    [
        (0, "energy", None, "non-finite energy (nan)"),
        # the 4 atoms of the fixed bottom layer get zero forces from FixAtoms: 8 x 3 components left
        (3, "forces", None, "non-finite forces (24 of 36 components)"),
        (2, "stress", "frechet", "non-finite stress (6 of 6 components)"),
    ],
)
def test_nan_from_the_potential_is_a_failure_status(after, what, cell_filter, reason):
    atoms = _slab() if cell_filter is None else bulk("Cu", "fcc", a=3.75, cubic=True)
    calc = NaNAfter(after, what)
    result = relax(atoms, calc, fmax=1e-6, steps=500, cell_filter=cell_filter, quiet=True)
    assert result.status == NON_FINITE and not result.ok and not result.converged
    assert math.isnan(result.energy)
    # one potential evaluation per optimizer step: the NaN came at step `after`, and nothing ran after it
    assert result.reason == f"{reason} at optimizer step {after}"
    assert result.steps == after and calc.calls == after + 1


# --------------------------------------------------------------------------- the guard downstream


def test_nan_potential_is_a_calculation_failure_in_catalysis(catalysis_demo):
    from crucible.catalysis import analysis, calculation
    from crucible.catalysis.catbench_files import read_catbench_json

    reactions = read_catbench_json(catalysis_demo / "emt-demo_adsorption.json")
    records = [calculation.run_reaction(r, NaNAfter(0), {"seeds": 3}) for r in reactions]
    # the single points of the unrelaxed structures run first, as in CatBench: the first one fails
    for r, rec in zip(reactions, records):
        first = r.structures[0]
        where = first.role if first.role != "gas" else f"gas {first.key}"
        assert rec["error"] == f"NonFiniteError: {where} single point: non-finite energy (nan)"
        assert rec["stage"].startswith("single_point:")
    s = analysis.summarize(records, analysis.Thresholds(), "nan-emt")
    assert s["mlip"]["Num_failed"] == len(reactions) and s["mlip"]["Num_total"] == 0
    assert s["anomaly"]["Num_normal"] == 0
    assert (s["reactions"]["class"] == analysis.FAILED).all()
    # finite single points, NaN from the first relaxation step on (the adslab of seed 0)
    n_single = len(reactions[0].structures)
    for what in ("energy", "forces"):
        rec = calculation.run_reaction(reactions[0], NaNAfter(after=n_single, what=what), {"seeds": 1})
        assert rec["error"].startswith(f"NonFiniteError: seed 0: adslab relaxation: non-finite {what}")
        assert rec["stage"] == "relax:adslab" and rec["final"] is None


def test_nan_potential_fails_relative_energies(catalysis_demo):
    from crucible.catalysis.relative import read_surface_tree, relative_table, run_relative

    systems = read_surface_tree(catalysis_demo / "emt-demo_surface")
    df = run_relative("surface", systems, NaNAfter(0), "nan-emt")
    assert df["error"].str.contains("NonFiniteError: non-finite energy").all()
    table = relative_table([df])
    assert table.loc[0, "n_failed"] == len(systems) and math.isnan(table.loc[0, "MAE"])


def test_nan_forces_are_an_s2ef_failure_status():
    from crucible.mlip.frames import predict_frames, read_frames

    frames = read_frames("ase-vasp-testdata")[1:2]
    df = predict_frames(frames, NaNAfter(0, "forces"), progress=False)
    assert df.loc[0, "status"].startswith("non-finite forces") and math.isnan(df.loc[0, "energy_pred"])
    assert df.loc[0, "forces_pred"] is None
