"""Structured output means schema-valid (issue 46 item 4): a server that passes the canary and then
answers prose had every reply scored valid, only the record's ``n_not_matching_schema`` saying
otherwise. Each whole reply is now held to its schema; one that breaks it is "off-schema", an
invalid answer counted in every table beside malformed and cut-off ones, whatever a lenient
parser could read out of its text."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from crucible.core.io import write_json
from crucible.llm.files import read_prompt_records, read_responses
from crucible.llm.generate import run_stage

from helpers import REPO, reaction_questions

PROSE = "Having weighed the bases and solvents, the answer: 2"


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def structured_entry(server):
    return {
        "backend": "openai",
        "model": "fooled-7b",
        "base_url": server.base_url,
        "concurrency": 2,
        "timeout_s": 5,
        "max_retries": 0,
        "structured_output": True,
        "params": {"temperature": 0, "max_tokens": 64},
    }


def answer(tmp_path, server, prompts, name="m"):
    out = tmp_path / f"responses/{name}.jsonl"
    info = run_stage(prompts, name, structured_entry(server), out=out, record=out.with_suffix(".json"), cache_dir=None)
    return info, out


def test_prose_after_a_passed_canary_is_off_schema_in_the_reactions_table(tmp_path, chat_server):
    from crucible.reactions import prompts, report, scoring

    sets, _ = reaction_questions("deoxyfluorination")
    qs = [q for q in sets["all_varying"] if len(q["options"]) > 2][:4]
    assert len(qs) == 4
    q_path = tmp_path / "all_varying.json"
    write_json(qs, q_path, indent=1)
    p_path = tmp_path / "prompts.jsonl"
    p_path.write_text(prompts.prompts_jsonl(qs))
    # Read leniently, the prose names option 2 of every question: valid, as it was scored before.
    assert [prompts.read_conditions_answer(PROSE, q) for q in qs] == [(2, None)] * 4

    chat_server.honour_schema = "canary-only"
    chat_server.answer_text = PROSE
    info, responses = answer(tmp_path, chat_server, p_path)
    assert info["structured_output"]["canary"]["passed"] is True
    assert chat_server.count() == 1 + 4
    rows = read_responses(responses)
    assert [r["response"] for r in rows] == [PROSE] * 4
    assert all(r["off_schema"].startswith("not JSON as a whole") for r in rows), rows
    assert info["n_not_matching_schema"] == 4

    pred = tmp_path / "pred.json"
    prompts.write_response_predictions("m", [q_path], [responses], [pred])
    record = json.loads(pred.read_text())
    assert record["predictions"] == {} and record["off_schema"] == sorted(q["id"] for q in qs)
    assert all(why.startswith("off-schema: not JSON as a whole") for why in record["invalid"].values())
    result = scoring.score_file(q_path, pred)
    summary = result["summary"]
    assert (summary["num_valid"], summary["num_invalid"], summary["num_off_schema"]) == (0, 4, 4)
    assert summary["num_cut_off"] == 0 and summary["avg_relative_score"] == 0.0
    table = report.results_table([{"model": "m", "types": {"all_varying": result}, "expected": {}}])
    assert table[["num_invalid", "num_cut_off", "num_off_schema"]].values.tolist() == [[4, 0, 4]]
    assert report.RESULTS_HEADERS["num_off_schema"] == "of which off the answer schema"
    # the prediction file says which invalid answers were off-schema, and only invalid ones
    record["off_schema"] = ["not-a-question"]
    pred.write_text(json.dumps(record))
    with pytest.raises(Exception, match="'off_schema' must be a list of ids that are also under 'invalid'"):
        scoring.score_file(q_path, pred)


def test_a_schema_valid_reply_and_one_cut_off_are_not_off_schema(tmp_path, chat_server):
    """The check is per reply: an answer in the schema is scored; a reply cut off at max_tokens is
    its own outcome, not off-schema; without structured output nothing is checked."""
    from crucible.llm.files import Completion, Prompt
    from crucible.llm.schema_check import check_replies

    schema = {"type": "object", "properties": {"answer": {"enum": [0, 1, 2]}}, "required": ["answer"]}
    items = [Prompt(f"q{k}", ({"role": "user", "content": "x"},), response_schema=schema) for k in range(4)]
    replies = [
        Completion("q0", '{"answer": 1}', finish_reason="stop"),
        Completion("q1", '{"answer": 7}', finish_reason="stop"),
        Completion("q2", '{"answer": ', finish_reason="length"),
        Completion("q3", error="HTTP 500"),
    ]
    broken = check_replies(items, replies)
    assert list(broken) == ["q1"] and broken["q1"].startswith("at answer: 7 is not one of [0, 1, 2]")
    assert [c.off_schema for c in replies] == [None, broken["q1"], None, None]

    chat_server.answer_text = PROSE  # structured output off: prose is the expected answer form
    p_path = tmp_path / "p.jsonl"
    p_path.write_text(
        json.dumps({"id": "q0", "messages": [{"role": "user", "content": "x"}], "response_schema": schema})
    )
    entry = {**structured_entry(chat_server), "structured_output": False}
    out = tmp_path / "r.jsonl"
    run_stage(p_path, "m", entry, out=out, record=tmp_path / "r.json", cache_dir=None)
    assert read_responses(out)[0]["off_schema"] is None and "off_schema" not in out.read_text()


def test_prose_wrapping_the_right_structure_is_off_schema_in_the_crystal_table(aflow_file, tmp_path, chat_server):
    """Crystal reads the last long JSON value of a reply (OpenCompass): prose around the right
    structure matches when read so, and is unmatched, reason off_schema, under structured output."""
    from crucible.crystal import items, parsing, report
    from crucible.crystal.generation import answer_from_structure
    from crucible.crystal.scoring import reference_structure

    prompts_path = tmp_path / "prompts.jsonl"
    items.build_item_files(
        "aflow",
        "aflow-prototypes",
        [str(aflow_file)],
        REPO / "config" / "crystal_prompts.yaml",
        "composition-v1",
        prompts_path,
        tmp_path / "train.jsonl",
        max_sites=8,
        max_test_items=4,
    )
    records = read_prompt_records(prompts_path)
    by_content: dict[str, str] = {}
    for p in records:
        structure = answer_from_structure(reference_structure(p["ground_truth"]), p["meta"]["elements"])
        by_content.setdefault(p["messages"][-1]["content"], f"Here is my structure: {structure} Hope this helps!")
    chat_server.honour_schema = "canary-only"
    chat_server.answer_text = lambda content: by_content[content]
    info, responses = answer(tmp_path, chat_server, prompts_path)
    n = len(records)
    assert info["structured_output"]["canary"]["passed"] is True and info["n_not_matching_schema"] == n

    lenient = tmp_path / "lenient.jsonl"  # the same replies without the verdict: as scored before
    lenient.write_text("".join(json.dumps({**r, "off_schema": None}) + "\n" for r in read_responses(responses)))
    before = report.score_response_file(prompts_path, lenient, "m", tmp_path / "b.parquet", tmp_path / "b.json")
    assert before["matched"] >= 1, "read leniently, the prose answers match"

    summary = report.score_response_file(prompts_path, responses, "m", tmp_path / "s.parquet", tmp_path / "s.json")
    df = pd.read_parquet(tmp_path / "s.parquet")
    assert summary["matched"] == 0 and summary["failures"][parsing.OFF_SCHEMA] == n
    assert df["reason"].tolist() == [parsing.OFF_SCHEMA] * n and not df["matched"].any()
    assert df["detail"].str.startswith("off-schema: not JSON as a whole").all()
    table = report.generator_table([summary])
    assert table["fail_off_schema"].tolist() == [n] and table["fail_cut_off"].tolist() == [0]
    assert report.TABLE_HEADERS["fail_off_schema"].startswith("failed, off the answer schema")


def test_an_off_schema_sample_is_unmatched_in_crystal_structure_prediction(cscl_ground_truth):
    """The k-sample path (crucible.crystal.csp) reads the verdict of each sample's reply."""
    from crucible.crystal import parsing
    from crucible.crystal.csp import score_samples
    from crucible.crystal.csp_table import preamble
    from crucible.crystal.generation import answer_from_structure
    from crucible.crystal.samples import TEXT, Sample
    from crucible.crystal.scoring import reference_structure

    item = {"id": "cscl", "ground_truth": cscl_ground_truth}
    text = "My answer: " + answer_from_structure(reference_structure(cscl_ground_truth), ["Cs", "Cl"])
    lenient = score_samples({"cscl": [Sample("cscl", 0, TEXT, text)]}, [item], k=1, conventions=["cdvae"])
    assert lenient["matched"].tolist() == [True], "read leniently, the prose answer matches"
    samples = {"cscl": [Sample("cscl", 0, TEXT, text, off_schema="off-schema: not JSON as a whole (x)")]}
    df = score_samples(samples, [item], k=1, conventions=["cdvae"])
    assert df["reason"].tolist() == [parsing.OFF_SCHEMA] and not df["matched"].any()
    summary = {"responder": "m", "dataset": "mp-20", "n_items": 1, "k": 1, "unmatched_samples": {"off_schema": 1}}
    assert "off the answer schema their request asked for count as unmatched" in preamble([summary], {"sources": {}})
