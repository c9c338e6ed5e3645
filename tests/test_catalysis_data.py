"""Readers of every format on the EMT demo fixtures, read-only user trees, clean + card."""

from __future__ import annotations

import json
import os
import shutil
import stat

import pytest

from crucible.catalysis import data, demo
from crucible.errors import DataValidationError


def _summary(reactions):
    return {
        r.reaction_id.removesuffix("_site_0"): (
            r.adsorbate,
            round(r.dft_ads_eng, 6),
            r.adsorbate_indices,
            [(s.key, s.role, s.stoi, round(s.dft_energy, 6), len(s.atoms)) for s in r.structures],
        )
        for r in reactions
    }


def test_three_formats_give_the_same_reactions(catalysis_demo):
    a = data.read_catbench_json(catalysis_demo / "emt-demo_adsorption.json")
    c = data.read_cathub_raw(catalysis_demo / "emt-demo_cathub.json")
    v = data.read_vasp_tree(catalysis_demo / "emt-demo_vasp", demo.COEFFICIENTS)
    assert len(a) == 9
    assert _summary(a) == _summary(c) == _summary(v)
    h = next(r for r in a if r.reaction_id == "Cu111_H")
    assert [s.key for s in h.structures] == ["star", "Hstar", "H2gas"]
    assert h.adsorbate_indices == [12]
    # E_ads = Σ stoi·E: slab −1, adslab +1, H2 −1/2
    assert h.dft_ads_eng == pytest.approx(
        h.structures[1].dft_energy - h.structures[0].dft_energy - 0.5 * h.structures[2].dft_energy
    )


def test_fixed_atoms_survive_every_format(catalysis_demo):
    for reactions in (
        data.read_catbench_json(catalysis_demo / "emt-demo_adsorption.json"),
        data.read_cathub_raw(catalysis_demo / "emt-demo_cathub.json"),
        data.read_vasp_tree(catalysis_demo / "emt-demo_vasp", demo.COEFFICIENTS),
    ):
        slab = reactions[0].structures[0].atoms
        fixed = sorted(i for c in slab.constraints for i in c.get_indices())
        assert fixed == [0, 1, 2, 3], reactions[0].reaction_id  # the bottom layer, from Selective Dynamics in VASP


def test_hand_vector_adsorption_energy():
    from ase import Atoms

    # by hand, CatBench's E_ads = Σ stoi·E: adslab −3.0, slab −1.0, H2 −6.8 → +1.4 eV
    s = [
        data.Structure("star", "slab", -1, -1.0, Atoms("H")),
        data.Structure("Hstar", "adslab", 1, -3.0, Atoms("H2")),
        data.Structure("H2gas", "gas", -0.5, -6.8, Atoms("H2")),
    ]
    assert data.Reaction("r", "H", "x", 1.4, 1.4, s).energy_sum() == pytest.approx(1.4)


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
        reactions = data.read_vasp_tree(tree, demo.COEFFICIENTS)
        out = tmp_path / "out"
        data.clean(
            reactions,
            out / "r.parquet",
            out / "s.db",
            out / "card.json",
            source={"format": "vasp-tree", "path": str(tree), "sha256": data.tree_sha256(tree)},
        )
        assert _snapshot(tree) == before
        assert sorted(os.listdir(tree)) == sorted(os.listdir(catalysis_demo / "emt-demo_vasp"))
    finally:
        for root, _dirs, _files in os.walk(tree):
            os.chmod(root, stat.S_IRWXU)


def test_clean_writes_table_db_card_and_roundtrips(catalysis_demo, tmp_path):
    reactions = data.read_catbench_json(catalysis_demo / "emt-demo_adsorption.json")
    card = data.clean(
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
    back = data.load_reactions(tmp_path / "r.parquet", tmp_path / "s.db")
    assert _summary(back) == _summary(reactions)
    assert [str(c) for c in back[0].structures[0].atoms.constraints] == [
        str(c) for c in reactions[0].structures[0].atoms.constraints
    ]


def test_stated_energy_mismatch_fails_naming_the_reaction(catalysis_demo, tmp_path):
    doc = json.loads((catalysis_demo / "emt-demo_adsorption.json").read_text())
    doc["Pt111_O"]["ref_ads_eng"] += 0.05
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    reactions = data.read_catbench_json(bad)
    with pytest.raises(DataValidationError, match="Pt111_O.*0.05"):
        data.clean(reactions, tmp_path / "r.parquet", tmp_path / "s.db", tmp_path / "c.json", source={"path": str(bad)})
    assert not (tmp_path / "r.parquet").exists()
    data.clean(reactions, tmp_path / "r.parquet", tmp_path / "s.db", tmp_path / "c.json", source={}, tolerance=0.1)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["Cu111_H"].pop("ref_ads_eng"), "Cu111_H.*ref_ads_eng"),
        (lambda d: d["Cu111_H"]["raw"]["star"].pop("atoms_json"), "Cu111_H.*'star'.*atoms_json"),
        (lambda d: d["Cu111_H"]["raw"].update({"weird": d["Cu111_H"]["raw"]["star"]}), "weird"),
        (lambda d: d["Cu111_H"]["raw"]["H2gas"].update(energy_ref="nan"), "H2gas.energy_ref"),
    ],
)
def test_bad_catbench_json_names_reaction_and_field(catalysis_demo, tmp_path, mutate, message):
    doc = json.loads((catalysis_demo / "emt-demo_adsorption.json").read_text())
    mutate(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(DataValidationError, match=message):
        data.read_catbench_json(bad)


def test_vasp_tree_errors(catalysis_demo, tmp_path):
    tree = tmp_path / "t"
    shutil.copytree(catalysis_demo / "emt-demo_vasp", tree)
    with pytest.raises(DataValidationError, match="'CO' has no entry in coefficients"):
        data.read_vasp_tree(tree, {k: v for k, v in demo.COEFFICIENTS.items() if k != "CO"})
    with pytest.raises(DataValidationError, match="must end with 'gas'"):
        data.read_vasp_tree(tree, {**demo.COEFFICIENTS, "H": {"slab": -1, "adslab": 1, "H2": -0.5}})
    (tree / "Cu111" / "O" / "site_0" / "OSZICAR").write_text("nothing\n")
    with pytest.raises(DataValidationError, match="Cu111/O/site_0/OSZICAR: no line with 'E0='"):
        data.read_vasp_tree(tree, demo.COEFFICIENTS)


def test_gzipped_catbench_json(catalysis_demo, tmp_path):
    import gzip

    gz = tmp_path / "x_adsorption.json.gz"
    gz.write_bytes(gzip.compress((catalysis_demo / "emt-demo_adsorption.json").read_bytes()))
    assert len(data.read_catbench_json(gz)) == 9
