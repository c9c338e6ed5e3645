"""Issue 52 items 5-7, measured through the CLI: a hostile OpenAI-compatible server on 127.0.0.1
and `crucible llm generate` against it, one case at a time.

    .venv/bin/python benchmarks/attack_llm_server.py --workdir /tmp/attack [--case gzip-bomb ...]

Cases: ``gzip-bomb`` (``Content-Encoding: gzip``, about 2 MB inflating to ``--bomb-gb`` GB),
``big-reply`` (a 50 MB answer to ``max_tokens: 64``, 3 items), ``echo-key`` (the Authorization
header echoed in the answer, raw and encoded), ``other-model`` (the reply names another model).
For each: the exit code, the peak RSS of the crucible process (/usr/bin/time), the bytes written
under the run folder, the files there holding the key or one of its encodings, and the lines of
the job's stderr that warn or fail. Nothing here asserts; tests/test_llm_reply_bounds.py does.
"""

from __future__ import annotations

import argparse
import base64
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import zlib
from pathlib import Path
from urllib.parse import quote

KEY = "sk-attack-" + "Zq81xWv03Lk2mNn4Pp5Rr6TtYy"
MB = 1 << 20


def key_forms(key: str) -> dict[str, str]:
    return {
        "exact": key,
        "base64": base64.b64encode(key.encode()).decode(),
        "basic user:key": base64.b64encode(f"user:{key}".encode()).decode(),
        "basic :key": base64.b64encode(f":{key}".encode()).decode(),
        "url-encoded": quote(key, safe=""),
        "json-escaped": json.dumps(key)[1:-1],
    }


def gzip_bomb(inflated: int) -> tuple[bytes, int]:
    """A chat completion whose content is ``inflated`` bytes of 'a', gzip-compressed by repeating
    one fully flushed deflate segment (no 2 GB buffer is ever built here)."""
    prefix = b'{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"'
    suffix = b'"}}],"usage":{"prompt_tokens":1,"completion_tokens":64,"total_tokens":65}}'
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = c.compress(prefix) + c.flush(zlib.Z_FULL_FLUSH)
    chunk = b"a" * MB
    seg = c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
    n = max(1, inflated // MB)
    tail = c.compress(suffix) + c.flush(zlib.Z_FINISH)
    crc = zlib.crc32(prefix)
    for _ in range(n):
        crc = zlib.crc32(chunk, crc)
    crc = zlib.crc32(suffix, crc)
    size = len(prefix) + n * MB + len(suffix)
    body = head + seg * n + tail[:-8] + crc.to_bytes(4, "little") + (size & 0xFFFFFFFF).to_bytes(4, "little")
    return body, size


class Server:
    def __init__(self, case: str, bomb_bytes: int):
        self.case = case
        self.bomb = gzip_bomb(bomb_bytes)[0] if case == "gzip-bomb" else None
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                auth = self.headers.get("Authorization", "")
                key = auth.removeprefix("Bearer ")
                headers = [("Content-Type", "application/json")]
                if server.case == "gzip-bomb":
                    data = server.bomb
                    headers.append(("Content-Encoding", "gzip"))
                else:
                    content, model = "ok", body["model"]
                    if server.case == "big-reply":
                        content = "a" * (50 * MB)
                    elif server.case == "echo-key":
                        forms = key_forms(key)
                        content = f"you sent {auth}; " + "; ".join(f"{k}={v}" for k, v in forms.items())
                        forms["basic"] = "Basic " + base64.b64encode(f"alice:{key}".encode()).decode()
                        content += "; " + forms["basic"]
                    elif server.case == "other-model":
                        model = "cheap-other-model-1b"
                    reply = {
                        "id": "x",
                        "object": "chat.completion",
                        "model": model,
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 64, "total_tokens": 65},
                    }
                    data = json.dumps(reply).encode()
                self.send_response(200)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def _holds(path: Path, needle: bytes) -> bool:
    """Whether ``path`` holds ``needle``, read in pieces (a file may be gigabytes)."""
    tail = b""
    with open(path, "rb") as fh:
        while piece := fh.read(8 * MB):
            if needle in tail + piece:
                return True
            tail = piece[-len(needle) :]
    return False


def run_case(case: str, workdir: Path, bomb_gb: float) -> dict:
    run = workdir / case
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    server = Server(case, int(bomb_gb * 1024 * MB))
    n = 1 if case == "gzip-bomb" else 3
    prompts = run / "prompts.jsonl"
    prompts.write_text(
        "".join(
            json.dumps({"id": f"q{k}", "messages": [{"role": "user", "content": f"item {k}"}], "meta": {}}) + "\n"
            for k in range(n)
        )
    )
    spec = {
        "backend": "openai",
        "model": "tiny-chat",
        "base_url": server.base_url,
        "api_key_env": "ATTACK_KEY",
        "max_retries": 0,
        "timeout_s": 60,
        "max_failed_fraction": 1.0,
        "params": {"max_tokens": 64},
    }
    cmd = [
        "crucible", "llm", "generate", "--prompts", str(prompts), "--model", "m", "--model-spec", json.dumps(spec),
        "--out", str(run / "responses/m.jsonl"), "--out-record", str(run / "responses/m.json"),
        "--cache-dir", str(run / "cache"),
    ]  # fmt: skip
    env = {**os.environ, "ATTACK_KEY": KEY, "NO_PROXY": "127.0.0.1"}
    # /usr/bin/time, not os.wait4: a forked child starts with its parent's peak RSS on Linux
    timed = ["/usr/bin/time", "-f", "%M", "-o", str(workdir / f"{case}.maxrss_kb"), *cmd]
    with open(run / "stderr.log", "wb") as err:
        code = subprocess.run(timed, cwd=run, env=env, stdout=err, stderr=err).returncode
    peak_kb = int((workdir / f"{case}.maxrss_kb").read_text().split()[-1])
    server.httpd.shutdown()
    files = [p for p in run.rglob("*") if p.is_file()]
    holding = {}
    for p in files:
        found = [k for k, v in key_forms(KEY).items() if _holds(p, v.encode())]
        if found:
            holding[str(p.relative_to(run))] = found
    stderr = (run / "stderr.log").read_text(errors="replace")
    said = [line[:300] for line in stderr.splitlines() if "WARNING" in line or "ERROR" in line or "Error" in line]
    record = run / "responses/m.json"
    served = json.loads(record.read_text()).get("model_ids") if record.exists() else None
    return {
        "case": case,
        "exit": code,
        "peak_rss_mb": round(peak_kb / 1024, 1),
        "bytes_written": sum(p.stat().st_size for p in files if p.name != "stderr.log" and p != prompts),
        "files_with_key": holding,
        "record_model_ids": served,
        "said": said[:6],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--case", action="append", choices=["gzip-bomb", "big-reply", "echo-key", "other-model"])
    parser.add_argument("--bomb-gb", type=float, default=2.0)
    args = parser.parse_args()
    for case in args.case or ["gzip-bomb", "big-reply", "echo-key", "other-model"]:
        print(json.dumps(run_case(case, args.workdir, args.bomb_gb), indent=1), flush=True)


if __name__ == "__main__":
    sys.exit(main())
