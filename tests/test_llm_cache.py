"""The response cache: keys follow backend, model, messages and parameters (and nothing else);
entries round-trip with their records; an unreadable entry is asked again, not trusted."""

from __future__ import annotations

import json

from crucible.llm.cache import ResponseCache, request_key
from crucible.llm.files import Completion
from crucible.llm.spec import generation_params

MSG = [{"role": "user", "content": "hi"}]


def test_key_changes_with_each_part_and_nothing_else():
    base = request_key("openai", "m", MSG, {"temperature": 0.0, "max_tokens": 8})
    assert base == request_key("openai", "m", tuple(MSG), {"max_tokens": 8, "temperature": 0.0})
    assert (
        len(
            {
                base,
                request_key("transformers", "m", MSG, {"temperature": 0.0, "max_tokens": 8}),
                request_key("openai", "m2", MSG, {"temperature": 0.0, "max_tokens": 8}),
                request_key("openai", "m", [{"role": "user", "content": "hi "}], {"temperature": 0.0, "max_tokens": 8}),
                request_key("openai", "m", MSG, {"temperature": 0.0, "max_tokens": 9}),
            }
        )
        == 5
    )


def test_params_are_normalised_before_keying():
    assert generation_params("m", {"temperature": 0, "stop": "END"}) == {
        "max_tokens": 512,
        "stop": ["END"],
        "temperature": 0.0,
    }
    assert generation_params("m", {}) == generation_params("m", {"temperature": 0.0})


def test_entry_round_trip_and_corrupt_entry(tmp_path):
    cache = ResponseCache(tmp_path)
    key = request_key("openai", "m", MSG, {})
    assert cache.get(key) is None
    cache.put(
        key,
        backend="openai",
        model_name="cfg-name",
        model="m",
        messages=MSG,
        params={},
        completion=Completion("q1", "hello", model_id="org/m-v1", usage={"completion_tokens": 1}, finish_reason="stop"),
    )
    hit = cache.get(key)
    assert hit.response == "hello" and hit.model_id == "org/m-v1" and hit.usage == {"completion_tokens": 1}
    entry = json.loads(cache.path(key).read_text())
    assert entry["model_name"] == "cfg-name" and entry["messages"] == MSG and entry["time"]
    assert list(tmp_path.rglob(".*")) == [], "no temp file left behind"
    cache.put(
        request_key("openai", "m", MSG, {"x": 1}),
        backend="openai",
        model_name="n",
        model="m",
        messages=MSG,
        params={},
        completion=Completion("q1", error="boom"),
    )
    assert len(list(tmp_path.rglob("*.json"))) == 1, "failures are not cached"
    cache.path(key).write_text('{"key": "')
    assert cache.get(key) is None
    cache.path(key).write_text(json.dumps({**entry, "key": "0" * 64}))
    assert cache.get(key) is None
