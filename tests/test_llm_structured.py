"""Structured output (issue 33): the answer schema a benchmark gives with each prompt reaches the
server as OpenAI's ``response_format``; a canary shows whether the server enforces it, and one
that ignores it stops the job before any real request; the schema is part of the cache key;
truncated replies are counted as such; the record says what constrained the answers."""

from __future__ import annotations

import json

import pytest

from crucible.core.errors import ConfigError
from crucible.llm.files import read_responses
from crucible.llm.generate import StructuredOutputError, run_stage
from crucible.llm.model_entry import model_spec, spec_sha256

from helpers import write_prompts

MC = {
    "type": "object",
    "properties": {"answer": {"type": "integer", "enum": [0, 1, 2]}},
    "required": ["answer"],
    "additionalProperties": False,
}
SITES = {
    "type": "object",
    "properties": {
        "atomic_sites": {
            "type": "array",
            "minItems": 4,
            "maxItems": 4,
            "items": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
        }
    },
    "required": ["atomic_sites"],
}


def entry(server, **extra):
    return {
        "backend": "openai",
        "model": "tiny-chat",
        "base_url": server.base_url,
        "concurrency": 2,
        "timeout_s": 5,
        "max_retries": 1,
        "backoff_s": 0.01,
        "params": {"temperature": 0, "max_tokens": 16},
        **extra,
    }


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def run(tmp_path, server, schemas, name="m1", **extra):
    prompts = write_prompts(
        tmp_path / "results/bench/ds/prompts.jsonl", [f"question {k}" for k in range(len(schemas))], schemas=schemas
    )
    out = tmp_path / f"results/bench/ds/responses/{name}.jsonl"
    info = run_stage(
        prompts,
        name,
        entry(server, **extra),
        out=out,
        record=out.with_suffix(".json"),
        cache_dir=tmp_path / "results/llm/cache",
    )
    return info, read_responses(out)


def test_a_server_that_ignores_response_format_stops_the_job_before_any_real_request(tmp_path, chat_server):
    with pytest.raises(StructuredOutputError) as err:
        run(tmp_path, chat_server, [MC, MC, SITES], structured_output=True)
    message = str(err.value)
    assert "does not enforce response_format json_schema" in message
    assert "served model tiny-chat" in message, "names the model the server says it ran"
    assert "'echo: Say hello in one word.'" in message, "says what came back"
    assert chat_server.count() == 1 and chat_server.count("Say hello") == 1, "only the canary was sent"
    sent = chat_server.bodies[0]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["strict"] is True
    assert not (tmp_path / "results/bench/ds/responses/m1.jsonl").exists()


def test_a_server_that_enforces_it_answers_every_prompt_in_its_own_schema(tmp_path, chat_server):
    chat_server.honour_schema = True
    info, rows = run(tmp_path, chat_server, [MC, SITES, MC], structured_output=True)
    assert [json.loads(r["response"]) for r in rows] == [
        {"answer": 0},
        {"atomic_sites": [{"x": 0.25}] * 4},
        {"answer": 0},
    ]
    bodies = chat_server.bodies
    assert bodies[0]["messages"][-1]["content"] == "Say hello in one word.", "the canary goes first"
    by_question = {b["messages"][-1]["content"]: b["response_format"] for b in bodies[1:]}
    assert by_question["question 1"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SITES, "strict": True},
    }
    assert by_question["question 0"]["json_schema"]["schema"] == MC
    constraint = info["structured_output"]
    assert constraint["enabled"] is True and constraint["enforced_by"].startswith("server: response_format")
    assert constraint["canary"]["passed"] is True and constraint["canary"]["served_model"] == "tiny-chat"
    assert info["n_not_matching_schema"] == 0 and len(info["response_schema_sha256s"]) == 2
    assert info["server_system_fingerprints"] == ["fp_test_b4242"]

    # A rerun sends nothing, not even the canary: every answer is cached under its schema.
    chat_server.reset()
    info, _ = run(tmp_path, chat_server, [MC, SITES, MC], structured_output=True)
    assert chat_server.count() == 0 and info["n_cached"] == 3
    assert info["structured_output"]["canary"] == "not sent (every answer was cached)"
    # The same prompts without the constraint are other requests: no schema, a new answer each.
    info, rows = run(tmp_path, chat_server, [MC, SITES, MC])
    assert chat_server.count() == 3 and info["n_cached"] == 0
    assert all("response_format" not in b for b in chat_server.bodies)
    assert rows[0]["response"] == "echo: question 0"
    assert info["structured_output"] == {"enabled": False, "enforced_by": None}


