"""Per-seed geometry measures (CatBench 1.1.6's ``catbench/utils/calculation_utils.py``; vectors from CatBench's own test suite), a reaction with EMT, OC20 mode, and
resume after a kill without recomputing finished reactions."""

from __future__ import annotations

import json

import pytest
from ase import Atoms
from ase.calculators.emt import EMT
from ase.constraints import FixAtoms

from crucible.catalysis import calculation as C
from crucible.catalysis import data


def test_displacement_vectors():
    a = Atoms("H2", positions=[(1, 1, 1), (5, 5, 5)], cell=[20, 20, 20], pbc=True)
    b = a.copy()
    b.positions += [(0.3, 0.4, 0), (0, 0, 1.2)]
    assert C.displacement_stats(a, b)["max_disp"] == pytest.approx(1.2)
    hexa = Atoms("H", positions=[(0, 0, 0)], cell=[(3, 0, 0), (-1.5, 3 * 3**0.5 / 2, 0), (0, 0, 10)], pbc=True)
    moved = hexa.copy()
    moved.positions += hexa.cell[1] + (0.1, 0, 0)
    assert C.displacement_stats(hexa, moved)["max_disp"] == pytest.approx(0.1)
    fx = Atoms("H2", positions=[(1, 1, 1), (5, 5, 5)], cell=[30, 30, 30], pbc=True)
    fx.set_constraint(FixAtoms(indices=[0]))
    fy = fx.copy()
    fy.positions += [(10, 0, 0), (0.2, 0, 0)]
    stats = C.displacement_stats(fx, fy)
    assert stats["max_disp"] == pytest.approx(10) and stats["pos_mae"] == pytest.approx(0.2)
    # substrate displacement ignores a non-trailing adsorbate index
    s0 = Atoms("HHe", positions=[(1, 1, 1), (5, 5, 5)], cell=[20, 20, 20], pbc=True)
    s1 = s0.copy()
    s1.positions[0] += (2, 0, 0)
    assert C.substrate_displacement(s0, s1, [0]) == 0.0
    s1.positions[1] += (0.3, 0, 0)
    assert C.substrate_displacement(s0, s1, [0]) == pytest.approx(0.3)


def test_max_bond_change_percent_with_cutoff():
    a = Atoms("OCu", positions=[(0, 0, 2), (0, 0, 0)], cell=[20, 20, 20], pbc=True)
    b = a.copy()
    b.positions[0] = (0, 0, 2.5)
    assert C.max_bond_change(a, b, [0]) == pytest.approx(25.0)
    far = Atoms("OCu", positions=[(0, 0, 7), (0, 0, 0)], cell=[30, 30, 30], pbc=True)
    far2 = far.copy()
    far2.positions[0] = (0, 0, 8)
    assert C.max_bond_change(far, far2, [0], cutoff=6.0) == 0.0  # both distances beyond the cutoff


def _reactions(catalysis_demo, n=None):
    rs = data.read_catbench_json(catalysis_demo / "emt-demo_adsorption.json")
    return rs[:n] if n else rs


def test_emt_reproduces_its_own_reference_energies(catalysis_demo):
    r = _reactions(catalysis_demo, 1)[0]
    rec = C.run_reaction(r, EMT(), {"seeds": 3})
    assert rec["error"] is None and len(rec["seeds"]) == 3
    assert rec["single_calculation"]["ads_eng"] == pytest.approx(r.dft_ads_eng, abs=1e-9)
    assert abs(rec["final"]["ads_eng_median"] - r.dft_ads_eng) < 0.02
    assert rec["final"]["ads_eng_seed_range"] == 0.0  # EMT is deterministic
    assert all(s["adslab_steps"] > 0 for s in rec["seeds"])  # the demo is relaxed loosely on purpose
    assert rec["steps_total_adslab"] == sum(s["adslab_steps"] for s in rec["seeds"])


def test_step_cap_is_recorded(catalysis_demo):
    rec = C.run_reaction(_reactions(catalysis_demo, 1)[0], EMT(), {"seeds": 1, "max_steps": 1})
    assert rec["seeds"][0]["adslab_steps"] == 1


