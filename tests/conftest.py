"""Shared fixtures. The plain helpers and constants they wrap live in tests/helpers.py (import
them from there, not from this file); a few names are re-exported here for older imports.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from helpers import (  # noqa: F401  (re-exported)  # noqa: F401  (used by fixtures below)
    PUBLISHED_DUMMY_MAE,
    REPO,
    SOURCES_FILE,
    TEST_FOLD_SIZES,
    aflow_prototypes_file,
    cache_root,
    clean_task,
    matbench_members,
    write_prompts,
)
from helpers import official_validation as _validation
from helpers import task_formulas as _task_formulas

# Fixtures that fetch real wheels (matbench, crabnet, fairchem-core) from PyPI unless the test
# cache has them: every test using one is marked `network`, so `pytest -m "not network"` runs offline.
NETWORK_FIXTURES = frozenset({"members", "official_validation", "crabnet_wheel", "task_formulas", "peer"})


def pytest_collection_modifyitems(items):
    for item in items:
        if NETWORK_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.network)


@pytest.fixture(scope="session")
def members() -> dict[str, Path]:
    return matbench_members()


@pytest.fixture(scope="session")
def official_validation():
    return _validation()


@pytest.fixture(scope="session")
def crabnet_wheel() -> Path:
    """The crabnet 2.0.8 wheel, fetched and hash-checked by crucible's own fetch stage."""
    return matbench_members()["crabnet-2.0.8"]


@pytest.fixture(scope="session")
def task_formulas() -> dict[str, list[str]]:
    """{task: formulas in file order}, straight from the crabnet wheel."""
    return _task_formulas()


@pytest.fixture(scope="session")
def venv_env() -> dict[str, str]:
    """Environment for subprocesses: this interpreter's scripts (crucible, snakemake) on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


# --- language models (issue 12): a local OpenAI-compatible server and a tiny checkpoint -------

class ChatServer:
    """A real HTTP server on 127.0.0.1 speaking the chat-completions protocol, for the llm tests.

    The last user message chooses the behaviour: ``#429once`` (one 429, then an answer),
    ``#500`` (always 500), ``#slow`` (answers after ``slow_s``), ``#401`` (refuses, echoing the
    key the way hosted APIs do); anything else is answered ``echo: <content>``. Every request is
    recorded (content, Authorization header); ``delay_s`` slows every answer down.
    """

    def __init__(self):
        import http.server
        import threading

        self.requests: list[tuple[str, str]] = []
        self.delay_s = 0.0
        self.slow_s = 1.5
        self.lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status, body, headers=()):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
                auth = self.headers.get("Authorization", "")
                with server.lock:
                    seen = sum(1 for c, _ in server.requests if c == content)
                    server.requests.append((content, auth))
                if server.delay_s:
                    time.sleep(server.delay_s)
                if "#500" in content:
                    return self._send(500, {"error": {"message": "internal error", "type": "server_error"}})
                if "#429once" in content and seen == 0:
                    return self._send(429, {"error": {"message": "rate limited", "type": "rate_limit"}},
                                      [("Retry-After", "0")])
                if "#401" in content:
                    key = auth.removeprefix("Bearer ")
                    return self._send(401, {"error": {"message": f"Incorrect API key provided: {key}",
                                                      "type": "invalid_request_error"}})
                if "#garbage" in content:  # a proxy's error page instead of JSON
                    data = b"<html>bad gateway</html>"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return None
                if "#slow" in content:
                    time.sleep(server.slow_s)
                answer = f"echo: {content}" + (f" #{seen}" if "#count" in content else "")
                self._send(200, {
                    "id": "chatcmpl-test", "object": "chat.completion", "created": 1767225600,
                    "model": f"served/{body['model']}",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": len(content.split()), "completion_tokens": len(answer.split()),
                              "total_tokens": len(content.split()) + len(answer.split())},
                })

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def count(self, needle: str | None = None) -> int:
        with self.lock:
            return sum(1 for c, _ in self.requests if needle is None or needle in c)

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
        self.delay_s = 0.0

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def chat_server():
    server = ChatServer()
    yield server
    server.close()



@pytest.fixture(scope="session")
def tiny_causal_lm(tmp_path_factory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-gpt2"))


def build_tiny_causal_lm(out: Path) -> Path:
    """A randomly initialised 2-layer GPT-2 with a word-level tokenizer and chat template,
    built here (nothing downloaded) and saved as an ordinary checkpoint directory."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    words = ("the a of crystal reaction yield catalyst base solvent ligand answer is and with to in "
             "temperature high low best structure formula oxide metal cubic phase").split()
    specials = ["<pad>", "<unk>", "<eos>"]
    roles = ["<|system|>", "<|user|>", "<|assistant|>"]
    vocab = {t: i for i, t in enumerate(specials + roles + words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>")
    fast.chat_template = ("{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
                          "{% if add_generation_prompt %}<|assistant|> {% endif %}")
    fast.save_pretrained(out)
    torch.manual_seed(0)
    # A wide initialisation, so that greedy decoding does not collapse onto one token and the
    # batched-versus-single comparison in the tests has something to compare.
    config = GPT2Config(vocab_size=len(vocab), n_positions=256, n_embd=32, n_layer=2, n_head=2,
                        initializer_range=0.5, bos_token_id=2, eos_token_id=2, pad_token_id=0)
    GPT2LMHeadModel(config).save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def catalysis_demo(tmp_path_factory) -> Path:
    """The EMT-labelled catalysis demo set in every format (CatBench JSON, Catalysis-Hub raw,
    VASP trees for adsorption, surface and bulk-formation energies)."""
    from crucible.catalysis import demo

    out = tmp_path_factory.mktemp("catalysis_demo")
    demo.main([str(out)])
    return out


# ---- crystal benchmark -------------------------------------------------------------------


@pytest.fixture(scope="session")
def aflow_file() -> Path:
    return aflow_prototypes_file()


CSCL = {  # peers.md §2.6: cubic 4.12 Å, Cs at the origin, Cl at the body centre
    "lattice": [[4.12, 0.0, 0.0], [0.0, 4.12, 0.0], [0.0, 0.0, 4.12]],
    "sites": [{"element": "Cs", "fractional_coordinates": [0.0, 0.0, 0.0]},
              {"element": "Cl", "fractional_coordinates": [0.5, 0.5, 0.5]}],
}


@pytest.fixture
def cscl_ground_truth() -> dict:
    import copy

    return copy.deepcopy(CSCL)
