"""prompts.jsonl in the shared LLM contract, and the response parser."""

from __future__ import annotations

import json
import re

import pytest

from crucible.core.errors import DataValidationError
from crucible.reactions import prompts, scoring

from helpers import reaction_questions


def test_prompts_follow_the_llm_contract_and_show_what_the_question_holds():
    sets, _ = reaction_questions("deoxyfluorination")
    qs = sets["all_varying_reference"]
    lines = [json.loads(line) for line in prompts.prompts_jsonl(qs).splitlines()]
    assert [r["id"] for r in lines] == sorted(q["id"] for q in qs)
    rec = lines[0]
    assert [m["role"] for m in rec["messages"]] == ["system", "user"]
    q = next(x for x in qs if x["id"] == rec["id"])
    user = rec["messages"][1]["content"]
    assert all(f"  {i}: " in user for i in range(len(q["options"])))
    assert "Results already measured" in user and '{"answer"' in user
    fb = prompts.prompts_jsonl(sets["all_blank"][:1])
    assert "Candidates for base" in fb and "Candidates for reagents" in fb


@pytest.mark.parametrize(
    "text, fill, expected",
    [
        ('Option 3 looks best.\n{"answer": 3}', False, 3),
        ('first {"answer": 1} then I change my mind {"answer": 2}', False, 2),
        ("The answer is 4.", False, 4),
        ('```json\n{"answer": {"base": 1, "reagents": 0}}\n```', True, {"base": 1, "reagents": 0}),
        ("no idea", False, None),
        (None, False, None),
        ("answer: 2", True, None),
    ],
)
def test_parse_conditions_answer(text, fill, expected):
    assert prompts.parse_conditions_answer(text, fill) == expected


def test_llm_responses_go_through_the_same_scorer(tmp_path):
    sets, _ = reaction_questions("deoxyfluorination")
    qs = sets["all_varying"][:3]
    lines = [
        {"id": qs[0]["id"], "response": f'{{"answer": {qs[0]["answer"][0]}}}', "error": None},
        {"id": qs[1]["id"], "response": None, "error": "timeout"},
        {"id": qs[2]["id"], "response": '{"answer": 99}', "error": None},
    ]
    path = tmp_path / "responses.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    preds = prompts.read_predictions_from_responses(path, qs)
    res = scoring.score_multiple_choice(qs, preds)
    assert res["summary"]["num_valid"] == 1 and res["summary"]["num_invalid"] == 2
    assert res["per_question"][0]["relative_score"] == 1.0
    path.write_text(json.dumps({"id": "other:x", "response": "1"}) + "\n")
    with pytest.raises(
        DataValidationError, match=r"responses.jsonl: line 1: id 'other:x' is not a question of this set"
    ):
        prompts.read_predictions_from_responses(path, qs)


def test_a_response_file_line_that_is_not_json_names_the_file_and_line(tmp_path):
    sets, _ = reaction_questions("deoxyfluorination")
    qs = sets["all_varying"][:2]
    path = tmp_path / "responses.jsonl"
    path.write_text(json.dumps({"id": qs[0]["id"], "response": "answer is 1"}) + "\n\n" + '{"id": "x", "resp\n')
    with pytest.raises(DataValidationError, match=r"responses.jsonl: line 3: not valid JSON"):
        prompts.read_predictions_from_responses(path, qs)


