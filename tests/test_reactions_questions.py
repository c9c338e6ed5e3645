"""Question builders on real tables: every score recomputed independently, references never the
best, legal combinations exactly the real rows, determinism."""

from __future__ import annotations

import json

import numpy as np
import pytest

from crucible.reactions import question_table
from crucible.reactions import questions as qb
from crucible.reactions.scoring import MC_TYPES

from helpers import clean_reaction_table, reaction_questions

DATASETS = ["buchwald-hartwig", "thiol-addition", "deoxyfluorination"]


def _effective(row) -> float:
    # Written out again from the seed's formula, not imported from the scorer.
    y = 100.0 if np.isnan(row["yield"]) else row["yield"]
    ee = 1.0 if np.isnan(row["ee"]) else (100 + row["ee"]) / 200
    dr = 1.0 if np.isnan(row["dr"]) else row["dr"] / (row["dr"] + 1)
    return y * ee * dr


def _ident(item):
    return item["SMILES"] or item["content"]


@pytest.mark.parametrize("dataset", DATASETS)
def test_every_option_score_recomputed_from_the_table(dataset):
    df, card = clean_reaction_table(dataset)
    sets, _ = reaction_questions(dataset)
    records = df.to_dict("records")
    n = 0
    for qtype in MC_TYPES:
        for q in sets[qtype]:
            rows = [records[e["row_index"]] for e in q["meta"]["option_source_entries"]]
            eff = [_effective(r) for r in rows]
            best = max(eff)
            assert q["meta"]["effective_scores"] == pytest.approx(eff, rel=1e-12)
            assert q["meta"]["option_relative_scores"] == pytest.approx([e / best for e in eff], rel=1e-12)
            assert q["answer"] == [i for i, e in enumerate(eff) if e == best]
            for r, opt in zip(rows, q["options"]):
                assert r["substrate"] == q["meta"]["substrate"]
                for key, items in opt.items():  # the option text is the row's own condition
                    assert _ident(items[0]) == r[key]
                for key, items in q["input"]["constant_conditions"].items():
                    if key in card["condition_keys"]:
                        assert _ident(items[0]) == r[key]  # single_varying: one real fixed group
            assert len(q["options"]) <= 8 and len(set(map(json.dumps, q["options"]))) == len(q["options"])
            n += 1
    assert n > 100


@pytest.mark.parametrize("dataset", DATASETS)
def test_references_are_real_low_to_mid_rows_never_the_best_never_an_option(dataset):
    df, _ = clean_reaction_table(dataset)
    sets, _ = reaction_questions(dataset)
    eff = np.array([_effective(r) for r in df.to_dict("records")])
    for qtype in ("single_varying_reference", "all_varying_reference", "all_blank_reference"):
        assert sets[qtype]
        for q in sets[qtype]:
            refs = q["input"]["reference_conditions"]
            assert 2 <= len(refs) <= 5
            sub = np.flatnonzero((df["substrate"] == q["meta"]["substrate"]).to_numpy())
            options = {e["row_index"] for e in q["meta"].get("option_source_entries", [])}
            for ref in refs:
                r = ref["row_index"]
                assert df.at[r, "substrate"] == q["meta"]["substrate"] and r not in options
                assert eff[r] < q["meta"]["best_effective_score"]
                assert eff[r] < eff[sub].max()
                assert eff[r] <= np.quantile(eff[sub], 0.6) + 1e-9
                assert {k: _ident(v[0]) for k, v in ref["conditions"].items()} == {
                    k: df.at[r, k] for k in ref["conditions"]
                }


def test_reference_and_control_are_the_same_question():
    sets, _ = reaction_questions("deoxyfluorination")
    for ref, ctl in (
        ("single_varying_reference", "single_varying_reference_control"),
        ("all_varying_reference", "all_varying_reference_control"),
    ):
        assert [q["meta"]["pair_id"] for q in sets[ref]] == [q["meta"]["pair_id"] for q in sets[ctl]]
        for a, b in zip(sets[ref], sets[ctl]):
            assert a["options"] == b["options"] and a["answer"] == b["answer"]
            assert "reference_conditions" not in b["input"]
    base = {q["id"]: q for q in sets["all_varying"]}
    for q in sets["cross_substrate_reference"]:
        assert q["options"] == base[q["meta"]["pair_id"]]["options"]
        assert all(r["substrate"] != q["meta"]["substrate"] for r in q["input"]["reference_conditions"])


