"""The leakage and duplicate audit on real crystals (the perov-5 slice of the CDVAE sets in
tests/data) with planted duplicates, polymorphs and a capped group; duplicate clusters agree with
pymatgen's own ``StructureMatcher.group_structures`` under the same convention."""

from __future__ import annotations

import pandas as pd
import pytest

from crucible.crystal import audit, data, items
from crucible.crystal.scoring import CONVENTIONS

from helpers import REPO, slice_sources

PEROV = REPO / "tests" / "data" / "cdvae" / "perov_5"


def _rewritten(structure):
    """The same crystal written differently: sites reversed, origin shifted, a 1x2x1 cell."""
    from pymatgen.core import Structure

    moved = Structure(
        structure.lattice, structure.species[::-1], (structure.frac_coords[::-1] + [0.31, 0.17, 0.53]) % 1.0
    )
    moved.make_supercell([1, 2, 1])
    return moved


def _sheared(structure, degrees: float):
    from pymatgen.core import Lattice, Structure

    a, b, c, al, be, ga = structure.lattice.parameters
    return Structure(Lattice.from_parameters(a, b, c, al + degrees, be, ga), structure.species, structure.frac_coords)


@pytest.fixture(scope="module")
def planted():
    """The real slice (40 train, 20 test, all distinct) with known traps added:
    train: a rewritten copy of train[1] (a duplicate inside train);
    test: a rewritten copy of train[0] (leak), a rewritten copy of test[0] (duplicate inside test),
    a sheared train[2] (same formula, another structure: a polymorph of a training crystal)."""
    splits = data.load_splits(
        "cdvae", [str(PEROV / "train.csv"), str(PEROV / "test.csv")], dataset="perov-5", sources=slice_sources()
    )
    train, test = list(splits["train"]), list(splits["test"])
    train.append(("zz-train-dup", _rewritten(train[1][1])))
    test += [
        ("zz-leak", _rewritten(train[0][1])),
        ("zz-test-dup", _rewritten(test[0][1])),
        ("zz-polymorph", _sheared(train[2][1], 25)),
    ]
    return {"train": train, "test": test}, train[0][0], train[1][0], train[2][0], test[0][0]


def test_counts_find_exactly_the_planted_traps(planted):
    splits, leaked_from, dup_of, poly_of, test_dup_of = planted
    table, counts = audit.audit_splits(splits)
    tr, te = counts["splits"]["train"], counts["splits"]["test"]
    assert (tr["items"], tr["distinct_structures"], tr["duplicates_within"]) == (41, 40, 1)
    assert (te["items"], te["distinct_structures"], te["duplicates_within"]) == (23, 22, 1)
    assert counts["test_duplicate_in_train"] == 1
    assert counts["test_formula_in_train"] == 2 and counts["test_polymorph_in_train"] == 1
    # one per test cluster (22), minus the cluster that is in train
    assert counts["deduplicated_test_items"] == 21
    dedup = set(counts["deduplicated_test_ids"])
    assert "zz-leak" not in dedup and "zz-test-dup" not in dedup and test_dup_of in dedup and "zz-polymorph" in dedup
    rows = table.set_index(["split", "id"])
    assert rows.loc[("train", "zz-train-dup"), "cluster"] == f"train:{dup_of}"
    assert rows.loc[("test", "zz-leak"), "duplicate_in_train"]
    assert not rows.loc[("test", "zz-polymorph"), "duplicate_in_train"]
    assert rows.loc[("test", "zz-polymorph"), "formula_in_train"]
    assert counts["groups_capped"] == 0 and counts["unchecked"] == 0 and counts["timeouts"] == 0


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
def test_clusters_agree_with_pymatgen_group_structures(planted, convention):
    """Peer agreement: within each split, our clusters are pymatgen's groups (same tolerances)."""
    from pymatgen.analysis.structure_matcher import StructureMatcher

    splits = planted[0]
    table, _ = audit.audit_splits(splits, convention=convention)
    for split, rows in splits.items():
        groups = StructureMatcher(**CONVENTIONS[convention]).group_structures([st for _, st in rows])
        ids = {id(st): i for i, st in rows}
        theirs = sorted(sorted(ids[id(st)] for st in g) for g in groups)
        mine = table[table["split"] == split].groupby("cluster")["id"].apply(sorted).tolist()
        assert sorted(mine) == theirs, (split, convention)