def test_parse_cli_writes_a_prediction_file_for_its_question_file(tmp_path):
    from crucible.cli import main
    from crucible.core.io import write_json

    sets, _ = reaction_questions("deoxyfluorination")
    qs = sets["all_varying"][:3]
    q_path = tmp_path / "questions.json"
    write_json(qs, q_path, indent=1)
    r_path = tmp_path / "m.jsonl"
    rows = [{"id": q["id"], "response": f'{{"answer": {q["answer"][0]}}}', "error": None} for q in qs]
    r_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "pred.json"
    argv = ["reactions", "parse", "--model", "m", "--questions", str(q_path), "--responses", str(r_path)]
    assert main([*argv, "--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert rec["predictions"] == {q["id"]: q["answer"][0] for q in qs}
    assert rec["questions_sha256"] == scoring.questions_fingerprint(q_path)
    assert scoring.load_predictions(out, qs, scoring.questions_fingerprint(q_path)) == rec["predictions"]
    r_path.write_text("not json\n")
    assert main([*argv, "--out", str(out)]) == 2  # a clear error, not a traceback


# --- issue 22: strict answers, repeated ids ----------------------------------------------------

EIGHT = {"options": [{}] * 8}


@pytest.mark.parametrize(
    "text, reason",
    [
        # The issue's cases: each used to become a valid option (3, 1, 2, 1, 0).
        ("answer: -3", "'-3' has a sign"),
        ("The answer is -1", "'-1' has a sign"),
        ("Answer: 2.5", "'2.5' is a fraction"),
        ("answer 1e1", "'1e1' has an exponent"),
        ("answer=0x5", "'0x5' is written in another base"),
        ("answer: +2", "'+2' has a sign"),
        ("the answer is 1/2", "'1/2' is a fraction"),
        ("answer: 9", "option 9 is out of range 0..7"),
        ('{"answer": 2.0}', "the answer is 2.0, a number with a fraction or exponent"),
        ('{"answer": 1e1}', "a number with a fraction or exponent"),
        ('{"answer": -1}', "the answer is -1, a negative number"),
        ('{"answer": "2"}', "the answer is a str ('2'), not an integer"),
        ('{"answer": true}', "the answer is true, not an integer"),
        ('{"answer": null}', "the answer is null, not an integer"),
        ('answer: 3 {"answer": 8}', "option 8 is out of range"),  # the JSON object decides
        ("I would pick the second one.", 'no JSON object with an "answer" and no "answer: N" phrase'),
        ("", "empty reply"),
    ],
)
def test_a_malformed_answer_is_invalid_with_its_reason(text, reason):
    answer, why = prompts.read_conditions_answer(text, EIGHT)
    assert answer is None and reason in why


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The answer is 4.", 4),
        ("**Answer:** 2", 2),
        ("Answer – 5, because the base is stronger", 5),
        ("answer is 3!", 3),
        ("answer: 07", 7),
        ('{"answer": -1} on second thought {"answer": 6}', 6),
        ("answer: 2.5 is wrong; the answer is 1", 1),  # the last phrase, as before
    ],
)
def test_an_answer_written_as_an_integer_is_read(text, expected):
    assert prompts.read_conditions_answer(text, EIGHT) == (expected, None)


def test_fill_in_blank_indices_are_integers_too():
    q = {"query_keys": ["base", "solvent"]}
    assert prompts.read_conditions_answer('{"answer": {"base": 1, "solvent": 0}}', q) == (
        {"base": 1, "solvent": 0},
        None,
    )
    assert "the index for 'base' is 1.0" in prompts.read_conditions_answer('{"answer": {"base": 1.0}}', q)[1]
    assert "a negative number" in prompts.read_conditions_answer('{"answer": {"base": -2}}', q)[1]
    assert "not an object" in prompts.read_conditions_answer('{"answer": 3}', q)[1]


