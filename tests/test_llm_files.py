"""The stage's file contract: prompt sets checked line by line, replay files refused when their
ids do not match the prompt set (each id named), response files in prompt order."""

from __future__ import annotations

import json

import pytest

from crucible.core.errors import DataValidationError
from crucible.llm.files import Completion, prompt_set_hash, read_prompts, read_replay, read_responses, write_responses
from crucible.llm.generate import GenerationFailedError, run_stage

from helpers import write_prompts


def lines(path, objs):
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return path


def test_prompts_read_and_hash(tmp_path):
    path = write_prompts(tmp_path / "p.jsonl", ["a", "b"], system="s")
    prompts = read_prompts(path)
    assert [p.id for p in prompts] == ["q000", "q001"]
    assert prompts[0].messages == ({"role": "system", "content": "s"}, {"role": "user", "content": "a"})
    assert prompts[0].meta == {"template_hash": "t1"}
    # meta does not change what is sent, so it does not change the hash; a message does.
    other = read_prompts(
        lines(tmp_path / "o.jsonl", [{"id": p.id, "messages": list(p.messages), "meta": {"x": 1}} for p in prompts])
    )
    assert prompt_set_hash(other) == prompt_set_hash(prompts)
    changed = read_prompts(write_prompts(tmp_path / "c.jsonl", ["a", "B"], system="s"))
    assert prompt_set_hash(changed) != prompt_set_hash(prompts)


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"messages": [{"role": "user", "content": "x"}]}, r"line 2: field 'id' must be a non-empty string"),
        ({"id": "b", "messages": []}, r"line 2 \(id b\): field 'messages' must be a non-empty list"),
        ({"id": "b", "messages": [{"role": "bot", "content": "x"}]}, r"line 2 \(id b\): messages\[0\] must be"),
        ({"id": "b", "messages": [{"role": "user", "content": 3}]}, r"line 2 \(id b\): messages\[0\]"),
        ({"id": "a", "messages": [{"role": "user", "content": "x"}]}, r"duplicated id\(s\): a \(lines 1, 2\)"),
        # a schema that is no JSON Schema was sent, then failed the answers' check with a traceback
        (
            {"id": "b", "messages": [{"role": "user", "content": "x"}], "response_schema": {"type": "objekt"}},
            r"line 2 \(id b\): field 'response_schema': not a valid JSON Schema at type: 'objekt'",
        ),
        (
            {"id": "b", "messages": [{"role": "user", "content": "x"}], "response_schema": {"required": "answer"}},
            r"line 2 \(id b\): field 'response_schema': not a valid JSON Schema at required",
        ),
    ],
)
def test_bad_prompt_lines_are_named(tmp_path, bad, match):
    path = lines(tmp_path / "p.jsonl", [{"id": "a", "messages": [{"role": "user", "content": "x"}]}, bad])
    with pytest.raises(DataValidationError, match=match) as info:
        read_prompts(path)
    assert str(path) in str(info.value)


