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

    from crucible.core.errors import CrucibleError

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


def _moved(structure, displacement):
    """The crystal with its first site moved by ``displacement`` (Cartesian, Å)."""
    from pymatgen.core import Structure

    coords = structure.cart_coords.copy()
    coords[0] += displacement
    return Structure(structure.lattice, structure.species, coords, coords_are_cartesian=True)


@pytest.fixture(scope="module")
def non_transitive():
    """A real perovskite and two moved copies along one direction: ``far`` (first site 2.5 Å
    away) and ``near`` (0.05 Å the other way). far matches near (RMS ~0.35) and near matches the
    original (RMS 0.007), but far does not match the original: train = {far, near} (one cluster,
    far its representative), test = the original."""
    import numpy as np

    splits = data.load_splits(
        "cdvae", [str(PEROV / "train.csv"), str(PEROV / "test.csv")], dataset="perov-5", sources=slice_sources()
    )
    base = splits["train"][0][1]
    u = np.array([1.0, 0.6, 0.3]) / np.linalg.norm([1.0, 0.6, 0.3])
    return {
        "train": [("t1-far", _moved(base, 2.5 * u)), ("t2-near", _moved(base, -0.05 * u))],
        "test": [("x-original", base.copy())],
    }


def test_a_test_crystal_matching_a_non_representative_train_member_is_a_leak(non_transitive):
    """The issue's triple: the representatives-only check called the test crystal new and kept it
    de-duplicated; compared with every train member it is in train."""
    from pymatgen.analysis.structure_matcher import StructureMatcher

    sm = StructureMatcher(**CONVENTIONS["cdvae"])
    (_, far), (_, near) = non_transitive["train"]
    original = non_transitive["test"][0][1]
    assert sm.get_rms_dist(far, near)[0] == pytest.approx(0.35, abs=0.01)
    assert sm.get_rms_dist(original, near)[0] == pytest.approx(0.007, abs=0.001)
    assert sm.get_rms_dist(original, far) is None
    table, counts = audit.audit_splits(non_transitive)
    assert counts["splits"]["train"]["distinct_structures"] == 1  # far and near: one cluster
    assert counts["test_duplicate_in_train"] == 1 and counts["test_polymorph_in_train"] == 0
    assert counts["deduplicated_test_items"] == 0 and counts["deduplicated_test_ids"] == []
    row = table.set_index(["split", "id"]).loc[("test", "x-original")]
    assert row["duplicate_in_train"] and not row["in_deduplicated_test"]


def test_the_cross_split_cap_counts_what_it_left_unchecked(non_transitive):
    """With one comparison per pass the test crystal is compared with far only: not found in train,
    counted unchecked, the group reported capped, and not claimed de-duplicated."""
    _, counts = audit.audit_splits(non_transitive, max_comparisons=1)
    assert counts["test_duplicate_in_train"] == 0
    assert counts["cross_unchecked"]["test in train"] == 1 and counts["groups_capped"] == 1
    assert counts["deduplicated_test_items"] == 0 and counts["deduplicated_unchecked"] == 1


def test_the_deduplicated_set_is_chosen_among_the_scored_items(planted):
    """Scoring only the rewritten copy of test[0] (not test[0], its cluster's representative): the
    copy is de-duplicated (it duplicates nothing scored), where the old choice over the whole
    split intersected with the scored items left it out."""
    splits, *_, test_dup_of = planted
    scored = {"zz-test-dup", "zz-polymorph", "zz-leak"}
    table, counts = audit.audit_splits(splits, scored_test_ids=scored)
    assert counts["deduplicated_test_ids"] == ["zz-polymorph", "zz-test-dup"]
    assert counts["scored_test_items"] == 3
    rows = table.set_index(["split", "id"])
    assert rows.loc[("test", "zz-test-dup"), "cluster"] == f"test:{test_dup_of}"  # still in test[0]'s cluster
    # both scored: the later one duplicates the one kept before it
    _, both = audit.audit_splits(splits, scored_test_ids={test_dup_of, "zz-test-dup"})
    assert both["deduplicated_test_ids"] == [test_dup_of]


