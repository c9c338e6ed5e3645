"""RxnOptBench's metrics (songjhPKU/RxnOptBench, ``common_v6.py`` as its README states them): hand
vectors, invalid predictions, refused files."""

from __future__ import annotations

import json

import pytest

from crucible.core.errors import PredictionFileError
from crucible.reactions import scoring

from helpers import reaction_questions


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"yield_": 80, "ee": 90, "dr": 4}, 60.8),  # §4.3 vector 1
        ({"yield_": 80}, 80.0),  # vector 2: missing ee, dr -> factor 1
        ({"yield_": 50, "ee": 0}, 25.0),  # vector 3
        ({"yield_": 50, "dr": 1}, 25.0),
        ({"yield_": 50, "dr": "1:1"}, 25.0),
        ({"yield_": 60, "dr": "20:1"}, 60 * 20 / 21),
        ({"ee": 90}, 95.0),  # selectivity-only screen: missing yield counts as 100
    ],
)
def test_effective_score_hand_vectors(kwargs, expected):
    assert scoring.effective_score(**kwargs) == pytest.approx(expected)


def test_relative_score_hand_vectors():
    assert scoring.relative_score(60.8, 76.0) == pytest.approx(0.8)  # vector 4
    assert scoring.relative_score(76.0, 76.0) == 1.0


def _mc(qid, rel, yields, answer):
    return {
        "id": qid,
        "question_type": "all_varying",
        "options": [{}] * len(rel),
        "answer": answer,
        "meta": {"option_relative_scores": rel, "yields": yields, "best_yield": max(yields)},
    }


QUESTIONS = [
    _mc("q0", [1.0, 0.5, 0.0], [80, 40, 0], [0]),
    _mc("q1", [0.25, 1.0], [20, 80], [1]),
    _mc("q2", [1.0, 1.0], [50, 50], [0, 1]),
    _mc("q3", [0.1, 1.0], [5, 50], [1]),
]


def test_multiple_choice_metrics_and_invalid_predictions_counted_not_crashed():
    preds = {"q0": 1, "q1": 1, "q2": "1", "other": 0}  # q2: not an integer, q3 missing
    res = scoring.score_multiple_choice(QUESTIONS, preds)
    s = res["summary"]
    assert s["num_questions"] == 4 and s["num_invalid"] == 2 and s["num_valid"] == 2
    assert s["avg_relative_score"] == pytest.approx((0.5 + 1.0 + 0 + 0) / 4)
    assert s["exact_match_accuracy"] == pytest.approx(1 / 4)
    assert s["avg_yield_ratio"] == pytest.approx((40 / 80 + 80 / 80) / 2)
    assert {i["id"] for i in res["invalid"]} == {"q2", "q3"}
    assert res["unknown_ids"] == ["other"]


@pytest.mark.parametrize("bad", [3, -1, True, 1.5, None, [0]])
def test_out_of_range_and_non_integer_predictions_are_invalid(bad):
    res = scoring.score_multiple_choice(QUESTIONS[:1], {"q0": bad})
    assert res["summary"]["num_invalid"] == 1 and res["summary"]["avg_relative_score"] == 0.0


def _fb(qid, legal):
    return {
        "id": qid,
        "question_type": "all_blank",
        "query_keys": ["a", "b"],
        "input": {"candidate_values": {"a": [{}, {}], "b": [{}, {}, {}]}},
        "meta": {"legal_combinations": [{"combination": {"a": a, "b": b}, "relative_score": r} for a, b, r in legal]},
    }


def test_fill_in_blank_hit_unhit_invalid():
    qs = [
        _fb("f0", [(0, 0, 1.0), (1, 2, 0.4)]),
        _fb("f1", [(0, 1, 0.5), (1, 1, 1.0)]),
        _fb("f2", [(0, 0, 1.0)]),
        _fb("f3", [(0, 0, 1.0)]),
    ]
    preds = {"f0": {"a": 1, "b": 2}, "f1": {"a": 1, "b": 1}, "f2": {"a": 1, "b": 0}, "f3": {"a": 0, "b": 7}}
    res = scoring.score_fill_in_blank(qs, preds)
    s = res["summary"]
    assert (s["num_scored"], s["num_unhit"], s["num_invalid"]) == (2, 1, 1)
    assert s["hit_rate"] == pytest.approx(0.5)
    assert s["avg_relative_score"] == pytest.approx(0.7)  # unhit leaves the denominator
    assert s["best_hit_rate_among_scored"] == pytest.approx(0.5)
    res = scoring.score_fill_in_blank(qs[:1], {"f0": {"a": 0}})
    assert res["summary"]["num_invalid"] == 1 and "missing ['b']" in res["invalid"][0]["reason"]