def test_replies_that_break_their_schema_are_counted_not_trusted(tmp_path, chat_server):
    """A server that passes the canary but not the real prompts' schemas is caught per reply."""
    chat_server.honour_schema = "canary-only"
    info, rows = run(tmp_path, chat_server, [MC, SITES], structured_output=True)
    assert info["structured_output"]["canary"]["passed"] is True
    assert [r["response"] for r in rows] == ["echo: question 0", "echo: question 1"]
    assert info["n_not_matching_schema"] == 2 and info["not_matching_schema_ids"] == ["q000", "q001"]


def test_a_server_that_takes_the_schema_as_json_object_is_named_then_used_so(tmp_path, chat_server):
    """llama-cpp-python's server refuses ``type: json_schema`` (HTTP 500) and enforces
    ``{type: json_object, schema}``: the canary's error says which key to set, and with it set
    every answer follows its schema, the record saying how it was sent."""
    chat_server.honour_schema = True
    chat_server.json_object_only = True
    with pytest.raises(StructuredOutputError, match=r"set llm.models.m1.response_format: json_object"):
        run(tmp_path, chat_server, [MC, SITES], structured_output=True)
    assert chat_server.count("question") == 0, "only the canary was sent"
    chat_server.reset()
    chat_server.honour_schema = chat_server.json_object_only = True
    info, rows = run(tmp_path, chat_server, [MC, SITES], structured_output=True, response_format="json_object")
    assert [json.loads(r["response"]) for r in rows] == [{"answer": 0}, {"atomic_sites": [{"x": 0.25}] * 4}]
    # the two questions go out concurrently, in either order, after the canary
    sent = [b["response_format"] for b in chat_server.bodies[1:]]
    assert len(sent) == 2 and {"type": "json_object", "schema": MC} in sent
    assert all(f["type"] == "json_object" and "schema" in f for f in sent)
    assert info["structured_output"]["enforced_by"] == "server: response_format json_object with schema"
    assert info["structured_output"]["canary"]["passed"] is True and info["n_not_matching_schema"] == 0


def test_a_server_that_takes_json_object_without_a_schema_fails_the_canary(tmp_path, chat_server):
    """OpenAI's own json_object mode ignores a schema: free JSON does not hold the canary's token."""
    with pytest.raises(StructuredOutputError, match="does not enforce response_format json_object"):
        run(tmp_path, chat_server, [MC], structured_output=True, response_format="json_object")
    assert chat_server.count() == 1


def test_extra_body_reaches_the_server_and_the_cache_key(tmp_path, chat_server):
    """A server's own sampling fields (llama-cpp-python's repeat_penalty, 1.1 unless sent, even at
    temperature 0) go in each request as they are, and answers under other values are other answers."""
    params = {"temperature": 0, "max_tokens": 16, "extra_body": {"repeat_penalty": 1.0}}
    info, _ = run(tmp_path, chat_server, [MC], params=params)
    assert chat_server.bodies[0]["repeat_penalty"] == 1.0 and info["params"]["extra_body"] == {"repeat_penalty": 1.0}
    run(tmp_path, chat_server, [MC], params=params)
    assert chat_server.count() == 1, "cached"
    run(tmp_path, chat_server, [MC], params={**params, "extra_body": {"repeat_penalty": 1.1}})
    assert chat_server.count() == 2 and chat_server.bodies[1]["repeat_penalty"] == 1.1