def test_the_cap_leaves_structures_unchecked_and_says_so(planted):
    """Four crystals of one formula in one split and a cap of one comparison: three cannot be
    compared with every cluster, are counted unchecked, and the group is reported capped."""
    splits = planted[0]
    base = splits["train"][3][1]
    one_formula = {"train": [(f"c{j}", _rewritten(base) if j % 2 else base.copy()) for j in range(4)], "test": []}
    _, full = audit.audit_splits(one_formula)
    assert full["splits"]["train"]["distinct_structures"] == 1
    _, capped = audit.audit_splits(one_formula, max_comparisons=1)
    assert capped["groups_capped"] == 1 and capped["unchecked"] == 2
    assert capped["splits"]["train"]["distinct_structures"] == 3  # a lower bound on duplicates: 1 of 3 found


def test_prompt_counts_per_template(planted):
    """Distinct prompts: perov-5 formulas differ, so composition-v1 tells every distinct formula
    apart; the planted duplicates share a prompt with their originals."""
    splits = planted[0]
    templates = items.load_templates(REPO / "config" / "crystal_prompts.yaml")
    counts = audit.prompt_counts("perov-5", splits["test"], templates)
    assert set(counts) == set(templates)
    c = counts["composition-v1"]
    formulas = {st.composition.reduced_formula for _, st in splits["test"]}
    # the test duplicate is written in a 1x2x1 cell: another site count, another prompt
    assert c["items"] == 23 and c["distinct_prompts"] == len(formulas) + 1


def _write_rows(path, rows):
    """A CDVAE-layout CSV (material_id, cif) of (id, Structure) rows."""
    pd.DataFrame({"material_id": [i for i, _ in rows], "cif": [st.to(fmt="cif") for _, st in rows]}).to_csv(
        path, index=False
    )
    return path


def test_a_cdvae_set_with_its_validation_split_read_through_its_pins(tmp_path):
    """run_audit on train/val/test CSVs (the real slice: 30 train, 10 of its rows as val, 20 test),
    each read through its role's pin: a val crystal that is also in train and a test crystal that
    is also in val are found, the tables are written, and a file edited after its pin stops."""
    import json

    from crucible.errors import CrucibleError

    splits = data.load_splits(
        "cdvae", [str(PEROV / "train.csv"), str(PEROV / "test.csv")], dataset="perov-5", sources=slice_sources()
    )
    train, val, test = splits["train"][:30], splits["train"][30:], list(splits["test"])
    val.append(("zz-val-leak", _rewritten(train[0][1])))
    test.append(("zz-test-in-val", _rewritten(val[0][1])))
    files = {
        s: _write_rows(tmp_path / f"{s}.csv", rows) for s, rows in (("train", train), ("val", val), ("test", test))
    }
    pins = slice_sources(**files)
    out = {k: tmp_path / f"audit.{k}" for k in ("parquet", "json", "csv", "md")}
    summary = audit.run_audit(
        "cdvae",
        "perov-5",
        [str(files[s]) for s in ("train", "val", "test")],
        REPO / "config" / "crystal_prompts.yaml",
        out["parquet"],
        out["json"],
        out["csv"],
        out["md"],
        sources=pins,
    )
    assert {s: c["items"] for s, c in summary["splits"].items()} == {"train": 30, "val": 11, "test": 21}
    assert summary["val_duplicate_in_train"] == 1 and summary["test_duplicate_in_val"] == 1
    assert summary["test_duplicate_in_train"] == 0
    assert "zz-test-in-val" not in summary["deduplicated_test_ids"] and summary["deduplicated_test_items"] == 20
    assert json.loads(out["json"].read_text()) == summary
    md = out["md"].read_text()
    assert (
        "| val structure also in train | val | 1 | 11 | 9.1 |" in md
        and "| test structure also in val | test | 1 | 21 | 4.8 |" in md
    )
    # the share as a percentage; the caption gives every split's size; the CSV keeps full precision
    assert "| check | split | count | out of | share (%) | note |" in md
    assert "The splits of perov-5 (30 train, 11 val, 21 test items" in md
    table = pd.read_csv(out["csv"])
    assert table.loc[table["check"] == "val structure also in train", "percent"].item() == pytest.approx(100 / 11)
    # a crystal set edited after its fetch is refused by its pin, not audited
    files["val"].write_text(files["val"].read_text().replace("zz-val-leak", "zz-edited"))
    with pytest.raises(CrucibleError, match="val"):
        data.load_splits("cdvae", [str(files[s]) for s in ("train", "val", "test")], dataset="perov-5", sources=pins)