def test_process_pool_gives_the_same_audit(planted):
    """Matcher calls and primitive reductions on two processes: the same table and counts, and
    each reduction the pool made equal to the one made in this process."""
    from crucible.crystal.scoring import primitive_sites

    splits = planted[0]
    one_table, one = audit.audit_splits(splits)
    two_table, two = audit.audit_splits(splits, workers=2)
    pd.testing.assert_frame_equal(one_table, two_table)
    assert one == two
    structures = {(s, i): st for s, members in splits.items() for i, st in members}
    reduced = two_table[two_table["primitive_sites"] != 0]
    assert len(reduced) == two["primitive_reductions"] > 0 and two["primitive_reduction_timeouts"] == 0
    for row in reduced.itertuples():
        assert row.primitive_sites == primitive_sites(structures[(row.split, row.id)])


def test_crystals_over_the_site_limit_are_counted_not_dropped_silently(tmp_path, caplog):
    """A 24-site crystal under a limit of 20 is left out, counted per split in the summary and the
    table, logged; under carbon-24's own limit (24) it would stay."""
    splits = data.load_splits(
        "cdvae", [str(PEROV / "train.csv"), str(PEROV / "test.csv")], dataset="perov-5", sources=slice_sources()
    )
    big = splits["test"][0][1].copy()
    big.make_supercell([1, 1, 5])  # 25 sites
    rows = [("big", big)] + list(splits["test"][:5])
    train = _write_rows(tmp_path / "train.csv", splits["train"][:10])
    test = _write_rows(tmp_path / "test.csv", rows)
    pins = slice_sources(train=train, test=test)
    out = {k: tmp_path / f"audit.{k}" for k in ("parquet", "json", "csv", "md")}
    with caplog.at_level("WARNING", logger="crucible.crystal.data"):
        summary = audit.run_audit(
            "cdvae",
            "perov-5",
            [str(train), str(test)],
            REPO / "config" / "crystal_prompts.yaml",
            *out.values(),
            sources=pins,
        )
    assert summary["max_sites"] == 20 and summary["left_out_over_max_sites"] == {"test": 1}
    assert summary["splits"]["test"]["items"] == 5
    assert "1 crystal(s) with more than 20 sites left out (1 test)" in caplog.text
    md = out["md"].read_text()
    assert "| left out: more than 20 sites | test | 1 | 6 |" in md
    assert "1 crystal(s) with more than 20 sites left out (1 test)" in md
    assert data.max_sites_for("carbon-24") == 24 and data.max_sites_for("carbon-24", {"mp-20": 8}) == 24
    assert data.max_sites_for("perov-5", 0) == 0


CARBON = REPO / "tests" / "data" / "cdvae" / "carbon_24"


def test_leaks_agree_with_every_test_train_pair_on_real_carbon():
    """A real carbon-24 slice (tests/data/cdvae/carbon_24: 16 test crystals of upstream test.csv,
    30 of val.csv standing in for train, the cells with 4, 14 and 16 primitive sites): the test
    crystals the audit finds in train are exactly those for which some test x train pair matches
    (pymatgen called directly, every pair); the polymorphs are the rest; no de-duplicated crystal
    matches a train crystal or another kept one. The slice holds leaks a representatives-only
    check misses: test crystals matching a train crystal but no train cluster representative."""
    from pymatgen.analysis.structure_matcher import StructureMatcher

    files = {"train": CARBON / "train.csv", "test": CARBON / "test.csv"}
    splits = data.load_splits(
        "cdvae",
        [str(files["train"]), str(files["test"])],
        dataset="carbon-24",
        sources=slice_sources("carbon-24", **files),
    )
    assert (len(splits["train"]), len(splits["test"])) == (30, 16)
    table, counts = audit.audit_splits(splits)
    sm = StructureMatcher(**CONVENTIONS["cdvae"])
    matches = {(i, j) for i, x in splits["test"] for j, y in splits["train"] if sm.get_rms_dist(x, y) is not None}
    in_train = {i for i, _ in matches}
    rows = table.set_index(["split", "id"])
    assert set(table.loc[(table.split == "test") & table.duplicate_in_train, "id"]) == in_train
    assert counts["test_duplicate_in_train"] == len(in_train) and len(in_train) < 16
    assert counts["test_polymorph_in_train"] == 16 - len(in_train)  # all carbon: every formula is in train
    reps = {j for j, _ in splits["train"] if rows.loc[("train", j), "is_representative"]}
    missed_by_reps = {i for i in in_train if not any((i, j) in matches for j in reps)}
    assert missed_by_reps  # the slice exercises the non-transitive case
    dedup = counts["deduplicated_test_ids"]
    assert dedup and not set(dedup) & in_train
    kept = dict(splits["test"])
    assert all(sm.get_rms_dist(kept[a], kept[b]) is None for a in dedup for b in dedup if a < b)
