"""Per-seed geometry measures (CatBench 1.1.6's ``catbench/utils/calculation_utils.py``; vectors from CatBench's own test suite), a reaction with EMT, OC20 mode, and
resume after a kill without recomputing finished reactions."""

from __future__ import annotations

import json

import numpy as np
import pytest
from ase import Atoms
from ase.calculators.emt import EMT
from ase.constraints import FixAtoms

from crucible.catalysis import calculation as C
from crucible.catalysis import chunks as CH
from crucible.catalysis.adsorption import Reaction, Structure
from crucible.catalysis.catbench_files import read_catbench_json


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
    rs = read_catbench_json(catalysis_demo / "emt-demo_adsorption.json")
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
    r = Reaction(
        "x",
        "Xe",
        "Cu",
        0.0,
        None,
        [Structure("star", "slab", -1, 0, slab), Structure("Xestar", "adslab", 1, 0, ads)],
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


def _counting(monkeypatch):
    original = C.relax

    def counting_relax(atoms, calc_, fmax, steps, **kw):
        calc_.count()
        return original(atoms, calc_, fmax, steps, **kw)

    monkeypatch.setattr(C, "relax", counting_relax)


def _numbers(doc):
    """Everything of a chunk but wall time: what must not depend on kills and reruns."""
    out = []
    for r in doc["reactions"]:
        seeds = [{k: v for k, v in s.items() if not k.endswith("_time")} for s in r["seeds"]]
        out.append((r["reaction_id"], r["final"], r["steps_total_slab"], r["steps_total_adslab"], seeds))
    return out


def test_killed_chunk_resumes_without_recomputing(catalysis_demo, tmp_path, monkeypatch):
    reactions = _reactions(catalysis_demo, 4)  # Cu111_{CO,H,O}, Ni111_CO
    out = tmp_path / "chunk_0.json"
    # Cu111_CO relaxes adslab, slab, CO; Cu111_H and Cu111_O reuse the Cu slab: adslab + gas;
    # the 8th relaxation (Ni111_CO's adslab) is killed.
    calc = CountingEMT(die_after=7)
    _counting(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        CH.run_chunk(reactions, calc, {"seeds": 1}, out, "emt", progress=False)
    assert not out.exists()
    parts = sorted((tmp_path / "chunk_0.json.parts").glob("*.json"))
    assert len(parts) == 3  # reactions finished before the kill were written at once
    again = CountingEMT()
    doc = CH.run_chunk(reactions, again, {"seeds": 1}, out, "emt", progress=False)
    assert (doc["n_resumed"], doc["n_computed"]) == (3, 1)
    assert again.relaxations == 2  # Ni111_CO's adslab and slab; CO's energy comes from a resumed part
    assert json.loads(out.read_text())["n_reactions"] == 4
    assert not (tmp_path / "chunk_0.json.parts").exists()
    # the same numbers, steps counted included, as one uninterrupted run
    fresh = CH.run_chunk(reactions, CountingEMT(), {"seeds": 1}, tmp_path / "other.json", "emt", progress=False)
    assert fresh["n_computed"] == 4 and _numbers(fresh) == _numbers(doc)


def test_slab_relaxed_once_per_seed_and_its_reuse_counts_nothing(catalysis_demo, tmp_path):
    """CatBench's structure cache: the three reactions of a metal share one clean slab, relaxed
    once per seed; the reuse takes the slab's energy and displacements and counts 0 time and 0
    steps, but keeps its steps in the seed (for the step-cap check). Results equal those without
    the cache; Steps_total falls by the reused slab relaxations."""
    reactions = _reactions(catalysis_demo)
    on = CH.run_chunk(reactions, EMT(), {"seeds": 2}, tmp_path / "on.json", "emt", progress=False)
    off = CH.run_chunk(
        reactions, EMT(), {"seeds": 2, "structure_cache": False}, tmp_path / "off.json", "emt", progress=False
    )
    for a, b in zip(on["reactions"], off["reactions"]):
        assert a["final"] == b["final"] and a["single_calculation"] == b["single_calculation"]
        for sa, sb in zip(a["seeds"], b["seeds"]):
            assert {k: sa[k] for k in C.SLAB_FIELDS} == {k: sb[k] for k in C.SLAB_FIELDS}
    reused = [s for r in on["reactions"] for s in r["seeds"] if s["slab_cached"]]
    assert len(reused) == 2 * 6 and all(s["slab_time"] == 0.0 for s in reused)
    paid = {(r["reaction_id"][:2], s["seed"]): s["slab_steps"] for r in on["reactions"] for s in r["seeds"]}
    assert all(s["slab_steps"] == paid[(r["reaction_id"][:2], s["seed"])] for r in on["reactions"] for s in r["seeds"])
    steps_on = sum(r["steps_total_slab"] for r in on["reactions"])
    steps_off = sum(r["steps_total_slab"] for r in off["reactions"])
    assert steps_on == steps_off / 3 and steps_on == sum(
        s["slab_steps"] for r in on["reactions"] for s in r["seeds"] if not s["slab_cached"]
    )
    time_on = sum(r["time_total_slab"] for r in on["reactions"])
    assert time_on == sum(s["slab_time"] for r in on["reactions"] for s in r["seeds"])


def test_steps_total_does_not_depend_on_the_number_of_chunks(catalysis_demo, tmp_path):
    from crucible.catalysis.equivalence import relaxation_groups

    reactions = _reactions(catalysis_demo)
    groups = relaxation_groups(reactions)
    assert len(set(groups.values())) == 3  # one per metal: its slab is shared
    ids = [r.reaction_id for r in reactions]
    chunks = [CH.chunk_ids(ids, k, 4, [groups[i] for i in ids]) for k in range(4)]
    assert sorted(sum(chunks, [])) == sorted(ids)
    assert all(len({groups[i] for i in c}) <= 1 or len(c) % 3 == 0 for c in chunks)
    steps = []
    for n in (1, 4):
        total = 0
        for k in range(n):
            part = [r for r in reactions if r.reaction_id in CH.chunk_ids(ids, k, n, [groups[i] for i in ids])]
            if part:
                doc = CH.run_chunk(part, EMT(), {"seeds": 1}, tmp_path / f"{n}_{k}.json", "emt", progress=False)
                total += sum(r["steps_total_slab"] + r["steps_total_adslab"] for r in doc["reactions"])
        steps.append(total)
    assert steps[0] == steps[1]


def test_changed_input_after_a_kill_is_not_resumed(catalysis_demo, tmp_path, caplog):
    """Kill a relaxation job, change an input structure, rerun: the part of the old input is named
    in the log, set aside (kept) and recomputed, and the numbers equal a fresh run on the new input."""
    reactions = _reactions(catalysis_demo, 3)
    out = tmp_path / "c.json"
    CH.run_chunk(reactions, EMT(), {"seeds": 1}, out, "emt", progress=False)
    # a kill: the parts are still there, the chunk file is not
    parts = out.with_name(out.name + ".parts")
    parts.mkdir()
    for r in json.loads(out.read_text())["reactions"]:
        rec = next(x for x in reactions if x.reaction_id == r["reaction_id"])
        (parts / CH._part_name(r["reaction_id"])).write_text(
            json.dumps(
                {"settings_key": CH.settings_key({"seeds": 1}, "emt"), "input_key": CH.input_key(rec), "record": r}
            )
        )
    out.unlink()
    changed = _reactions(catalysis_demo, 3)
    o = changed[2].by_role("adslab")[0].atoms  # Cu111_O: move the O atom
    o.positions[changed[2].adsorbate_indices[0], 2] += 0.15
    with caplog.at_level("WARNING"):
        doc = CH.run_chunk(changed, EMT(), {"seeds": 1}, out, "emt", progress=False)
    assert (doc["n_resumed"], doc["n_computed"]) == (2, 1)
    name = CH._part_name("Cu111_O")
    assert f"{name} was written for other input structures or energies" in caplog.text
    assert (out.with_name(out.name + ".set-aside") / name).is_file()
    fresh = CH.run_chunk(changed, EMT(), {"seeds": 1}, tmp_path / "fresh.json", "emt", progress=False)
    assert _numbers(doc) == _numbers(fresh)
    old = next(
        r for r in json.loads((tmp_path / "fresh.json").read_text())["reactions"] if r["reaction_id"] == "Cu111_O"
    )
    assert (
        old["final"]["ads_eng_median"]
        != next(
            r
            for r in CH.run_chunk(reactions, EMT(), {"seeds": 1}, tmp_path / "orig.json", "emt", progress=False)[
                "reactions"
            ]
            if r["reaction_id"] == "Cu111_O"
        )["final"]["ads_eng_median"]
    )


def test_truncated_part_is_named_set_aside_and_recomputed(catalysis_demo, tmp_path, caplog):
    reactions = _reactions(catalysis_demo, 2)
    out = tmp_path / "c.json"
    parts = tmp_path / "c.json.parts"
    parts.mkdir()
    bad = parts / CH._part_name(reactions[0].reaction_id)
    bad.write_text('{"settings_key": "abc", "input_key": "de", "record": {"reaction_id": "Cu1')
    with caplog.at_level("WARNING"):
        doc = CH.run_chunk(reactions, EMT(), {"seeds": 1}, out, "emt", progress=False)
    assert doc["n_computed"] == 2 and doc["n_resumed"] == 0
    assert str(bad) in caplog.text and "does not parse" in caplog.text and "JSONDecodeError" in caplog.text
    kept = tmp_path / "c.json.set-aside" / bad.name
    assert kept.read_text().endswith('"Cu1')  # set aside as it was, not lost


def test_a_resumed_reuse_whose_source_changed_is_recomputed(catalysis_demo, tmp_path, caplog):
    """A part that reused a slab relaxed for another reaction is valid only while this run holds
    that relaxation: when the source reaction's slab changed, the reuse is recomputed too."""
    reactions = _reactions(catalysis_demo, 3)  # Cu111_CO pays for the Cu slab; H and O reuse it
    out = tmp_path / "c.json"
    CH.run_chunk(reactions, EMT(), {"seeds": 1}, out, "emt", progress=False)
    parts = out.with_name(out.name + ".parts")
    parts.mkdir()
    for r, rec in zip(json.loads(out.read_text())["reactions"], reactions):
        (parts / CH._part_name(rec.reaction_id)).write_text(
            json.dumps(
                {"settings_key": CH.settings_key({"seeds": 1}, "emt"), "input_key": CH.input_key(rec), "record": r}
            )
        )
    changed = _reactions(catalysis_demo, 3)
    changed[0].by_role("slab")[0].atoms.positions[5, 2] += 0.1  # Cu111_CO's own copy of the slab
    with caplog.at_level("WARNING"):
        doc = CH.run_chunk(changed, EMT(), {"seeds": 1}, out, "emt", progress=False)
    # Cu111_CO's input changed; Cu111_H reused CO's old slab, which this run no longer holds, so it
    # is relaxed again (and pays for the Cu slab); Cu111_O's reuse matches Cu111_H's fresh slab
    assert (doc["n_computed"], doc["n_resumed"]) == (2, 1)
    assert "reuses a relaxation that this run does not hold" in caplog.text
    fresh = CH.run_chunk(changed, EMT(), {"seeds": 1}, tmp_path / "fresh.json", "emt", progress=False)
    assert _numbers(doc) == _numbers(fresh)
    payers = [r["reaction_id"] for r in doc["reactions"] if not r["seeds"][0]["slab_cached"]]
    assert payers == ["Cu111_CO", "Cu111_H"]


def test_gas_fixed_atom_is_one_of_the_heaviest_and_repeats():
    from ase.build import molecule

    h2o, h2 = molecule("H2O"), molecule("H2")
    assert C.gas_fixed_atom(h2o, 0, "H2Ogas") == 0  # O, the only heaviest atom
    picks = {C.gas_fixed_atom(h2, seed, "H2gas") for seed in range(20)}
    assert picks == {0, 1}  # either H: drawn, as CatBench draws it
    assert [C.gas_fixed_atom(h2, s, "H2gas") for s in range(20)] == [
        C.gas_fixed_atom(h2, s, "H2gas") for s in range(20)
    ]


class TagSpy(EMT):
    def __init__(self):
        super().__init__()
        self.tags = set()

    def calculate(self, atoms=None, properties=("energy",), system_changes=()):
        self.tags.update(int(t) for t in atoms.get_tags())
        super().calculate(atoms, properties, system_changes)


def test_the_potential_sees_every_tag_set_to_one(catalysis_demo):
    r = _reactions(catalysis_demo, 1)[0]
    assert {int(t) for t in r.by_role("slab")[0].atoms.get_tags()} == {1, 2, 3}  # fcc111's layer tags
    spy = TagSpy()
    C.run_reaction(r, spy, {"seeds": 1})
    assert spy.tags == {1}


class FailsOnSecondSeed(EMT):
    def calculate(self, atoms=None, properties=("energy",), system_changes=()):
        if np.random.get_state()[1][0] == np.random.RandomState(1).get_state()[1][0] and len(atoms) > 2:
            raise FloatingPointError("potential returned nan")
        super().calculate(atoms, properties, system_changes)


def test_a_seed_that_fails_makes_the_reaction_a_counted_failure(catalysis_demo):
    """A potential that fails in one seed (as the NaN guard of the shared relaxation will make a
    non-finite energy fail) makes the reaction a calculation failure with its stage: counted in
    Num_failed, in no class."""
    from crucible.catalysis import analysis as A

    reactions = _reactions(catalysis_demo, 2)
    records = [C.run_reaction(r, FailsOnSecondSeed(), {"seeds": 2}) for r in reactions]
    assert all(rec["error"].startswith("FloatingPointError") for rec in records)
    assert records[0]["stage"] == "relax:adslab" and len(records[0]["seeds"]) == 1
    s = A.summarize(records, A.Thresholds(), "emt")
    assert s["mlip"]["Num_total"] == 0 and s["mlip"]["Num_failed"] == 2
    assert s["coverage"]["Num_failed"] == 2 and s["coverage"]["Failed_by_stage"] == "relax:adslab: 2"


def test_parts_from_other_settings_are_not_reused(catalysis_demo, tmp_path):
    reactions = _reactions(catalysis_demo, 1)
    out = tmp_path / "c.json"
    parts = tmp_path / "c.json.parts"
    parts.mkdir()
    stale = {"settings_key": "not-these-settings", "record": {"reaction_id": reactions[0].reaction_id}}
    (parts / CH._part_name(reactions[0].reaction_id)).write_text(json.dumps(stale))
    doc = CH.run_chunk(reactions, EMT(), {"seeds": 1}, out, "emt", progress=False)
    assert doc["n_computed"] == 1 and doc["n_resumed"] == 0


def test_chunks_partition_the_sorted_ids():
    ids = [f"r{i:02d}" for i in range(10)][::-1]
    chunks = [CH.chunk_ids(ids, k, 3) for k in range(3)]
    assert sum(chunks, []) == sorted(ids)
    assert [len(c) for c in chunks] == [3, 4, 3]
    with pytest.raises(ValueError):
        CH.chunk_ids(ids, 3, 3)