def test_prediction_file_for_another_dataset_is_refused(tmp_path):
    q_path = tmp_path / "questions.json"
    q_path.write_text(json.dumps(QUESTIONS))
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"suzuki-miyaura:all_varying:S00": 0}))
    with pytest.raises(PredictionFileError, match="another dataset"):
        scoring.score_file(q_path, plain)
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(
        json.dumps({"questions_sha256": "0" * 64, "questions_file": "elsewhere.json", "predictions": {"q0": 0}})
    )
    with pytest.raises(PredictionFileError, match="elsewhere.json"):
        scoring.score_file(q_path, wrapped)
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps({"q0": 0, "q1": 1}))  # RxnOptBench's plain map
    assert scoring.score_file(q_path, ok)["summary"]["num_valid"] == 2


def test_bootstrap_interval_is_deterministic_and_brackets_the_mean():
    values = [0.1, 0.5, 0.9, 1.0, 0.3]
    a, b = scoring.bootstrap_interval(values, seed=3), scoring.bootstrap_interval(values, seed=3)
    assert a == b and a[0] < sum(values) / 5 < a[1]


def test_score_files_with_the_random_baselines_exact_expectation(tmp_path):
    from crucible.core.io import write_json

    q_path = tmp_path / "all_varying" / "questions.json"
    q_path.parent.mkdir()
    write_json(QUESTIONS, q_path)
    p_path = tmp_path / "random.json"
    write_json(scoring.prediction_record("random", q_path, {"q0": 0, "q1": 0, "q2": 1}), p_path)
    rec = scoring.score_prediction_files([q_path], [p_path], "ds", "random")
    assert rec["dataset"] == "ds" and rec["model"] == "random" and list(rec["types"]) == ["all_varying"]
    assert rec["types"]["all_varying"]["summary"]["num_invalid"] == 1  # q3 has no prediction
    expected = rec["expected"]["all_varying"]
    # per question: mean relative score over the options, share of best options, mean yield ratio
    assert expected["avg_relative_score"] == pytest.approx((1.5 / 3 + 1.25 / 2 + 1.0 + 1.1 / 2) / 4)
    assert expected["exact_match_accuracy"] == pytest.approx((1 / 3 + 1 / 2 + 1 + 1 / 2) / 4)
    assert expected["avg_yield_ratio"] == pytest.approx((120 / 80 / 3 + 100 / 80 / 2 + 1.0 + 55 / 50 / 2) / 4)
    # Another model: no expectation; the same predictions score the same.
    other = scoring.score_prediction_files([q_path], [p_path], "ds", "popularity")
    assert other["expected"] == {} and other["types"] == rec["types"]
    with pytest.raises(Exception, match="one prediction file per question file"):
        scoring.score_prediction_files([q_path], [], "ds", "random")


def test_expected_means_skip_questions_where_a_metric_is_undefined():
    qs = [_mc("a", [1.0, 0.0], [0, 0], [0]), _mc("b", [1.0, 0.5], [10, 5], [0])]
    qs[0]["meta"]["best_yield"] = 0  # no yield ratio for a question whose best yield is 0
    means = scoring.expected_random_means(qs)
    assert means["avg_yield_ratio"] == pytest.approx(0.75)  # question b only
    assert means["avg_relative_score"] == pytest.approx((0.5 + 0.75) / 2)
    assert scoring.expected_random_means([]) == {}


def test_a_prediction_file_with_invalid_answers_round_trips(tmp_path):
    from crucible.core.io import write_json

    sets, _ = reaction_questions("deoxyfluorination")
    qs = sets["all_varying"][:2]
    q_path = tmp_path / "q.json"
    write_json(qs, q_path, indent=1)
    preds = {qs[0]["id"]: 1, qs[1]["id"]: scoring.InvalidAnswer("'-3' has a sign")}
    record = scoring.prediction_record("m", q_path, preds)
    assert record["predictions"] == {qs[0]["id"]: 1} and record["invalid"] == {qs[1]["id"]: "'-3' has a sign"}
    write_json(record, tmp_path / "p.json")
    assert scoring.load_predictions(tmp_path / "p.json", qs, scoring.questions_fingerprint(q_path)) == preds
    write_json({**record, "invalid": {qs[0]["id"]: "x"}}, tmp_path / "p.json")
    with pytest.raises(PredictionFileError, match="is both a prediction and invalid"):
        scoring.load_predictions(tmp_path / "p.json", qs)