def test_invalid_answers_reach_the_score_file_with_their_reason(tmp_path):
    from crucible.cli import main
    from crucible.core.io import write_json

    sets, _ = reaction_questions("deoxyfluorination")
    qs = sets["all_varying"][:4]
    q_path = tmp_path / "questions.json"
    write_json(qs, q_path, indent=1)
    r_path = tmp_path / "m.jsonl"
    rows = [
        {"id": qs[0]["id"], "response": f"answer: {qs[0]['answer'][0]}", "error": None},
        {"id": qs[1]["id"], "response": "answer: -3", "error": None},
        {"id": qs[2]["id"], "response": None, "error": "model m: item x: gave up after 7 attempt(s)"},
        {"id": qs[3]["id"], "response": "Answer: 2.5", "error": None},
    ]
    r_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    pred = tmp_path / "pred.json"
    argv = ["reactions", "parse", "--model", "m", "--questions", str(q_path), "--responses", str(r_path)]
    assert main([*argv, "--out", str(pred)]) == 0
    rec = json.loads(pred.read_text())
    assert rec["predictions"] == {qs[0]["id"]: qs[0]["answer"][0]}
    assert set(rec["invalid"]) == {qs[1]["id"], qs[2]["id"], qs[3]["id"]}
    result = scoring.score_file(q_path, pred)
    reasons = {x["id"]: x["reason"] for x in result["invalid"]}
    assert "'-3' has a sign" in reasons[qs[1]["id"]]
    assert reasons[qs[2]["id"]] == "no reply (model m: item x: gave up after 7 attempt(s))"
    assert "'2.5' is a fraction" in reasons[qs[3]["id"]]
    assert result["summary"]["num_invalid"] == 3 and result["per_question"][1]["relative_score"] == 0.0


