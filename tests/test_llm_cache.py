"""The response cache: keys follow backend, model, messages and parameters (and nothing else);
entries round-trip with their records; an unreadable or edited entry is asked again, not
trusted; claims keep two jobs from paying for one item and are taken over from a dead job; a
failed write names its path."""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from crucible.llm.cache import ResponseCache, request_key
from crucible.llm.files import Completion
from crucible.llm.model_entry import generation_params

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


# --- issue 22: integrity, claims, failed writes -----------------------------------------------


def put(cache, key, text="hello", messages=MSG, params=None):
    cache.put(
        key,
        backend="openai",
        model_name="n",
        model="m",
        messages=messages,
        params=params or {},
        completion=Completion("q1", text, model_id="org/m", usage={"completion_tokens": 1}),
    )


def test_an_entry_edited_on_disk_is_refused_naming_it(tmp_path, caplog):
    cache = ResponseCache(tmp_path)
    key = request_key("openai", "m", MSG, {})
    put(cache, key)
    entry = json.loads(cache.path(key).read_text())
    assert len(entry["sha256"]) == 64 and cache.get(key).response == "hello"
    # Valid JSON, right key, another answer: the checksum catches it.
    cache.path(key).write_text(json.dumps({**entry, "response": "hello, edited"}))
    assert cache.get(key) is None
    assert f"cache entry {cache.path(key)} refused: its content does not match its checksum" in caplog.text
    # Edited with the checksum recomputed: the request no longer hashes to the key.
    from crucible.llm.cache import entry_digest

    forged = {**entry, "messages": [{"role": "user", "content": "something else"}]}
    forged["sha256"] = entry_digest(forged)
    cache.path(key).write_text(json.dumps(forged))
    assert cache.get(key) is None and "its request does not hash to its key" in caplog.text
    # No checksum at all (an older crucible, or a hand-made entry).
    cache.path(key).write_text(json.dumps({k: v for k, v in entry.items() if k != "sha256"}))
    assert cache.get(key) is None and "it has no checksum" in caplog.text
    cache.path(key).write_text("[]")
    assert cache.get(key) is None and "it is a JSON list" in caplog.text
    # The new answer replaces the refused entry.
    put(cache, key, "hello again")
    assert cache.get(key).response == "hello again"


def test_a_claim_is_exclusive_and_released(tmp_path):
    cache = ResponseCache(tmp_path)
    key = request_key("openai", "m", MSG, {})
    with cache.claims() as mine:
        assert mine.take(key) and cache.claim_path(key).is_file()
        other = cache.claims()
        other.host = "another-node"  # a second job, elsewhere
        assert not other.take(key) and other.stale(key) is None
        assert f"process {os.getpid()} on " in other.holder(key)
        mine.release(key)
        assert other.take(key) and not mine.take(key)
        other.release(key)
        mine.take(request_key("openai", "m", MSG, {"x": 1}))
    assert list(tmp_path.rglob("*.claim")) == [], "leaving the block releases what is still held"


def test_a_dead_or_silent_holder_loses_its_claim(tmp_path):
    import socket
    import subprocess
    import sys

    cache = ResponseCache(tmp_path, stale_s=60)
    key = request_key("openai", "m", MSG, {})
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    cache.claim_path(key).parent.mkdir(parents=True)
    cache.claim_path(key).write_text(json.dumps({"host": socket.gethostname(), "pid": dead_pid, "time": 0}))
    claims = cache.claims()
    assert claims.stale(key) == f"process {dead_pid} on this host has ended"
    assert claims.take(key)
    claims.release(key)
    # Another node's claim: alive while refreshed, stale once older than stale_s.
    cache.claim_path(key).write_text(json.dumps({"host": "node-7", "pid": 1, "time": 0}))
    assert claims.stale(key) is None and not claims.take(key)
    os.utime(cache.claim_path(key), (time.time() - 61, time.time() - 61))
    assert "not refreshed for 61 s" in claims.stale(key) and claims.take(key)
    claims.release(key)


def test_the_holder_refreshes_its_claims(tmp_path):
    cache = ResponseCache(tmp_path, heartbeat_s=0.05)
    key = request_key("openai", "m", MSG, {})
    with cache.claims() as claims:
        claims.take(key)
        os.utime(cache.claim_path(key), (0, 0))
        time.sleep(0.5)  # ten heartbeats
        assert cache.claim_path(key).stat().st_mtime > 0  # touched again since it was set to the epoch


def test_a_failed_write_names_the_path(tmp_path, monkeypatch):
    import errno

    import crucible.llm.cache as cache_module
    from crucible.llm.cache import CacheWriteError

    def full_disk(obj, path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(cache_module, "write_json", full_disk)
    cache = ResponseCache(tmp_path)
    key = request_key("openai", "m", MSG, {})
    with pytest.raises(CacheWriteError, match=rf"cannot write {re.escape(str(cache.path(key)))}: No space left"):
        put(cache, key)
