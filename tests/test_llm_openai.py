"""The openai backend against a real HTTP server on 127.0.0.1 (conftest.ChatServer): answers,
429 then success, a 500 storm, a reply slower than the timeout, a refused key; the response
cache (no request is sent twice, a killed run resumes); the API key never reaches a file."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from crucible.core.errors import ConfigError
from crucible.llm.files import read_responses
from crucible.llm.generate import GenerationFailedError, run_stage

from helpers import write_prompts

KEY = "sk-test-SECRET-0123456789abcdef"


def entry(server, **extra):
    return {
        "backend": "openai",
        "model": "tiny-chat",
        "base_url": server.base_url,
        "api_key_env": "CRUCIBLE_TEST_KEY",
        "concurrency": 3,
        "timeout_s": 5,
        "max_retries": 3,
        "backoff_s": 0.01,
        "max_backoff_s": 0.05,
        "params": {"temperature": 0, "max_tokens": 16, "seed": 1, "stop": ["\n\n"]},
        **extra,
    }


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("CRUCIBLE_TEST_KEY", KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def stage(tmp_path, server, contents, name="m1", **extra):
    prompts = write_prompts(tmp_path / "results/bench/ds/prompts.jsonl", contents, system="answer briefly")
    out = tmp_path / f"results/bench/ds/responses/{name}.jsonl"
    record = out.with_suffix(".json")
    info = run_stage(
        prompts, name, entry(server, **extra), out=out, record=record, cache_dir=tmp_path / "results/llm/cache"
    )
    return info, read_responses(out), out


def test_answers_in_prompt_order_with_records_and_cache(tmp_path, chat_server):
    contents = [f"the yield of reaction {k}" for k in range(7)]
    info, rows, out = stage(tmp_path, chat_server, contents)
    assert [r["id"] for r in rows] == [f"q{k:03d}" for k in range(7)]
    assert [r["response"] for r in rows] == [f"echo: {c}" for c in contents]
    assert all(r["error"] is None for r in rows)
    # The key went out in the header, as the protocol wants.
    assert {auth for _, auth in chat_server.requests} == {f"Bearer {KEY}"}
    assert info["n_items"] == 7 and info["n_new"] == 7 and info["n_cached"] == 0 and info["n_failed"] == 0
    assert info["model_ids"] == ["tiny-chat"] and info["backend"] == "openai"
    assert info["params"] == {"max_tokens": 16, "seed": 1, "stop": ["\n\n"], "temperature": 0.0}
    assert info["prompt_template_hashes"] == ["t1"] and len(info["prompt_set_hash"]) == 64
    assert info["new_usage"]["completion_tokens"] == sum(len(f"echo: {c}".split()) for c in contents)
    entries = sorted((tmp_path / "results/llm/cache").rglob("*.json"))
    assert len(entries) == 7
    cached = json.loads(entries[0].read_text())
    assert cached["model_name"] == "m1" and cached["model"] == "tiny-chat" and cached["model_id"] == "tiny-chat"
    assert cached["usage"]["completion_tokens"] > 0 and cached["time"].endswith("+00:00")
    assert cached["messages"][0] == {"role": "system", "content": "answer briefly"}


def test_rerun_sends_no_cached_request_and_is_byte_identical(tmp_path, chat_server):
    contents = [f"structure {k}" for k in range(5)]
    _, _, out = stage(tmp_path, chat_server, contents)
    first = out.read_bytes()
    assert chat_server.count() == 5
    info, _, out = stage(tmp_path, chat_server, contents + ["a new one"])
    assert chat_server.count() == 6, "only the new prompt may be sent"
    assert info["n_cached"] == 5 and info["n_new"] == 1
    # A parameter is part of the key: changing it asks again.
    stage(tmp_path, chat_server, contents, params={"temperature": 0.5})
    assert chat_server.count() == 11
    out.unlink()
    stage(tmp_path, chat_server, contents)
    assert out.read_bytes() == first and chat_server.count() == 11


def test_repeated_prompts_are_separate_samples_in_the_cache(tmp_path, chat_server):
    _, rows, out = stage(tmp_path, chat_server, ["one structure #count"] * 3 + ["other"], params={"temperature": 1.0})
    first = out.read_bytes()
    assert sorted(r["response"] for r in rows[:3]) == [f"echo: one structure #count #{k}" for k in range(3)]
    info, _, out = stage(tmp_path, chat_server, ["one structure #count"] * 3 + ["other"], params={"temperature": 1.0})
    assert info["n_cached"] == 4 and chat_server.count() == 4 and out.read_bytes() == first


def test_429_is_retried_then_answered(tmp_path, chat_server):
    info, rows, _ = stage(tmp_path, chat_server, ["fine", "busy #429once"])
    assert rows[1]["response"] == "echo: busy #429once" and rows[1]["error"] is None
    assert chat_server.count("#429once") == 2 and info["n_failed"] == 0


def test_500_storm_fails_the_item_with_model_and_id_never_dropped(tmp_path, chat_server):
    with pytest.raises(
        GenerationFailedError,
        match=r"model m1: 1 of 3 items failed \(q001\); each item's reason is in \S+/responses/failed/m1.json \(kept after",
    ):
        stage(tmp_path, chat_server, ["a", "broken #500", "c"])
    assert chat_server.count("#500") == 4  # first try + max_retries 3
    # The reasons outlive the failed job's outputs (which Snakemake deletes): a file of their own.
    failed = json.loads((tmp_path / "results/bench/ds/responses/failed/m1.json").read_text())
    assert [f["id"] for f in failed["failed"]] == ["q001"] and "gave up after 4" in failed["failed"][0]["error"]
    assert failed["n_items"] == 3 and failed["model_name"] == "m1" and len(failed["prompts_sha256"]) == 64
    info, rows, _ = stage(tmp_path, chat_server, ["a", "broken #500", "c"], max_failed_fraction=0.5)
    assert [r["id"] for r in rows] == ["q000", "q001", "q002"]
    assert rows[1]["response"] is None
    assert rows[1]["error"].startswith("model m1: item q001: gave up after 4 attempt(s)") and "500" in rows[1]["error"]
    assert rows[0]["response"] == "echo: a" and info["n_failed"] == 1 and info["failed_ids"] == ["q001"]
    assert info["n_cached"] == 2, "the answered items of the failed run were cached"
    assert not (tmp_path / "results/bench/ds/responses/failed/m1.json").exists(), "a job that passes removes it"


def test_slow_reply_past_the_timeout_is_retried_then_fails(tmp_path, chat_server):
    chat_server.slow_s = 1.5
    info, rows, _ = stage(
        tmp_path, chat_server, ["quick", "late #slow"], timeout_s=0.3, max_retries=1, max_failed_fraction=1.0
    )
    assert rows[0]["response"] == "echo: quick"
    assert "item q001" in rows[1]["error"] and "Timeout" in rows[1]["error"]
    assert chat_server.count("#slow") == 2


def test_wrong_route_is_not_retried_and_says_what_to_check(tmp_path, chat_server):
    info, rows, _ = stage(tmp_path, chat_server, ["a"], base_url=chat_server.base_url[:-3], max_failed_fraction=1.0)
    assert "HTTP 404" in rows[0]["error"] and "usually ending in /v1" in rows[0]["error"]
    assert info["n_failed"] == 1 and chat_server.count() == 0  # the 404 came before any answer


def test_a_reply_that_is_not_json_is_a_failure_row(tmp_path, chat_server):
    info, rows, _ = stage(tmp_path, chat_server, ["a", "b #garbage"], max_failed_fraction=1.0)
    assert rows[0]["response"] == "echo: a"
    assert rows[1]["response"] is None and rows[1]["error"].startswith("model m1: item q001:")
    assert info["n_failed"] == 1


def test_missing_key_variable_is_named(tmp_path, chat_server, monkeypatch):
    monkeypatch.delenv("CRUCIBLE_TEST_KEY")
    with pytest.raises(ConfigError, match="environment variable CRUCIBLE_TEST_KEY is not set"):
        stage(tmp_path, chat_server, ["a"])
    assert chat_server.count() == 0


def cli(tmp_path, server, env, **extra):
    prompts = tmp_path / "results/bench/ds/prompts.jsonl"
    out = tmp_path / "results/bench/ds/responses/m1.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "crucible",
        "-v",
        "llm",
        "generate",
        "--prompts",
        str(prompts),
        "--model",
        "m1",
        "--model-spec",
        json.dumps(entry(server, **extra)),
        "--cache-dir",
        str(tmp_path / "results/llm/cache"),
        "--out",
        str(out),
        "--out-record",
        str(out.with_suffix(".json")),
    ]
    log = open(tmp_path / "logs" / "llm.log", "a")
    return subprocess.Popen(cmd, stdout=log, stderr=log, env=env, cwd=tmp_path), out


def test_key_never_written_even_when_the_server_echoes_it(tmp_path, chat_server, venv_env):
    (tmp_path / "logs").mkdir()
    write_prompts(tmp_path / "results/bench/ds/prompts.jsonl", ["hello", "refused #401", "busy #429once", "x #500"])
    env = {
        **venv_env,
        "CRUCIBLE_TEST_KEY": KEY,
        "NO_PROXY": "127.0.0.1",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    proc, out = cli(tmp_path, chat_server, env, max_failed_fraction=1.0)
    assert proc.wait(timeout=120) == 0, (tmp_path / "logs/llm.log").read_text()
    rows = read_responses(out)
    assert "401" in rows[1]["error"] and "***" in rows[1]["error"]
    assert chat_server.count("#401") == 1, "an authentication error is not retried"
    log_text = (tmp_path / "logs/llm.log").read_text()
    assert "retry 1/3" in log_text and "q002" in log_text
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 6
    for path in files:
        data = path.read_bytes()
        assert KEY.encode() not in data and KEY[10:].encode() not in data, path


@pytest.mark.slow
def test_killed_run_resumes_without_asking_again(tmp_path, chat_server, venv_env):
    (tmp_path / "logs").mkdir()
    n = 30
    write_prompts(tmp_path / "results/bench/ds/prompts.jsonl", [f"formula {k}" for k in range(n)])
    env = {
        **venv_env,
        "CRUCIBLE_TEST_KEY": KEY,
        "NO_PROXY": "127.0.0.1",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    chat_server.delay_s = 0.15
    proc, out = cli(tmp_path, chat_server, env, concurrency=1)
    deadline = time.time() + 60
    while chat_server.count() < 10 and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    first = chat_server.count()
    assert 10 <= first < n and not out.exists()
    # A kill during a write can leave a hidden temp file; it is never read as an entry.
    entries = [p for p in (tmp_path / "results/llm/cache").rglob("*.json") if not p.name.startswith(".")]
    assert first - 1 <= len(entries) <= first  # at most the request in flight is lost
    for path in entries:
        json.loads(path.read_text())  # whole entries only; no temp files left as entries
    chat_server.reset()
    proc, out = cli(tmp_path, chat_server, env, concurrency=4)
    assert proc.wait(timeout=120) == 0, (tmp_path / "logs/llm.log").read_text()
    assert chat_server.count() == n - len(entries)
    rows = read_responses(out)
    assert [r["response"] for r in rows] == [f"echo: formula {k}" for k in range(n)]
    info = json.loads(out.with_suffix(".json").read_text())
    assert info["n_cached"] == len(entries) and info["n_new"] == n - len(entries)


# --- issue 22: a server that misbehaves ------------------------------------------------------


def test_malformed_replies_are_retried_item_failures_with_their_reason(tmp_path, chat_server):
    contents = ["#notjson", "#nochoices", "#badtypes", "#notjson #once", "#badtypes #once", "#nochoices #once", "ok"]
    info, rows, _ = stage(tmp_path, chat_server, contents, max_retries=2, max_failed_fraction=1.0)
    by_content = dict(zip(contents, rows))
    assert "the reply is not JSON" in by_content["#notjson"]["error"]
    assert "'upstream overloaded, try later'" in by_content["#notjson"]["error"]
    assert "the reply has no 'choices'" in by_content["#nochoices"]["error"]
    assert "choices[0].message.content is a int, not a string" in by_content["#badtypes"]["error"]
    for broken in ("#notjson", "#nochoices", "#badtypes"):
        assert by_content[broken]["error"].startswith(f"model m1: item {by_content[broken]['id']}: gave up after 3")
        assert chat_server.count(broken) - chat_server.count(f"{broken} #once") == 3, "retried like a 5xx"
        once = by_content[f"{broken} #once"]
        assert once["response"] == f"echo: {broken} #once" and once["error"] is None
        assert chat_server.count(f"{broken} #once") == 2
    assert by_content["ok"]["response"] == "echo: ok"
    assert info["n_failed"] == 3 and info["n_not_sent"] == 0


def test_a_non_json_reply_fails_the_job_cleanly_and_stops_sending(tmp_path, chat_server):
    """The issue's run: one non-JSON 200 among many items, max_failed_fraction 0. Before, the
    client's JSONDecodeError escaped, no response file was written and every queued request
    was still sent with its answer thrown away."""
    contents = [f"formula {k}" for k in range(3)] + ["formula 3 #notjson"] + [f"formula {k}" for k in range(4, 12)]
    with pytest.raises(GenerationFailedError) as err:
        stage(tmp_path, chat_server, contents, concurrency=1, max_retries=1)
    assert "9 of 12 items failed" in str(err.value) and "8 of them not sent" in str(err.value)
    assert chat_server.count() == 3 + 2, "nothing sent once the job was bound to fail"
    rows = read_responses(tmp_path / "results/bench/ds/responses/m1.jsonl")
    assert [r["response"] for r in rows[:3]] == [f"echo: formula {k}" for k in range(3)]
    assert "the reply is not JSON" in rows[3]["error"]
    assert all("not sent: 1 of 12 items had already failed" in r["error"] for r in rows[4:])
    assert len(list((tmp_path / "results/llm/cache").rglob("*.json"))) == 3, "the answers received are cached"
    # The rerun, the server mended, asks only for what was not answered.
    chat_server.reset()
    info, rows, _ = stage(tmp_path, chat_server, [c.replace(" #notjson", "") for c in contents])
    assert chat_server.count() == 9 and info["n_cached"] == 3 and info["n_failed"] == 0


def test_the_deadline_bounds_a_server_that_trickles(tmp_path, chat_server):
    """One byte every 0.2 s never trips the 1 s read timeout; the reply (~300 bytes) would take
    about a minute. Before, the request lasted as long as the server kept sending."""
    info, rows, _ = stage(
        tmp_path,
        chat_server,
        ["#trickle", "#trickleheaders", "#trickle #once", "ok"],
        timeout_s=1.0,
        deadline_s=1.0,
        max_retries=1,
        concurrency=4,
        max_failed_fraction=1.0,
    )
    # each trickling request ended by the deadline (its own error), not by the reply's end
    for row in rows[:2]:
        assert (
            "gave up after 2 attempt(s)" in row["error"] and "no complete reply within deadline_s=1 s" in row["error"]
        )
    assert rows[2]["response"] == "echo: #trickle #once", "the retry after a deadline is answered"
    assert rows[3]["response"] == "echo: ok"
    assert chat_server.count("#trickle") == 2 + 2 + 2


def test_the_deadline_defaults_to_twice_the_timeout():
    from crucible.llm.model_entry import model_spec

    spec = model_spec("m", {"backend": "openai", "model": "x", "base_url": "http://h/v1", "timeout_s": 7})
    assert spec["deadline_s"] == 14.0
    assert model_spec("m", {"backend": "openai", "model": "x", "base_url": "http://h/v1"})["deadline_s"] == 240.0


def test_dropped_connections_are_retried(tmp_path, chat_server):
    info, rows, _ = stage(tmp_path, chat_server, ["#drop #once", "#dropbody #once", "#drop"], max_failed_fraction=1.0)
    assert [r["response"] for r in rows[:2]] == ["echo: #drop #once", "echo: #dropbody #once"]
    assert chat_server.count("#drop #once") == 2 and chat_server.count("#dropbody #once") == 2
    assert "gave up after 4 attempt(s)" in rows[2]["error"] and "Connection" in rows[2]["error"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"[1, 2]", "a JSON list, not an object"),
        (b'{"choices": {"0": 1}}', "no 'choices'"),
        (b'{"choices": [], "error": {"message": "overloaded"}}', "an empty list); it says 'overloaded'"),
        (b'{"choices": ["text"]}', "choices[0].message is not an object"),
        (b'{"choices": [{"message": {"content": "x"}, "finish_reason": 1}]}', "finish_reason is a int"),
        (b'{"choices": [{"message": {"content": "x"}}], "usage": {"completion_tokens": true}}', "not a token count"),
        (b'{"choices": [{"message": {"content": "x"}}], "usage": {"completion_tokens": -1}}', "not a token count"),
        (b'{"choices": [{"message": {"content": "x"}}], "usage": []}', "'usage' is a list"),
        (b'{"choices": [{"message": {"content": "x"}}], "model": 3}', "'model' is a int"),
        (b"\xff\xfe", "not JSON"),
    ],
)
def test_reply_shapes_refused_with_what_is_wrong(body, reason):
    from crucible.llm.openai_backend import MalformedReplyError, parse_reply

    with pytest.raises(MalformedReplyError, match=re.escape(reason)):
        parse_reply(body)
    ok = parse_reply(
        b'{"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}], "usage": {"total_tokens": 3}}'
    )
    assert ok == {
        "content": "x",
        "finish_reason": "stop",
        "model": None,
        "usage": {"total_tokens": 3},
        "system_fingerprint": None,
    }


def test_an_edited_cache_entry_is_asked_again(tmp_path, chat_server):
    contents = [f"structure {k}" for k in range(3)]
    _, _, out = stage(tmp_path, chat_server, contents)
    first = out.read_bytes()
    entry_path = sorted((tmp_path / "results/llm/cache").rglob("*.json"))[0]
    entry = json.loads(entry_path.read_text())
    entry_path.write_text(json.dumps({**entry, "response": "answer: 7"}))  # still valid JSON
    info, _, out = stage(tmp_path, chat_server, contents)
    assert chat_server.count() == 4 and info["n_cached"] == 2 and info["n_new"] == 1
    assert out.read_bytes() == first, "the edited answer was not used"
    assert json.loads(entry_path.read_text())["response"] == entry["response"], "and it was replaced"


def test_a_full_disk_names_the_path_and_stops_sending(tmp_path, chat_server, monkeypatch):
    import errno

    import crucible.llm.cache as cache_module
    from crucible.llm.cache import CacheWriteError

    real_write, written = cache_module.write_json, []

    def fills_up(obj, path):
        if len(written) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_write(obj, path)
        written.append(path)

    monkeypatch.setattr(cache_module, "write_json", fills_up)
    with pytest.raises(CacheWriteError) as err:
        stage(tmp_path, chat_server, [f"formula {k}" for k in range(30)], concurrency=1)
    assert re.search(
        r"response cache: cannot write \S+/results/llm/cache/../[0-9a-f]{64}\.json: No space left", str(err.value)
    )
    assert "the job stopped sending requests" in str(err.value)
    assert chat_server.count() <= 4, "nothing more was paid for once the cache could not keep it"
    assert len(list((tmp_path / "results/llm/cache").rglob("*.json"))) == 2


@pytest.mark.slow
def test_two_jobs_sharing_a_cache_pay_once_per_item(tmp_path, chat_server, venv_env):
    """Two benchmarks asking the same 12 prompts at the same time (before: 24 requests)."""
    (tmp_path / "logs").mkdir()
    n = 12
    env = {
        **venv_env,
        "CRUCIBLE_TEST_KEY": KEY,
        "NO_PROXY": "127.0.0.1",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    chat_server.delay_s = 1.0  # 6 s of answers per job: the two overlap
    procs, outs = [], []
    for bench in ("bench-a", "bench-b"):
        prompts = write_prompts(tmp_path / f"results/{bench}/ds/prompts.jsonl", [f"formula {k}" for k in range(n)])
        out = tmp_path / f"results/{bench}/ds/responses/m1.jsonl"
        cmd = [sys.executable, "-m", "crucible", "-v", "llm", "generate", "--prompts", str(prompts), "--model", "m1"]
        cmd += ["--model-spec", json.dumps(entry(chat_server, concurrency=2)), "--cache-dir", str(tmp_path / "cache")]
        cmd += ["--out", str(out), "--out-record", str(out.with_suffix(".json"))]
        log = open(tmp_path / "logs" / f"{bench}.log", "w")
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=log, env=env, cwd=tmp_path))
        outs.append(out)
    for proc, bench in zip(procs, ("bench-a", "bench-b")):
        assert proc.wait(timeout=120) == 0, (tmp_path / "logs" / f"{bench}.log").read_text()
    assert chat_server.count() == n, "each item asked once, by one of the two jobs"
    assert outs[0].read_bytes() == outs[1].read_bytes()
    records = [json.loads(o.with_suffix(".json").read_text()) for o in outs]
    assert sum(r["n_new"] for r in records) == n
    assert sum(r["n_from_other_jobs"] for r in records) > 0, "one job waited for the other's answers"
    assert list((tmp_path / "cache").rglob("*.claim")) == []


def test_each_answer_is_kept_before_the_next_request_is_sent(chat_server):
    """A slow keeper (a loaded machine, a slow disk) never lets requests run ahead of what is
    kept: with one worker, answer k is handed over before request k+1 goes out, so a killed
    job loses only the request in flight."""
    from crucible.llm.files import Prompt
    from crucible.llm.openai_backend import OpenAIBackend

    backend = OpenAIBackend("m1", "tiny-chat", chat_server.base_url, "CRUCIBLE_TEST_KEY", concurrency=1)
    prompts = [Prompt(f"q{k}", ({"role": "user", "content": f"item {k}"},)) for k in range(5)]
    sent_when_kept = []

    def keep(i, completion):
        sent_when_kept.append((i, chat_server.count()))
        time.sleep(0.1)

    out = backend.generate(prompts, {"max_tokens": 4}, on_done=keep)
    assert [c.response for c in out] == [f"echo: item {k}" for k in range(5)]
    assert sent_when_kept == [(k, k + 1) for k in range(5)]