def test_a_repeated_response_id_is_refused_naming_both_lines(tmp_path):
    sets, _ = reaction_questions("deoxyfluorination")
    qs = sets["all_varying"][:2]
    path = tmp_path / "responses.jsonl"
    lines = [
        {"id": qs[0]["id"], "response": '{"answer": 1}'},
        {"id": qs[1]["id"], "response": '{"answer": 2}'},
        {"id": qs[0]["id"], "response": '{"answer": 3}'},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(
        DataValidationError, match=rf"responses.jsonl: id '{qs[0]['id']}' appears on line 1 and again on line 3"
    ):
        prompts.read_predictions_from_responses(path, qs)


# The issue's malformed answers, each of which the old parser read as a valid option (shown on
# the right), and an option one past the last; the reason each must carry in the score file.
ISSUE_VECTORS = [
    ("answer: -3", 3, "'-3' has a sign"),
    ("The answer is -1", 1, "'-1' has a sign"),
    ("Answer: 2.5", 2, "'2.5' is a fraction"),
    ("answer 1e1", 1, "'1e1' has an exponent"),
    ("answer=0x5", 0, "'0x5' is written in another base"),
]


def test_each_malformed_answer_of_the_issue_reaches_the_score_file_as_invalid(tmp_path):
    """Through the two commands the DAG runs (parse, score): every vector is invalid with its
    reason in the score file, none is scored as an option; plain integers in range are scored."""
    from crucible.cli import main
    from crucible.core.io import write_json

    sets, _ = reaction_questions("deoxyfluorination")
    qs = sets["all_varying"][:8]
    n = len(qs[0]["options"])
    assert all(len(q["options"]) == n for q in qs)
    assert all(old < n for _, old, _ in ISSUE_VECTORS)  # the old readings were all options
    q_path = tmp_path / "questions.json"
    write_json(qs, q_path, indent=1)
    texts = [text for text, _, _ in ISSUE_VECTORS] + [f"answer: {n}", f"The answer is {n - 1}.", "answer: 0"]
    reasons = [why for _, _, why in ISSUE_VECTORS] + [f"option {n} is out of range 0..{n - 1}"]
    r_path = tmp_path / "m.jsonl"
    r_path.write_text(
        "".join(json.dumps({"id": q["id"], "response": t, "error": None}) + "\n" for q, t in zip(qs, texts))
    )
    pred, score = tmp_path / "pred.json", tmp_path / "score.json"
    args = ["--questions", str(q_path)]
    assert main(["reactions", "parse", "--model", "m", *args, "--responses", str(r_path), "--out", str(pred)]) == 0
    assert main(["reactions", "score", "--model", "m", *args, "--predictions", str(pred), "--out", str(score)]) == 0
    result = json.loads(score.read_text())["types"]["all_varying"]
    got = {x["id"]: x["reason"] for x in result["invalid"]}
    assert list(got) == [q["id"] for q in qs[:6]]
    for q, reason in zip(qs, reasons):
        assert reason in got[q["id"]], (got[q["id"]], reason)
    rows = {r["id"]: r for r in result["per_question"]}
    assert all(rows[q["id"]]["relative_score"] == 0.0 for q in qs[:6])
    assert json.loads(pred.read_text())["predictions"] == {qs[6]["id"]: n - 1, qs[7]["id"]: 0}
    assert result["summary"]["num_valid"] == 2 and result["summary"]["num_invalid"] == 6


@pytest.mark.parametrize(
    "lines, message",
    [
        (["{a}", "{b}", "", "{a2}"], r"m.jsonl: id '{id}' appears on line 1 and again on line 4; each item"),
        (["{a}", '{"id": "x", "resp'], r"m.jsonl: line 2: not valid JSON"),
    ],
)
def test_parse_cli_refuses_a_repeated_id_or_a_broken_line_naming_file_and_lines(tmp_path, capsys, lines, message):
    """Exit 2 with the file and line(s) on stderr, and no prediction file: neither of two answers
    for one question is picked, and a line that is not JSON is no bare JSONDecodeError."""
    from crucible.cli import main
    from crucible.core.io import write_json

    sets, _ = reaction_questions("deoxyfluorination")
    qs = sets["all_varying"][:2]
    q_path = tmp_path / "questions.json"
    write_json(qs, q_path, indent=1)
    rows = {
        "{a}": json.dumps({"id": qs[0]["id"], "response": "answer: 1"}),
        "{b}": json.dumps({"id": qs[1]["id"], "response": "answer: 0"}),
        "{a2}": json.dumps({"id": qs[0]["id"], "response": "answer: 2"}),
    }
    r_path = tmp_path / "m.jsonl"
    r_path.write_text("".join(rows.get(line, line) + "\n" for line in lines))
    out = tmp_path / "pred.json"
    argv = ["reactions", "parse", "--model", "m", "--questions", str(q_path), "--responses", str(r_path)]
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert re.search(message.replace("{id}", re.escape(qs[0]["id"])), err), err
    assert str(r_path) in err and not out.exists()


def test_a_reply_cut_off_at_max_tokens_is_counted_apart_from_malformed_ones(tmp_path):
    """Issue 33: replies that hit max_tokens were counted as malformed answers."""
    from crucible.cli import main
    from crucible.core.io import write_json
    from crucible.reactions import report

    sets, _ = reaction_questions("deoxyfluorination")
    for qtype, cut_text in (("all_varying", '{"answer": '), ("all_blank", '{"answer": {"base": 1, "rea')):
        qs = sets[qtype][:3]
        q_path = tmp_path / f"{qtype}.json"
        write_json(qs, q_path, indent=1)
        r_path = tmp_path / f"{qtype}.jsonl"
        rows = [
            {"id": qs[0]["id"], "response": cut_text, "finish_reason": "length", "completion_tokens": 48},
            {"id": qs[1]["id"], "response": "no idea", "finish_reason": "stop"},
            {"id": qs[2]["id"], "response": "The best is", "finish_reason": "length", "completion_tokens": 48},
        ]
        r_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        pred = tmp_path / f"{qtype}-pred.json"
        argv = ["reactions", "parse", "--model", "m", "--questions", str(q_path), "--responses", str(r_path)]
        assert main([*argv, "--out", str(pred)]) == 0
        rec = json.loads(pred.read_text())
        assert rec["cut_off"] == sorted([qs[0]["id"], qs[2]["id"]])
        assert rec["invalid"][qs[0]["id"]].startswith("cut off at max_tokens=48 (")
        result = scoring.score_file(q_path, pred)
        assert (result["summary"]["num_invalid"], result["summary"]["num_cut_off"]) == (3, 2), qtype
        table = report.results_table([{"model": "m", "types": {qtype: result}, "expected": {}}])
        assert table[["num_invalid", "num_cut_off"]].values.tolist() == [[3, 2]]
    # 'cut_off' must name invalid ids only
    rec["cut_off"] = ["not-a-question"]
    pred.write_text(json.dumps(rec))
    with pytest.raises(Exception, match="'cut_off' must be a list of ids that are also under 'invalid'"):
        scoring.score_file(q_path, pred)
