"""Issue 52 items 5-7: a server's reply is bounded while it is read (gzip bombs included), an
echoed key is scrubbed from everything written, a reply naming another model is warned about
and cached under the id that served it. Against ChatServer on 127.0.0.1, through run_stage and
through the CLI (`crucible llm generate`). The DAG run: test_workflow_llm.py. Peak memory, before
and after: benchmarks/attack_llm_server.py."""

from __future__ import annotations

import gzip
import http.server
import json
import os
import subprocess
import threading
import zlib

import pytest

from crucible.core.bounded_body import BodyTooLargeError, BoundedDecoder, UnsupportedEncodingError
from crucible.core.errors import ConfigError
from crucible.core.secrets import scrub_key
from crucible.llm.cache import request_key
from crucible.llm.files import read_responses
from crucible.llm.generate import run_stage
from crucible.llm.model_entry import model_spec
from crucible.sources import downloads

from helpers import key_encodings, write_prompts

KEY = "sk-test/Se+cret=0123456789abcdefXYZ"  # a / and a + that URL and JSON encodings change


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("CRUCIBLE_TEST_KEY", KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def entry(server, **extra):
    return {
        "backend": "openai",
        "model": "tiny-chat",
        "base_url": server.base_url,
        "api_key_env": "CRUCIBLE_TEST_KEY",
        "concurrency": 2,
        "timeout_s": 10,
        "max_retries": 2,
        "backoff_s": 0.01,
        "max_backoff_s": 0.02,
        "max_failed_fraction": 1.0,
        "params": {"temperature": 0, "max_tokens": 16},
        **extra,
    }


def stage(tmp_path, server, contents, **extra):
    prompts = write_prompts(tmp_path / "prompts.jsonl", contents)
    out = tmp_path / "responses/m.jsonl"
    info = run_stage(
        prompts, "m", entry(server, **extra), out=out, record=out.with_suffix(".json"), cache_dir=tmp_path / "cache"
    )
    return info, read_responses(out)


def cache_entries(tmp_path):
    return [json.loads(p.read_text()) for p in sorted((tmp_path / "cache").rglob("*.json"))]


# --- item 5: bounded replies -----------------------------------------------------------------


def test_the_decoder_never_holds_more_than_the_limit_of_a_gzip_bomb():
    body = gzip.compress(b"a" * (64 << 20), compresslevel=9)  # 64 MiB in about 64 kB
    decoder = BoundedDecoder(1 << 20, "gzip", "the reply from http://h:1/v1")
    held = 0
    with pytest.raises(BodyTooLargeError, match=r"the reply from http://h:1/v1 is larger than the limit of 1 MiB"):
        for k in range(0, len(body), 8192):
            held = max(held, len(decoder.feed(body[k : k + 8192])))
    assert decoder.total == (1 << 20) + 1 and held <= (1 << 20) + 1
    # a body within the limit comes out whole, whatever the encoding
    text = json.dumps({"a": "b" * 5000}).encode()
    for coding, raw in (
        ("gzip", gzip.compress(text)),
        ("deflate", zlib.compress(text)),
        ("deflate", zlib.compress(text)[2:-4]),  # raw deflate, as some servers send it
        ("identity", text),
        (None, text),
    ):
        d = BoundedDecoder(1 << 20, coding, "r")
        assert b"".join(d.decode([raw[:100], raw[100:]])) == text, coding
    with pytest.raises(BodyTooLargeError):
        BoundedDecoder(1000, None, "r").check_length("1001")
    with pytest.raises(UnsupportedEncodingError, match="Content-Encoding 'br' was not asked for"):
        BoundedDecoder(1000, "br", "r")


def test_a_gzip_bomb_fails_its_item_at_once_naming_the_server_and_the_limit(tmp_path, chat_server):
    chat_server.bomb_bytes = 32 << 20
    info, rows = stage(tmp_path, chat_server, ["fine", "boom #gzipbomb"], max_reply_bytes=1 << 20)
    assert rows[0]["response"] == "echo: fine"
    error = rows[1]["error"]
    assert f"the reply from {chat_server.base_url} is larger than the limit of 1 MiB (1048576 bytes)" in error
    assert "(after gzip decoding)" in error and "llm.models.m.max_reply_bytes" in error
    assert chat_server.count("#gzipbomb") == 1, "not retried: the same request gets the same reply"
    assert [e["response"] for e in cache_entries(tmp_path)] == ["echo: fine"]
    assert info["n_failed"] == 1


def test_a_small_gzip_encoded_reply_is_read(tmp_path, chat_server):
    chat_server.bomb_bytes = 900
    _, rows = stage(tmp_path, chat_server, ["small #gzipbomb"])
    assert rows[0]["response"] == "a" * 900 and rows[0]["error"] is None


def test_a_reply_over_the_default_limit_and_an_answer_longer_than_max_tokens_are_refused(tmp_path, chat_server):
    chat_server.answer_text = lambda c: "a" * (5 << 20) if "huge" in c else "word " * 400
    info, rows = stage(tmp_path, chat_server, ["huge", "long"])
    assert "is larger than the limit of 4 MiB (4194304 bytes)" in rows[0]["error"], "the default limit"
    assert "has 2000 characters, more than max_tokens=16 tokens can hold" in rows[1]["error"]
    assert "the server did not honour max_tokens" in rows[1]["error"]
    assert chat_server.count() == 2 and cache_entries(tmp_path) == []
    # the limit is the config's
    chat_server.answer_text = "b" * 3000
    _, rows = stage(tmp_path, chat_server, ["x"], max_reply_bytes=2048, params={"max_tokens": 512})
    assert "larger than the limit of 2048 bytes;" in rows[0]["error"], rows[0]["error"]


def test_max_reply_bytes_is_an_openai_key_that_keeps_the_entry_hash_when_unset():
    with pytest.raises(ConfigError, match="llm.models.r.max_reply_bytes: .* a replay model reads no reply"):
        model_spec("r", {"backend": "replay", "path": "x.jsonl", "max_reply_bytes": 4096})
    spec = model_spec("o", {"backend": "openai", "model": "m", "base_url": "http://h:1/v1"})
    assert "max_reply_bytes" not in spec, "a default in the spec would change every entry's hash"


class _Files(http.server.BaseHTTPRequestHandler):
    payloads: dict[str, tuple[bytes, str | None]] = {}

    def log_message(self, *args):
        pass

    def do_GET(self):
        data, coding = self.payloads[self.path]
        self.send_response(200)
        if coding:
            self.send_header("Content-Encoding", coding)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def files_server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_downloads_are_bounded_by_their_published_size_and_inflated_with_it(tmp_path, files_server, monkeypatch):
    text = b"x,y\n" * 5000
    _Files.payloads = {
        "/ok.csv": (gzip.compress(text), "gzip"),  # GitHub's raw host gzips text files
        "/bomb.csv": (gzip.compress(b"0" * (16 << 20)), "gzip"),
        "/plain.bin": (b"z" * 5000, None),
    }
    got = downloads._http_download({"url": f"{files_server}/ok.csv", "filename": "ok.csv", "size": len(text)}, tmp_path)
    assert got.read_bytes() == text, "decoded, as requests did: the pins are of the decoded bytes"
    spec = {"url": f"{files_server}/bomb.csv", "filename": "bomb.csv", "size": 20000}
    with pytest.raises(BodyTooLargeError, match=r"the download of .*/bomb.csv is larger than the limit .*20000 bytes"):
        downloads._http_download(spec, tmp_path)
    assert (tmp_path / "bomb.csv").stat().st_size <= 20000
    monkeypatch.setattr(downloads, "MAX_DOWNLOAD_BYTES", 4096)  # no published size: the module's bound
    with pytest.raises(BodyTooLargeError, match="MAX_DOWNLOAD_BYTES"):
        downloads._http_download({"url": f"{files_server}/plain.bin", "filename": "plain.bin"}, tmp_path)


# --- item 6: an echoed key never reaches disk -------------------------------------------------


def test_scrub_key_catches_every_encoding_and_leaves_other_text():
    for name, form in key_encodings(KEY).items():
        assert scrub_key(f"before {form} after", KEY) == "before *** after", name
    assert scrub_key("Bearer " + KEY, KEY) == "Bearer ***"
    plain = "aGVsbG8gd29ybGQ= sk-other-key-0123456789 the yield is 42 %"
    assert scrub_key(plain, KEY) == plain


def test_the_cli_writes_no_form_of_an_echoed_key(tmp_path, chat_server, venv_env):
    """`crucible llm generate` against a server that echoes its Authorization header in every
    answer: no file of the run (responses, record, cache entries, the log) holds the key in any form."""
    prompts = write_prompts(tmp_path / "prompts.jsonl", ["#echoauth one", "#echoauth two", "plain"])
    spec = json.dumps(entry(chat_server, params={"max_tokens": 256}))
    env = {
        **venv_env,
        "CRUCIBLE_TEST_KEY": KEY,
        "NO_PROXY": "127.0.0.1",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    with open(tmp_path / "job.log", "wb") as log:
        cmd = ["crucible", "llm", "generate", "--prompts", str(prompts), "--model", "m", "--model-spec", spec]
        cmd += ["--out", "responses/m.jsonl", "--out-record", "responses/m.json", "--cache-dir", "cache"]
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, stdout=log, stderr=log)
    said = (tmp_path / "job.log").read_text()
    assert proc.returncode == 0, said[-3000:]
    assert chat_server.requests[0][1] == f"Bearer {KEY}", "the server did get the key"
    rows = read_responses(tmp_path / "responses/m.jsonl")
    assert rows[0]["response"].startswith("you sent 'Bearer ***'; exact: ***; base64: ***"), rows[0]["response"]
    assert rows[2]["response"] == "echo: plain"
    assert said.count("the server's answer held the API key (from CRUCIBLE_TEST_KEY, raw or encoded)") == 2
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len([p for p in written if p.parent.parent.name == "cache"]) == 3
    for path in written:
        data = path.read_text(errors="replace")
        held = [name for name, form in key_encodings(KEY).items() if form in data]
        if path.name != "prompts.jsonl":
            assert held == [], f"{path.relative_to(tmp_path)} holds the key as {held}"


def test_a_key_in_a_cache_entry_of_an_older_crucible_does_not_reach_the_response_file(tmp_path, chat_server):
    from crucible.llm.cache import ResponseCache
    from crucible.llm.files import Completion

    messages = [{"role": "user", "content": "q"}]
    params = {"max_tokens": 16, "temperature": 0.0}
    ResponseCache(tmp_path / "cache").put(
        request_key("openai", "tiny-chat", messages, params), backend="openai", model_name="m", model="tiny-chat",
        messages=messages, params=params, completion=Completion("q", response=f"echoed {KEY}", model_id="tiny-chat"),
    )  # fmt: skip
    info, rows = stage(tmp_path, chat_server, ["q"])
    assert info["n_cached"] == 1 and chat_server.count() == 0, "answered from the cache, nothing sent"
    assert rows[0]["response"] == "echoed ***"
    assert KEY not in (tmp_path / "responses/m.jsonl").read_text() + (tmp_path / "responses/m.json").read_text()


# --- item 7: the served model is the configured one --------------------------------------------


def test_a_reply_from_another_model_is_warned_about_recorded_and_cached_under_its_id(tmp_path, chat_server, caplog):
    chat_server.served_model = "impostor-1b"
    info, rows = stage(tmp_path, chat_server, ["q one", "q two"])
    assert [r["response"] for r in rows] == ["echo: q one", "echo: q two"]
    assert info["model_ids"] == ["impostor-1b"] and info["model_ids_not_configured"] == ["impostor-1b"]
    record = json.loads((tmp_path / "responses/m.json").read_text())
    assert record["model_ids_not_configured"] == ["impostor-1b"]
    warning = (
        "the server was asked for model 'tiny-chat', but another model answered 2 of 2 items ('impostor-1b' answered 2)"
    )
    assert warning in caplog.text
    entries = cache_entries(tmp_path)
    assert {e["model"] for e in entries} == {"impostor-1b"} and {e["model_name"] for e in entries} == {"m"}
    messages = [{"role": "user", "content": "q one"}]
    params = {"max_tokens": 16, "temperature": 0.0}
    assert any(e["key"] == request_key("openai", "impostor-1b", messages, params) for e in entries)
    # the configured model's next run finds no answer of the impostor's and asks again
    chat_server.served_model = None
    caplog.clear()
    info, _ = stage(tmp_path, chat_server, ["q one", "q two"])
    assert info["n_cached"] == 0 and info["n_new"] == 2 and info["model_ids_not_configured"] == []
    assert "another model answered" not in caplog.text
    # a dated snapshot of the configured alias is the configured model (OpenAI answers gpt-4o so)
    chat_server.served_model = "tiny-chat-2024-08-06"
    info, _ = stage(tmp_path, chat_server, ["q three"])
    assert info["model_ids_not_configured"] == [] and "another model answered" not in caplog.text


def test_a_cached_answer_of_another_model_is_not_taken_for_the_configured_ones(tmp_path, chat_server, caplog):
    """An entry written before issue 52 (an impostor's answer under the configured key)."""
    from crucible.llm.cache import ResponseCache
    from crucible.llm.files import Completion

    messages = [{"role": "user", "content": "q"}]
    params = {"max_tokens": 16, "temperature": 0.0}
    key = request_key("openai", "tiny-chat", messages, params)
    ResponseCache(tmp_path / "cache").put(
        key, backend="openai", model_name="m", model="tiny-chat", messages=messages, params=params,
        completion=Completion("q", response="impostor's answer", model_id="impostor-1b"),
    )  # fmt: skip
    info, rows = stage(tmp_path, chat_server, ["q"])
    assert rows[0]["response"] == "echo: q" and info["n_cached"] == 0
    assert "was served by 'impostor-1b', not the configured 'tiny-chat'; not taken, asking again" in caplog.text
