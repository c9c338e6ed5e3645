"""Readers of every format on the EMT demo fixtures, read-only user trees, clean + card."""

from __future__ import annotations

import json
import os
import shutil
import stat

import pytest

from crucible.catalysis import demo
from crucible.catalysis.adsorption import Reaction, Structure
from crucible.catalysis.catbench_files import catbench_document, read_catbench_json, write_catbench_json
from crucible.catalysis.cathub import read_cathub_raw
from crucible.catalysis.clean import clean, load_reactions
from crucible.catalysis.vasp_tree import read_vasp_tree
from crucible.core.errors import DataValidationError
from crucible.sources import pinned_files


def _summary(reactions):
    # a Catalysis-Hub reaction is named by CatBench's rule; its node id is the demo's name
    return {
        (r.cathub_id or r.reaction_id).removesuffix("_site_0"): (
            r.adsorbate,
            round(r.dft_ads_eng, 6),
            r.adsorbate_indices,
            [(s.key, s.role, s.stoi, round(s.dft_energy, 6), len(s.atoms)) for s in r.structures],
        )
        for r in reactions
    }


def test_three_formats_give_the_same_reactions(catalysis_demo):
    a = read_catbench_json(catalysis_demo / "emt-demo_adsorption.json")
    c = read_cathub_raw(catalysis_demo / "emt-demo_cathub.json")
    v = read_vasp_tree(catalysis_demo / "emt-demo_vasp", demo.COEFFICIENTS)
    assert len(a) == 9
    assert _summary(a) == _summary(c) == _summary(v)
    h = next(r for r in a if r.reaction_id == "Cu111_H")
    assert next(r for r in c if r.cathub_id == "Cu111_H").reaction_id == "Cu12_0.5H2(g) + * -> H*"
    assert [s.key for s in h.structures] == ["star", "Hstar", "H2gas"]
    assert h.adsorbate_indices == [12]
    # E_ads = Σ stoi·E: slab −1, adslab +1, H2 −1/2
    assert h.dft_ads_eng == pytest.approx(
        h.structures[1].dft_energy - h.structures[0].dft_energy - 0.5 * h.structures[2].dft_energy
    )


def test_fixed_atoms_survive_every_format(catalysis_demo):
    for reactions in (
        read_catbench_json(catalysis_demo / "emt-demo_adsorption.json"),
        read_cathub_raw(catalysis_demo / "emt-demo_cathub.json"),
        read_vasp_tree(catalysis_demo / "emt-demo_vasp", demo.COEFFICIENTS),
    ):
        slab = reactions[0].structures[0].atoms
        fixed = sorted(i for c in slab.constraints for i in c.get_indices())
        assert fixed == [0, 1, 2, 3], reactions[0].reaction_id  # the bottom layer, from Selective Dynamics in VASP


def test_hand_vector_adsorption_energy():
    from ase import Atoms

    # by hand, CatBench's E_ads = Σ stoi·E: adslab −3.0, slab −1.0, H2 −6.8 → +1.4 eV
    s = [
        Structure("star", "slab", -1, -1.0, Atoms("H")),
        Structure("Hstar", "adslab", 1, -3.0, Atoms("H2")),
        Structure("H2gas", "gas", -0.5, -6.8, Atoms("H2")),
    ]
    assert Reaction("r", "H", "x", 1.4, 1.4, s).energy_sum() == pytest.approx(1.4)


def _read_only_copy(src, dst):
    shutil.copytree(src, dst)
    for root, _dirs, files in os.walk(dst):
        for f in files:
            os.chmod(os.path.join(root, f), stat.S_IRUSR | stat.S_IRGRP)
        os.chmod(root, stat.S_IRUSR | stat.S_IXUSR)
    return dst


def _snapshot(root):
    return {
        os.path.relpath(os.path.join(r, f), root): open(os.path.join(r, f), "rb").read()
        for r, _, files in os.walk(root)
        for f in files
    }


def test_vasp_tree_is_only_read(catalysis_demo, tmp_path):
    tree = _read_only_copy(catalysis_demo / "emt-demo_vasp", tmp_path / "ro")
    before = _snapshot(tree)
    assert any(k.endswith("OUTCAR") for k in before)  # CatBench's preprocessing would delete these
    try:
        reactions = read_vasp_tree(tree, demo.COEFFICIENTS)
        out = tmp_path / "out"
        clean(
            reactions,
            out / "r.parquet",
            out / "s.db",
            out / "card.json",
            source={"format": "vasp-tree", "path": str(tree), "sha256": pinned_files.dataset_sha256(tree)},
        )
        assert _snapshot(tree) == before
        assert sorted(os.listdir(tree)) == sorted(os.listdir(catalysis_demo / "emt-demo_vasp"))
    finally:
        for root, _dirs, _files in os.walk(tree):
            os.chmod(root, stat.S_IRWXU)


