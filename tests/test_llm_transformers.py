"""The transformers backend on CPU with a tiny randomly initialised GPT-2 built in conftest
(nothing downloaded): chat template applied, batched generation equal to one-at-a-time,
deterministic, stop strings, the cache key following the checkpoint's content."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from crucible.core.errors import ConfigError, HashMismatchError
from crucible.llm.files import Prompt, read_responses
from crucible.llm.generate import run_stage
from crucible.llm.transformers_backend import GGUF_LOADER, TransformersBackend, checkpoint_fingerprint

from helpers import write_prompts

pytestmark = pytest.mark.slow  # imports transformers and builds a model: a few seconds

QUESTIONS = [
    "the best base",
    "the yield of the reaction with a catalyst in solvent",
    "a cubic oxide",
    "temperature high",
    "the formula of the metal oxide with a cubic phase and low temperature",
    "ligand",
]


def prompts():
    return [
        Prompt(f"q{k}", ({"role": "system", "content": "answer"}, {"role": "user", "content": q}))
        for k, q in enumerate(QUESTIONS)
    ]


def test_batched_generation_equals_one_at_a_time(tiny_causal_lm):
    params = {"max_tokens": 8, "temperature": 0.0}
    batched = TransformersBackend("tiny", str(tiny_causal_lm), batch_size=4, device="cpu").generate(prompts(), params)
    single = TransformersBackend("tiny", str(tiny_causal_lm), batch_size=1, device="cpu").generate(prompts(), params)
    assert [c.id for c in batched] == [f"q{k}" for k in range(len(QUESTIONS))]
    assert [c.response for c in batched] == [c.response for c in single]
    texts = [c.response for c in batched]
    assert len(set(texts)) > 1, "a random model still answers different prompts differently"
    for c in batched:
        assert c.error is None and 0 < c.usage["completion_tokens"] <= 8
        assert c.finish_reason in ("stop", "length")
    # The chat template was applied: its role markers are counted in the prompt tokens.
    first = batched[0]
    assert first.usage["prompt_tokens"] == len("<|system|> answer <|user|> the best base <|assistant|>".split())


def test_stop_string_cuts_the_answer(tiny_causal_lm):
    backend = TransformersBackend("tiny", str(tiny_causal_lm), batch_size=6, device="cpu")
    free = backend.generate(prompts(), {"max_tokens": 8, "temperature": 0.0})
    word = free[1].response.split()[1] if len(free[1].response.split()) > 1 else free[1].response.split()[0]
    cut = backend.generate(prompts(), {"max_tokens": 8, "temperature": 0.0, "stop": [word]})
    assert word not in cut[1].response and free[1].response.startswith(cut[1].response.rstrip())


def test_stage_writes_responses_record_and_cache(tiny_causal_lm, tmp_path):
    path = write_prompts(tmp_path / "prompts.jsonl", QUESTIONS, system="answer")
    entry = {"backend": "transformers", "path": str(tiny_causal_lm), "batch_size": 3, "params": {"max_tokens": 6}}
    out, record = tmp_path / "responses/tiny.jsonl", tmp_path / "responses/tiny.json"
    info = run_stage(path, "tiny", entry, out=out, record=record, cache_dir=tmp_path / "cache")
    first = out.read_bytes()
    assert info["device"] == "cpu" and info["dtype"] == "float32" and info["n_new"] == len(QUESTIONS)
    assert info["model"].startswith(tiny_causal_lm.name + "@") and info["new_completion_tokens_per_s"] > 0
    info2 = run_stage(path, "tiny", entry, out=out, record=record, cache_dir=tmp_path / "cache")
    assert info2["n_cached"] == len(QUESTIONS) and info2["n_new"] == 0 and out.read_bytes() == first
    assert [r["id"] for r in read_responses(out)] == [f"q{k:03d}" for k in range(len(QUESTIONS))]


def test_fingerprint_follows_content_not_location(tiny_causal_lm, tmp_path):
    moved = tmp_path / tiny_causal_lm.name
    shutil.copytree(tiny_causal_lm, moved)
    assert checkpoint_fingerprint(moved) == checkpoint_fingerprint(tiny_causal_lm)
    cfg = json.loads((moved / "config.json").read_text())
    cfg["n_positions"] = 128
    (moved / "config.json").write_text(json.dumps(cfg))
    assert checkpoint_fingerprint(moved) != checkpoint_fingerprint(tiny_causal_lm)


def test_a_gguf_file_is_named_by_its_content(tmp_path):
    one, other = tmp_path / "a" / "m.Q4_1.gguf", tmp_path / "b" / "m.Q4_1.gguf"
    for path, body in ((one, b"GGUF" + bytes(range(256)) * 40000), (other, b"GGUF" + bytes(range(256)) * 40000)):
        path.parent.mkdir()
        path.write_bytes(body)
    assert checkpoint_fingerprint(one) == checkpoint_fingerprint(other), "moving the file keeps its name"
    backend = TransformersBackend("m", str(one))
    # ... and by how crucible builds its tokenizer (GGUF_LOADER), which answers depend on too
    assert backend.gguf and backend.model == f"m.Q4_1.gguf@sha256:{checkpoint_fingerprint(one)}:{GGUF_LOADER}"
    assert checkpoint_fingerprint(one) == hashlib.sha256(one.read_bytes()).hexdigest()  # every byte
    with open(other, "r+b") as fh:  # one middle byte: a fine-tune of one tensor
        fh.seek(len(b"GGUF") + 256 * 20000)
        fh.write(b"\xff")
    assert checkpoint_fingerprint(one) != checkpoint_fingerprint(other)


def test_a_pinned_checkpoint_is_named_by_its_role_and_checked(tmp_path, monkeypatch):
    """A file where the fetch stage puts a role's file is named by the role and its pinned
    SHA-256, and refused when it no longer matches the pin."""
    from crucible.sources import pinned_files
    from crucible.sources import pins as sources_file

    monkeypatch.setenv("CRUCIBLE_HASH_CACHE", str(tmp_path / "hash-cache"))
    body = b"GGUF" + bytes(range(256)) * 4000
    digest = hashlib.sha256(body).hexdigest()
    doc = pinned_files.load_sources()
    pin = pinned_files.find_pin("llm/smollm2-135m-instruct-q4_1", doc)
    doc["artifacts"][pin.artifact]["members"][pin.member]["sha256"] = digest
    monkeypatch.setattr(sources_file, "sources_doc", lambda s=None: doc)
    monkeypatch.setattr(pinned_files, "sources_doc", lambda s=None: doc)
    path = tmp_path / "resources" / pin.location
    path.parent.mkdir(parents=True)
    path.write_bytes(body)
    assert TransformersBackend("smollm2", str(path)).model == f"{pin.role}@sha256:{digest}:{GGUF_LOADER}"
    path.write_bytes(body[:-1] + b"x")
    with pytest.raises(HashMismatchError, match="llm/smollm2-135m-instruct-q4_1"):
        TransformersBackend("smollm2", str(path))


def test_no_chat_template_or_no_checkpoint_is_a_named_error(tiny_causal_lm, tmp_path):
    with pytest.raises(ConfigError, match=r"is neither a checkpoint directory \(no config.json\) nor a .gguf file"):
        TransformersBackend("tiny", str(tmp_path))
    with pytest.raises(ConfigError, match=r"llm.models.tiny.path: \S+/missing.gguf does not exist"):
        TransformersBackend("tiny", str(tmp_path / "missing.gguf"))
    bare = tmp_path / "bare"
    shutil.copytree(tiny_causal_lm, bare)
    (bare / "chat_template.jinja").unlink()
    cfg = json.loads((bare / "tokenizer_config.json").read_text())
    cfg.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="llm.models.tiny: the checkpoint .* has no chat template"):
        TransformersBackend("tiny", str(bare), device="cpu").load()


def test_a_stopped_job_runs_no_further_batch(tiny_causal_lm):
    from crucible.llm.backend import FailureBudget

    backend = TransformersBackend("tiny", str(tiny_causal_lm), batch_size=2, device="cpu")
    budget = FailureBudget(0.0, len(QUESTIONS))
    seen = []

    def on_done(i, c):
        seen.append(i)
        if len(seen) == 2:  # after the first batch, the stage stops the job (e.g. its cache broke)
            budget.stop("the response cache cannot be written")

    out = backend.generate(prompts(), {"max_tokens": 4, "temperature": 0.0}, on_done=on_done, budget=budget)
    assert sum(c.response is not None for c in out) == 2 and len(seen) == len(QUESTIONS)
    assert sorted(budget.not_sent_ids) == sorted(c.id for c in out if c.response is None)
    assert all("not sent: the response cache cannot be written" in c.error for c in out if c.response is None)
