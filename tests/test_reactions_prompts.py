"""prompts.jsonl in the shared LLM contract, and the response parser."""

from __future__ import annotations

import json

import pytest

from crucible.errors import DataValidationError
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
    from crucible.io import write_json

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