@pytest.mark.parametrize("dataset", DATASETS)
def test_legal_combinations_are_exactly_the_real_rows(dataset):
    df, card = clean_reaction_table(dataset)
    sets, _ = reaction_questions(dataset)
    keys = card["condition_keys"]
    for q in sets["all_blank"] + sets["all_blank_reference"]:
        cands = q["input"]["candidate_values"]
        legal = {tuple(_ident(cands[k][c["combination"][k]]) for k in keys) for c in q["meta"]["legal_combinations"]}
        sub = df[df["substrate"] == q["meta"]["substrate"]]
        real = {tuple(r) for r in sub[keys].itertuples(index=False, name=None)}
        refs = {tuple(_ident(r["conditions"][k][0]) for k in keys) for r in q["input"].get("reference_conditions", [])}
        assert legal == real - refs and len(legal) == len(q["meta"]["legal_combinations"])
        rel = [c["relative_score"] for c in q["meta"]["legal_combinations"]]
        assert max(rel) == 1.0


def test_single_varying_fixes_the_group_covering_most_values():
    df, card = clean_reaction_table("buchwald-hartwig")
    sets, _ = reaction_questions("buchwald-hartwig")
    for q in sets["single_varying"]:
        key = q["varying_keys"][0]
        fixed = q["meta"]["selection_info"]["fixed_conditions"]
        sub = df[df["substrate"] == q["meta"]["substrate"]]
        others = [k for k in card["condition_keys"] if k != key]
        coverage = sub.groupby(others)[key].nunique()
        assert coverage[tuple(fixed[k] for k in others)] == coverage.max()


def test_two_builds_are_byte_identical_and_the_seed_matters():
    df, card = clean_reaction_table("deoxyfluorination")
    a, _ = qb.build_all(df, card)
    b, _ = qb.build_all(df.copy(), dict(card))
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    c, _ = qb.build_all(df, card, {"seed": 1})
    assert json.dumps(a["all_varying"], sort_keys=True) != json.dumps(c["all_varying"], sort_keys=True)


def test_questions_with_nothing_to_win_are_left_out_and_counted():
    sets, summary = reaction_questions("cernak")
    assert summary["substrates_with_best_effective_0"] == ["S04", "S12", "S13", "S14"]
    assert summary["questions"]["all_varying"] == 16 - 4


def test_max_per_type_keeps_the_first_pairs_of_every_type_for_a_small_run():
    from crucible.reactions import questions
    from crucible.reactions.scoring import PAIRS

    from helpers import clean_reaction_table

    df, card = clean_reaction_table("deoxyfluorination")
    full, _ = questions.build_all(df, card)
    small, summary = questions.build_all(df, card, {"max_per_type": 3})
    assert summary["params"]["max_per_type"] == 3
    for qtype, qs in small.items():
        assert 0 < len(qs) <= 3 and len(qs) == min(3, len(full[qtype])), qtype
        assert all(q in full[qtype] for q in qs), "the same questions, only fewer"
        assert summary["questions"][qtype] == len(qs)
    for with_ref, control in PAIRS:
        pair_ids = [{q["meta"].get("pair_id", q["id"]) for q in small[t]} for t in (with_ref, control)]
        assert pair_ids[0] == pair_ids[1], f"{with_ref} and {control} keep the same pairs"
    assert questions.build_all(df, card)[0] == full, "no limit: every question"


def test_questions_of_fewer_than_two_options_are_not_built_and_counted(tmp_path):
    """One condition per substrate built one-option questions that every model answered at 1.0,
    without a word; a substrate of three rows still gets its questions."""
    from crucible.reactions import data

    csv = tmp_path / "one.csv"
    rows = ["c1ccccc1Br,CP(C)C,40", "c1ccccc1I,CCP(CC)CC,60"]
    rows += [f"c1ccc(Cl)cc1Br,{lig},{y}" for lig, y in (("CP(C)C", 10), ("CCP(CC)CC", 50), ("CCCP(CCC)CCC", 30))]
    csv.write_text("sub,lig,y\n" + "\n".join(rows) + "\n")
    cfg = {
        "csv": str(csv),
        "substrate_columns": ["sub"],
        "yield_column": "y",
        "conditions": [{"key": "ligand", "column": "lig"}],
    }
    df, card = data.clean_table(data.dataset_spec("one", {"one": cfg}), csv)
    sets, summary = qb.build_all(df, card)
    for qtype, questions in sets.items():
        for q in questions:
            n = len(q["options"]) if "options" in q else len(q["meta"]["legal_combinations"])
            assert n >= 2, (qtype, q["id"], n)
    assert [q["meta"]["substrate"] for q in sets["all_varying"]] == [df.loc[df["yield"] == 50, "substrate"].item()]
    assert summary["questions"]["all_varying"] == summary["questions"]["all_blank"] == 1
    left = summary["left_out"]
    for qtype in (
        "all_varying",
        "single_varying",
        "all_blank",
        "all_varying_reference_control",
        "cross_substrate_reference",
    ):
        assert left[qtype][question_table.FEWER_THAN_TWO] == 2, qtype
    # three rows leave no low-to-mid reference outside the options: counted, not silent
    assert left["all_varying_reference"] == {question_table.FEWER_THAN_TWO: 2, question_table.FEW_REFERENCES: 1}