def test_not_json_is_named(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "a", "messages": [{"role": "user", "content": "x"}]}\n{oops\n')
    with pytest.raises(DataValidationError, match=r"p.jsonl: line 2: not valid JSON"):
        read_prompts(path)


def test_replay_refuses_missing_extra_and_duplicated_ids(tmp_path):
    path = lines(
        tmp_path / "r.jsonl", [{"id": "a", "response": "1"}, {"id": "a", "response": "2"}, {"id": "z", "response": "3"}]
    )
    with pytest.raises(DataValidationError) as info:
        read_replay(path, ["a", "b", "c"])
    message = str(info.value)
    assert (
        "duplicated id(s): a (lines 1, 2)" in message
        and "missing id(s) (in the prompt set, not in the replay file): b, c" in message
    )
    assert "extra id(s) (not in the prompt set): z" in message


def test_replay_null_response_is_a_failure_row(tmp_path):
    path = lines(tmp_path / "r.jsonl", [{"id": "a", "response": "1"}, {"id": "b", "response": None}])
    rows = read_replay(path, ["a", "b"])
    assert rows["a"].response == "1" and rows["b"].response is None and "no response" in rows["b"].error
    with pytest.raises(DataValidationError, match=r"line 1 \(id a\): field response: must be a string or null, got 5"):
        read_replay(lines(tmp_path / "bad.jsonl", [{"id": "a", "response": 5}]), ["a"])


def test_replay_stage_keeps_prompt_order_and_reports_failures(tmp_path):
    prompts = write_prompts(tmp_path / "p.jsonl", ["x", "y", "z"])
    replay = lines(
        tmp_path / "r.jsonl",
        [
            {"id": "q002", "response": "Z"},
            {"id": "q000", "response": "X"},
            {"id": "q001", "response": None, "error": "refused upstream"},
        ],
    )
    out, record = tmp_path / "out/m.jsonl", tmp_path / "out/m.json"
    entry = {"backend": "replay", "path": str(replay)}
    with pytest.raises(GenerationFailedError, match=r"1 of 3 items failed \(q001\)"):
        run_stage(prompts, "m", entry, out=out, record=record, cache_dir=tmp_path / "cache")
    info = run_stage(
        prompts, "m", {**entry, "max_failed_fraction": 0.5}, out=out, record=record, cache_dir=tmp_path / "cache"
    )
    none = {"finish_reason": None, "completion_tokens": None, "off_schema": None}
    assert read_responses(out) == [
        {"id": "q000", "response": "X", "error": None, **none},
        {"id": "q001", "response": None, "error": "refused upstream", **none},
        {"id": "q002", "response": "Z", "error": None, **none},
    ]
    assert info["backend"] == "replay" and info["n_failed"] == 1 and info["cache_dir"] is None
    assert not (tmp_path / "cache").exists(), "replayed answers are not cached"


def test_write_responses_one_line_per_item_with_how_each_reply_ended(tmp_path):
    from crucible.llm.files import cut_off_reason

    out = tmp_path / "r.jsonl"
    cut = Completion("c", '{"lattice', usage={"completion_tokens": 320}, finish_reason="length")
    write_responses([Completion("a", "yes", finish_reason="stop"), Completion("b", error="boom"), cut], out)
    assert out.read_text() == (
        '{"completion_tokens": null, "error": null, "finish_reason": "stop", "id": "a", "response": "yes"}\n'
        '{"completion_tokens": null, "error": "boom", "finish_reason": null, "id": "b", "response": null}\n'
        '{"completion_tokens": 320, "error": null, "finish_reason": "length", "id": "c", "response": "{\\"lattice"}\n'
    )
    rows = read_responses(out)
    assert [cut_off_reason(r) for r in rows] == [None, None, "cut off at max_tokens=320"]
    assert cut_off_reason(rows[2], max_tokens=512) == "cut off at max_tokens=512"


def test_prompt_records_keep_a_benchmarks_own_fields_and_are_checked_the_same(tmp_path):
    from crucible.llm.files import read_prompt_records

    from helpers import write_prompts

    path = write_prompts(tmp_path / "p.jsonl", ["a", "b"], system="s")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["ground_truth"] = {"lattice": [[1, 0, 0], [0, 1, 0], [0, 0, 1]]}
    lines(path, rows)
    records = read_prompt_records(path)
    assert records == rows and [p.id for p in read_prompts(path)] == [r["id"] for r in records]
    lines(path, [rows[0], {"id": "q009", "messages": []}])
    with pytest.raises(DataValidationError, match=r"line 2 \(id q009\): field 'messages' must be a non-empty list"):
        read_prompt_records(path)


def test_iter_responses_gives_line_numbers_and_names_a_bad_line(tmp_path):
    from crucible.llm.files import iter_responses

    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "a", "response": "x\\u2028y"}\n\n{"id": "b", "response": null, "error": "e"}\n')
    none = {"finish_reason": None, "completion_tokens": None, "off_schema": None}
    assert list(iter_responses(path)) == [
        (1, {"id": "a", "response": "x\u2028y", "error": None, **none}),
        (3, {"id": "b", "response": None, "error": "e", **none}),
    ]
    # A raw U+2028 inside a string (ensure_ascii=False) is one line, not two.
    path.write_text(json.dumps({"id": "a", "response": "x\u2028y"}, ensure_ascii=False) + "\n")
    assert [r["response"] for _, r in iter_responses(path)] == ["x\u2028y"]
    path.write_text('{"id": "a", "response": "x"}\n{"id": "b", "respo\n')
    with pytest.raises(DataValidationError, match=r"r.jsonl: line 2: not valid JSON"):
        list(iter_responses(path))


def test_once_per_id_names_both_lines():
    from crucible.llm.files import once_per_id

    rows = [(1, {"id": "a"}), (2, {"id": "b"}), (5, {"id": "a"})]
    with pytest.raises(DataValidationError, match=r"r.jsonl: id 'a' appears on line 1 and again on line 5"):
        list(once_per_id(rows, "r.jsonl"))
    assert list(once_per_id(rows[:2], "r.jsonl")) == rows[:2]