def test_oc20_mode_relaxes_only_the_adslab(catalysis_demo):
    r = _reactions(catalysis_demo, 1)[0]
    rec = C.run_reaction(r, EMT(), {"seeds": 2, "mode": "oc20"})
    adslab = next(s for s in r.structures if s.role == "adslab")
    assert rec["seeds"][0]["slab_tot_eng"] is None and rec["seeds"][0]["max_bond_change"] == 0.0
    assert rec["final"]["ads_eng_median"] == pytest.approx(rec["seeds"][0]["adslab_tot_eng"])
    assert rec["single_calculation"]["ads_eng"] == pytest.approx(adslab.dft_energy, abs=1e-9)


def test_unsupported_element_is_recorded_not_dropped():
    slab = Atoms("Cu", positions=[(0, 0, 0)], cell=[3, 3, 10], pbc=True)
    ads = Atoms("CuXe", positions=[(0, 0, 0), (0, 0, 2)], cell=[3, 3, 10], pbc=True)
    r = data.Reaction(
        "x",
        "Xe",
        "Cu",
        0.0,
        None,
        [data.Structure("star", "slab", -1, 0, slab), data.Structure("Xestar", "adslab", 1, 0, ads)],
        [1],
    )
    rec = C.run_reaction(r, EMT(), {"seeds": 1})
    assert rec["error"] and rec["final"] is None


class CountingEMT(EMT):
    """EMT that counts LBFGS relaxations started (one per initial calculate of a fresh copy)
    and can be told to die after N relaxations, like a killed job."""

    def __init__(self, die_after=None):
        super().__init__()
        self.relaxations = 0
        self.die_after = die_after

    def count(self):
        self.relaxations += 1
        if self.die_after is not None and self.relaxations > self.die_after:
            raise KeyboardInterrupt("killed")


def test_killed_chunk_resumes_without_recomputing(catalysis_demo, tmp_path, monkeypatch):
    reactions = _reactions(catalysis_demo, 4)
    out = tmp_path / "chunk_0.json"
    calc = CountingEMT(die_after=7)  # 3 relaxations per reaction per seed-1 run (slab, adslab, 1 gas)
    original = C.relax

    def counting_relax(atoms, calc_, fmax, steps, **kw):
        calc_.count()
        return original(atoms, calc_, fmax, steps, **kw)

    monkeypatch.setattr(C, "relax", counting_relax)
    with pytest.raises(KeyboardInterrupt):
        C.run_chunk(reactions, calc, {"seeds": 1}, out, "emt", progress=False)
    assert not out.exists()
    parts = sorted((tmp_path / "chunk_0.json.parts").glob("*.json"))
    assert len(parts) == 2  # reactions finished before the kill were written at once
    again = CountingEMT()
    doc = C.run_chunk(reactions, again, {"seeds": 1}, out, "emt", progress=False)
    assert (doc["n_resumed"], doc["n_computed"]) == (2, 2)
    assert again.relaxations == 2 * 3  # slab, adslab, gas of the two missing reactions only
    assert json.loads(out.read_text())["n_reactions"] == 4
    assert not (tmp_path / "chunk_0.json.parts").exists()
    # changed settings: the parts would not be reused (here none remain); a full rerun recomputes
    fresh = C.run_chunk(reactions, CountingEMT(), {"seeds": 1}, tmp_path / "other.json", "emt", progress=False)
    assert fresh["n_computed"] == 4


def test_parts_from_other_settings_are_not_reused(catalysis_demo, tmp_path):
    reactions = _reactions(catalysis_demo, 1)
    out = tmp_path / "c.json"
    parts = tmp_path / "c.json.parts"
    parts.mkdir()
    stale = {"settings_key": "not-these-settings", "record": {"reaction_id": reactions[0].reaction_id}}
    (parts / C._part_name(reactions[0].reaction_id)).write_text(json.dumps(stale))
    doc = C.run_chunk(reactions, EMT(), {"seeds": 1}, out, "emt", progress=False)
    assert doc["n_computed"] == 1 and doc["n_resumed"] == 0


def test_chunks_partition_the_sorted_ids():
    ids = [f"r{i:02d}" for i in range(10)][::-1]
    chunks = [C.chunk_ids(ids, k, 3) for k in range(3)]
    assert sum(chunks, []) == sorted(ids)
    assert [len(c) for c in chunks] == [3, 4, 3]
    with pytest.raises(ValueError):
        C.chunk_ids(ids, 3, 3)