def test_response_format_and_extra_body_in_the_config():
    base = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1", "structured_output": True}
    # the default form keeps the hash an entry had before the key existed
    assert spec_sha256("m", {**base, "response_format": "json_schema"}) == spec_sha256("m", base)
    assert model_spec("m", {**base, "response_format": "json_object"})["response_format"] == "json_object"
    with pytest.raises(ConfigError, match="response_format: how an openai model with structured_output"):
        model_spec("m", {**base, "structured_output": False, "response_format": "json_object"})
    with pytest.raises(ConfigError, match="this model is transformers"):
        model_spec("m", {"backend": "transformers", "path": "x.gguf", "response_format": "json_object"})
    with pytest.raises(ConfigError, match="'grammar' is not one of json_schema, json_object"):
        model_spec("m", {**base, "response_format": "grammar"})
    with pytest.raises(ConfigError, match="params.extra_body: response_format, temperature set by crucible itself"):
        model_spec("m", {**base, "params": {"extra_body": {"temperature": 1, "response_format": {}}}})
    with pytest.raises(ConfigError, match="a transformers model sends no request"):
        model_spec("m", {"backend": "transformers", "path": "x.gguf", "params": {"extra_body": {"top_k": 1}}})
    assert "extra_body" not in model_spec("m", {**base, "params": {"extra_body": {}}})["params"]


def test_truncated_replies_are_their_own_outcome_in_the_response_file_and_record(tmp_path):
    prompts = write_prompts(tmp_path / "p.jsonl", ["a", "b", "c"])
    replay = tmp_path / "replay.jsonl"
    replay.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in [
                {"id": "q000", "response": '{"answer": 1}', "finish_reason": "stop"},
                {"id": "q001", "response": '{"answer": {"0": {"0', "finish_reason": "length"},
                {"id": "q002", "response": "option 2"},
            ]
        )
    )
    out = tmp_path / "r.jsonl"
    info = run_stage(
        prompts, "m", {"backend": "replay", "path": str(replay)}, out=out, record=tmp_path / "r.json", cache_dir=None
    )
    assert info["n_cut_off"] == 1 and info["cut_off_ids"] == ["q001"]
    assert [r["finish_reason"] for r in read_responses(out)] == ["stop", "length", None]


def test_structured_output_in_the_config(tmp_path):
    base = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    assert model_spec("m", {**base, "structured_output": True})["structured_output"] is True
    # off (or absent) hashes as before the key existed: existing jobs do not rerun
    assert spec_sha256("m", {**base, "structured_output": False}) == spec_sha256("m", base)
    assert spec_sha256("m", {**base, "structured_output": True}) != spec_sha256("m", base)
    with pytest.raises(ConfigError, match="replay model's answers were produced elsewhere"):
        model_spec("m", {"backend": "replay", "path": "x", "structured_output": True})
    with pytest.raises(ConfigError, match="structured_output: expected true or false"):
        model_spec("m", {**base, "structured_output": "yes"})


def test_structured_output_needs_a_schema_on_every_prompt(tmp_path, chat_server):
    prompts = write_prompts(tmp_path / "p.jsonl", ["a", "b"])
    with pytest.raises(StructuredOutputError, match=r"2 prompt\(s\) have no response_schema \(e.g. q000, q001\)"):
        run_stage(
            prompts,
            "m1",
            entry(chat_server, structured_output=True),
            out=tmp_path / "r.jsonl",
            record=tmp_path / "r.json",
            cache_dir=None,
        )
    assert chat_server.count() == 0


def test_the_llm_extras_are_pinned_alike_in_pyproject_and_their_requirements_files():
    """`make install-llm` installs the llm-transformers extra with requirements-llm-transformers.txt
    as constraints: a pin that differs between the two would fail a clean install."""
    import tomllib

    from helpers import REPO

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, pins_file in (
        ("llm-transformers", "requirements-llm-transformers.txt"),
        ("llm-local", "requirements-llm-local.txt"),
    ):
        pins = dict(
            line.split("==")
            for line in (REPO / pins_file).read_text().splitlines()
            if line.strip() and not line.startswith("#")
        )
        for requirement in extras[extra]:
            name, version = requirement.split("==")
            assert pins[name.split("[")[0]] == version, (extra, name)
    assert set(extras["llm-transformers"]) < set(extras["llm-local"]), "llm-local is llm-transformers plus llama.cpp"
    assert "install-llm:" in (REPO / "Makefile").read_text()