def test_clean_writes_table_db_card_and_roundtrips(catalysis_demo, tmp_path):
    reactions = read_catbench_json(catalysis_demo / "emt-demo_adsorption.json")
    card = clean(
        reactions,
        tmp_path / "r.parquet",
        tmp_path / "s.db",
        tmp_path / "card.json",
        source={"format": "catbench-json"},
        energy_source=demo.ENERGY_SOURCE,
    )
    assert card["n_reactions"] == 9
    assert card["reactions_per_adsorbate"] == {"CO": 3, "H": 3, "O": 3}
    assert card["energy_check"]["n_checked"] == 9
    assert card["energy_check"]["worst_abs_difference_eV"] < 1e-9
    assert "EMT" in json.loads((tmp_path / "card.json").read_text())["energy_source"]
    back = load_reactions(tmp_path / "r.parquet", tmp_path / "s.db")
    assert _summary(back) == _summary(reactions)
    assert [str(c) for c in back[0].structures[0].atoms.constraints] == [
        str(c) for c in reactions[0].structures[0].atoms.constraints
    ]


def test_stated_energy_mismatch_fails_naming_the_reaction(catalysis_demo, tmp_path):
    doc = json.loads((catalysis_demo / "emt-demo_adsorption.json").read_text())
    doc["Pt111_O"]["ref_ads_eng"] += 0.05
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    reactions = read_catbench_json(bad)
    with pytest.raises(DataValidationError, match="Pt111_O.*0.05"):
        clean(reactions, tmp_path / "r.parquet", tmp_path / "s.db", tmp_path / "c.json", source={"path": str(bad)})
    assert not (tmp_path / "r.parquet").exists()
    clean(reactions, tmp_path / "r.parquet", tmp_path / "s.db", tmp_path / "c.json", source={}, tolerance=0.1)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["Cu111_H"].pop("ref_ads_eng"), "Cu111_H.*ref_ads_eng"),
        (lambda d: d["Cu111_H"]["raw"]["star"].pop("atoms_json"), "Cu111_H.*raw.star.*'atoms_json' or 'ref' missing"),
        (lambda d: d["Cu111_H"]["raw"].update({"weird": d["Cu111_H"]["raw"]["star"]}), "weird"),
        (lambda d: d["Cu111_H"]["raw"]["H2gas"].update(energy_ref="nan"), "H2gas.energy_ref"),
    ],
)
def test_bad_catbench_json_names_reaction_and_field(catalysis_demo, tmp_path, mutate, message):
    # the layout before CatBench 1.1.1, with atoms_json inline
    doc = catbench_document(read_catbench_json(catalysis_demo / "emt-demo_adsorption.json"), dedup=False)
    mutate(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(DataValidationError, match=message):
        read_catbench_json(bad, filtering="strict")


def test_both_catbench_layouts_read_the_same(catalysis_demo, tmp_path):
    """The deduplicated layout (``_structures`` + ``ref``, what CatBench >= 1.1.1 writes and every
    Zenodo / leaderboard file uses), the earlier inline one, and gzip of either: equal reactions."""

    current = catalysis_demo / "emt-demo_adsorption.json"
    doc = json.loads(current.read_text())
    assert "_structures" in doc and all("ref" in s for s in doc["Cu111_H"]["raw"].values())
    # the clean slab of a metal is stored once for its three reactions, every gas once
    assert len(doc["_structures"]) == 3 + 9 + 3
    reactions = read_catbench_json(current)
    old = write_catbench_json(reactions, tmp_path / "old_adsorption.json", dedup=False)
    assert "_structures" not in json.loads(old.read_text())
    gz = write_catbench_json(reactions, tmp_path / "x_adsorption.json.gz")
    for other in (read_catbench_json(old), read_catbench_json(gz)):
        assert _summary(other) == _summary(reactions)
    # writing is deterministic: the same bytes twice
    again = write_catbench_json(reactions, tmp_path / "again_adsorption.json")
    assert again.read_bytes() == write_catbench_json(reactions, tmp_path / "b_adsorption.json").read_bytes()


def test_dangling_ref_and_catbench_rules_for_json(catalysis_demo, tmp_path):
    doc = json.loads((catalysis_demo / "emt-demo_adsorption.json").read_text())
    ref = doc["Pt111_O"]["raw"]["Ostar"]["ref"]
    broken = {**doc, "_structures": {k: v for k, v in doc["_structures"].items() if k != ref}}
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    with pytest.raises(DataValidationError, match=r"Pt111_O.*'Ostar'.*not in the file's '_structures'"):
        read_catbench_json(tmp_path / "broken.json")
    # a reaction CatBench cannot benchmark (two adslabs) is dropped with its reason, or refused
    doc["Cu111_H"]["raw"]["Ostar"] = doc["Cu111_O"]["raw"]["Ostar"]
    (tmp_path / "two.json").write_text(json.dumps(doc))
    kept = read_catbench_json(tmp_path / "two.json")
    assert len(kept) == 8 and [(d["reaction_id"], d["rule"]) for d in kept.dropped] == [("Cu111_H", "structure_roles")]
    with pytest.raises(DataValidationError, match="Cu111_H.*2 adslab structures"):
        read_catbench_json(tmp_path / "two.json", filtering="strict")


def test_vasp_tree_errors(catalysis_demo, tmp_path):
    tree = tmp_path / "t"
    shutil.copytree(catalysis_demo / "emt-demo_vasp", tree)
    with pytest.raises(DataValidationError, match="'CO' has no entry in coefficients"):
        read_vasp_tree(tree, {k: v for k, v in demo.COEFFICIENTS.items() if k != "CO"})
    with pytest.raises(DataValidationError, match="must end with 'gas'"):
        read_vasp_tree(tree, {**demo.COEFFICIENTS, "H": {"slab": -1, "adslab": 1, "H2": -0.5}})
    (tree / "Cu111" / "O" / "site_0" / "OSZICAR").write_text("nothing\n")
    with pytest.raises(DataValidationError, match="Cu111/O/site_0/OSZICAR: no line with 'E0='"):
        read_vasp_tree(tree, demo.COEFFICIENTS)


def test_gzipped_catbench_json(catalysis_demo, tmp_path):
    import gzip

    gz = tmp_path / "x_adsorption.json.gz"
    gz.write_bytes(gzip.compress((catalysis_demo / "emt-demo_adsorption.json").read_bytes()))
    assert len(read_catbench_json(gz)) == 9
    (tmp_path / "cut.json.gz").write_bytes(gz.read_bytes()[:-200])
    with pytest.raises(DataValidationError, match="cut.json.gz: not readable"):
        read_catbench_json(tmp_path / "cut.json.gz")


def test_catbench_filtering_drops_are_listed_in_the_card(catalysis_demo, tmp_path):
    """Every reaction CatBench's rules drop is in the card with its reason; nothing is silent."""
    raw = catalysis_demo / "emt-demo-filters_cathub.json"
    reactions = read_cathub_raw(raw)
    card = clean(reactions, tmp_path / "r.parquet", tmp_path / "s.db", tmp_path / "card.json", source={})
    assert (card["n_input"], card["n_reactions"], card["n_dropped"]) == (20, 14, 6)
    assert card["filtering"] == "catbench" and card["energy_check"]["tolerance_eV"] == 1e-3
    assert card["dropped_by_rule"] == {
        "constraints_undetermined": 1,
        "duplicate": 1,
        "energy_missing": 1,
        "multi_adsorbate": 1,
        "stoichiometry_mismatch": 2,
    }
    reasons = {d["cathub_id"]: d["reason"] for d in card["dropped"]}
    assert "by 0.05 eV (tolerance 0.001)" in reasons["Ni111_CO~mismatch"]
    assert "energyCorrection {'COgas': 0.2} not used" in reasons["Pt111_CO~energy_correction"]
    assert card["notes"]["adslab_coefficient_set_to_1"] == [{"reaction_id": "Pt12_0.5O2(g) + * -> O*_1", "was": 2.0}]
    assert card["notes"]["constraint_source"] == {"deposited": 13, "geometry_inferred": 1}
    # within CatBench's 1e-3 eV but outside crucible's former 1e-4 eV: kept
    assert card["energy_check"]["worst_abs_difference_eV"] == pytest.approx(5e-4, abs=1e-9)
    table = load_reactions(tmp_path / "r.parquet", tmp_path / "s.db")
    assert {r.cathub_id for r in table} == {r.cathub_id for r in reactions}
    assert all(list(s.atoms.pbc) == [True] * 3 for r in table for s in r.structures)


def test_strict_filtering_refuses_and_names_every_problem(catalysis_demo, tmp_path):
    raw = catalysis_demo / "emt-demo-filters_cathub.json"
    with pytest.raises(DataValidationError) as err:
        read_cathub_raw(raw, filtering="strict")
    text = str(err.value)
    assert "7 reaction(s) cannot be used as they are" in text
    rows = [int(line.split("raw_reactions[")[1].split("]")[0]) for line in text.splitlines()[1:]]
    # within 1e-3 eV, the adslab-coefficient case, the mismatch, multi-adsorbate, the extra
    # system, the undeterminable constraints, the duplicate; the energyCorrection case passes
    assert rows == [9, 10, 11, 13, 14, 16, 17]
    assert "reactionSystems ['N2gas'] are not among the reactants/products" in text
    # the plain demo passes strict filtering, with crucible's former tolerance and energyCorrection
    plain = read_cathub_raw(catalysis_demo / "emt-demo_cathub.json", filtering="strict")
    assert len(plain) == 9 and plain.dropped == []
    # within 1e-3 but not 1e-4 eV: CatBench keeps it, strict does not
    doc = json.loads(raw.read_text())
    one = {"raw_reactions": [n for n in doc["raw_reactions"] if n["id"] == "Cu111_H~within_tolerance"]}
    (tmp_path / "one.json").write_text(json.dumps(one))
    assert len(read_cathub_raw(tmp_path / "one.json")) == 1
    with pytest.raises(DataValidationError, match="tolerance 0.0001"):
        read_cathub_raw(tmp_path / "one.json", filtering="strict")


def test_energy_correction_is_added_only_when_strict(catalysis_demo, tmp_path):
    doc = json.loads((catalysis_demo / "emt-demo-filters_cathub.json").read_text())
    one = {"raw_reactions": [n for n in doc["raw_reactions"] if n["id"] == "Pt111_CO~energy_correction"]}
    (tmp_path / "one.json").write_text(json.dumps(one))
    assert [d["rule"] for d in read_cathub_raw(tmp_path / "one.json").dropped] == ["stoichiometry_mismatch"]
    (r,) = read_cathub_raw(tmp_path / "one.json", filtering="strict")
    gas = r.by_role("gas")[0]
    plain = json.loads((catalysis_demo / "emt-demo_cathub.json").read_text())["raw_reactions"]
    co = next(s for n in plain if n["id"] == "Pt111_CO" for s in n["reactionSystems"] if s["name"] == "COgas")
    assert gas.dft_energy == pytest.approx(co["systems"]["energy"] + 0.2)


def test_fixed_atoms_inferred_from_geometry_as_catbench_infers_them(catalysis_demo):
    (r,) = [
        x
        for x in read_cathub_raw(catalysis_demo / "emt-demo-filters_cathub.json")
        if x.cathub_id == "Pt111_H~no_constraints"
    ]
    deposited = next(x for x in read_cathub_raw(catalysis_demo / "emt-demo_cathub.json") if x.cathub_id == "Pt111_H")
    inferred = [sorted(i for c in s.atoms.constraints for i in c.get_indices()) for s in r.structures[:2]]
    given = [sorted(i for c in s.atoms.constraints for i in c.get_indices()) for s in deposited.structures[:2]]
    # the bottom layer was held fixed, so it is found; atoms the adsorbate did not move may join it
    assert set(given[0]) <= set(inferred[0]) and set(given[1]) <= set(inferred[1])
    assert r.constraint_source == "geometry_inferred"


def test_cli_clean_lists_drops_and_strict_refuses(catalysis_demo, tmp_path, capsys):
    from crucible.cli import main

    raw = str(catalysis_demo / "emt-demo-filters_cathub.json")

    def run_clean(out, *extra):
        outputs = ["--out", str(out / "r.parquet"), "--out-db", str(out / "s.db"), "--out-card", str(out / "card.json")]
        return main(["catalysis", "clean", "--format", "cathub-raw", "--input", raw, *outputs, *extra])

    assert run_clean(tmp_path / "a", "--out-catbench", str(tmp_path / "a" / "x_adsorption.json")) == 0
    card = json.loads((tmp_path / "a" / "card.json").read_text())
    assert card["n_dropped"] == 6 and len(card["source"]["md5"]) == 32
    assert len(read_catbench_json(tmp_path / "a" / "x_adsorption.json")) == 14
    assert run_clean(tmp_path / "b", "--filtering", "strict") == 2
    assert "7 reaction(s) cannot be used as they are" in capsys.readouterr().err
    assert not (tmp_path / "b" / "r.parquet").exists()
