"""Baselines: oracle reaches 1, random's exact expectation, leave-one-substrate-out for real."""

from __future__ import annotations

import numpy as np
import pytest

from crucible.core.errors import ConfigError
from crucible.reactions import baselines, scoring

from helpers import clean_reaction_table, reaction_questions


def test_oracle_scores_one_everywhere():
    df, card = clean_reaction_table("deoxyfluorination")
    sets, _ = reaction_questions("deoxyfluorination")
    model = baselines.make_model("oracle").fit(df, card)
    for qtype, qs in sets.items():
        s = scoring.score_questions(qs, model.predict(qs))["summary"]
        assert s["avg_relative_score"] == 1.0, qtype
        assert s["num_invalid"] == 0


def test_random_expectation_is_exact():
    sets, _ = reaction_questions("deoxyfluorination")
    q = sets["all_varying"][0]
    exp = scoring.expected_random(q)
    assert exp["avg_relative_score"] == pytest.approx(np.mean(q["meta"]["option_relative_scores"]))
    assert exp["exact_match_accuracy"] == pytest.approx(len(q["answer"]) / len(q["options"]))
    # The seeded draws over many seeds converge to it.
    draws = [
        q["meta"]["option_relative_scores"][baselines.RandomChoice(random_state=s).predict([q])[q["id"]]]
        for s in range(3000)
    ]
    assert np.mean(draws) == pytest.approx(exp["avg_relative_score"], abs=0.03)
    fb = sets["all_blank"][0]
    assert scoring.expected_random(fb)["hit_rate"] == 1.0  # full factorial: every combination was run


def test_random_gives_a_question_and_its_control_the_same_draw():
    sets, _ = reaction_questions("deoxyfluorination")
    model = baselines.RandomChoice(random_state=0)
    a = model.predict(sets["all_varying_reference"])
    b = model.predict(sets["all_varying_reference_control"])
    assert list(a.values()) == list(b.values())


@pytest.mark.parametrize("name", ["popularity", "nearest-substrate", "yield-model"])
def test_the_asked_substrate_is_never_seen(name):
    df, card = clean_reaction_table("deoxyfluorination")
    sets, _ = reaction_questions("deoxyfluorination")
    asked = "S05"
    qs = [q for q in sets["all_varying"] + sets["all_blank"] if q["meta"]["substrate"] == asked]
    params = {"max_iter": 20} if name == "yield-model" else {}
    before = baselines.make_model(name, params).fit(df, card).predict(qs)
    # Scramble the asked substrate's own results: a leave-one-out model cannot notice.
    scrambled = df.copy()
    mask = scrambled["substrate"] == asked
    scrambled.loc[mask, "yield"] = np.random.default_rng(0).permutation(scrambled.loc[mask, "yield"].to_numpy())
    after = baselines.make_model(name, params).fit(scrambled, card).predict(qs)
    assert before == after


def test_nearest_substrate_is_another_substrate_and_the_most_similar():
    df, card = clean_reaction_table("deoxyfluorination")
    model = baselines.make_model("nearest-substrate").fit(df, card)
    fps = baselines.morgan_fingerprints([card["substrate_smiles"][s] for s in model.substrates_])
    for i, s in enumerate(model.substrates_):
        near = model.nearest_[s]
        assert near != s
        j = model.substrates_.index(near)
        best = max(baselines.tanimoto(fps[i], fps[k]) for k in range(len(fps)) if k != i)
        assert baselines.tanimoto(fps[i], fps[j]) == best


def test_learned_baselines_beat_random_on_a_real_table():
    df, card = clean_reaction_table("deoxyfluorination")
    sets, _ = reaction_questions("deoxyfluorination")
    qs = sets["all_varying"]
    rnd = np.mean([scoring.expected_random(q)["avg_relative_score"] for q in qs])
    pop = scoring.score_questions(qs, baselines.make_model("popularity").fit(df, card).predict(qs))["summary"]
    assert pop["avg_relative_score"] > rnd + 0.1


def test_single_substrate_table_refuses_leave_one_out_models():
    df, card = clean_reaction_table("direct-arylation")
    with pytest.raises(ConfigError, match="has one"):
        baselines.make_model("popularity").fit(df, card)
    with pytest.raises(ConfigError, match="unknown reaction baseline"):
        baselines.make_model("gpt-4")


def test_baselines_follow_the_estimator_protocol():
    from sklearn.base import clone

    assert baselines.make_model("random").get_params() == {"random_state": 0}
    assert baselines.make_model("yield-model", {"max_iter": 20}).get_params() == {
        "fp_bits": 128,
        "learning_rate": 0.1,
        "max_iter": 20,
        "random_state": 0,
    }
    assert baselines.make_model("popularity").get_params() == {}
    model = baselines.make_model("random", {"random_state": 7})
    copy = clone(model)
    assert copy is not model and copy.get_params() == {"random_state": 7}
    assert repr(copy) == "RandomChoice(random_state=7)"
    with pytest.raises(ConfigError, match="'random': unknown parameter\\(s\\) seed; known: random_state"):
        baselines.make_model("random", {"seed": 1})


def test_random_state_decides_the_draws_and_refits_forget_the_last_table():
    df, card = clean_reaction_table("deoxyfluorination")
    sets, _ = reaction_questions("deoxyfluorination")
    qs = sets["all_varying"]
    draws = {s: baselines.make_model("random", {"random_state": s}).predict(qs) for s in (0, 1)}
    assert draws[0] == baselines.make_model("random").predict(qs) != draws[1]
    changed = df.assign(**{"yield": np.random.default_rng(0).permutation(df["yield"].to_numpy())})
    model = baselines.make_model("nearest-substrate").fit(df, card)
    first = model.predict(qs)
    refit = model.fit(changed, card).predict(qs)
    # a refit answers as a fresh model on the new table (no lookup kept from the first fit)
    assert refit == baselines.make_model("nearest-substrate").fit(changed, card).predict(qs) != first
