"""The transformers backend constrained by xgrammar (issue 33), on a randomly initialised tiny
GPT-2 whose vocabulary can spell JSON: unconstrained, it writes noise; constrained, every reply
is JSON in its own prompt's schema, batched as one at a time. Skipped where xgrammar is not
installed (it comes with `make install-llm`, not with the test install)."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest

from crucible.llm.files import Prompt, read_responses
from crucible.llm.generate import run_stage
from crucible.llm.schema_check import schema_violations
from crucible.llm.transformers_backend import TransformersBackend

from helpers import write_prompts

pytest.importorskip("xgrammar")
pytestmark = pytest.mark.slow  # builds a model and compiles grammars: a few seconds

MC = {
    "type": "object",
    "properties": {"answer": {"type": "integer", "enum": [0, 1, 2, 3]}},
    "required": ["answer"],
    "additionalProperties": False,
}
FB = {
    "type": "object",
    "properties": {
        "answer": {
            "type": "object",
            "properties": {"base": {"type": "integer", "enum": [0, 2, 5]}, "solvent": {"type": "integer", "enum": [1]}},
            "required": ["base", "solvent"],
            "additionalProperties": False,
        }
    },
    "required": ["answer"],
    "additionalProperties": False,
}
QUESTIONS = ["the best base", "a cubic oxide", "the yield of the reaction with a catalyst", "ligand solvent"]


@pytest.fixture(scope="module")
def json_lm(tmp_path_factory) -> Path:
    """A random 2-layer GPT-2 whose tokens are prompt words plus every character JSON needs,
    decoded by plain concatenation (what xgrammar assumes of a raw vocabulary)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    out = tmp_path_factory.mktemp("json-gpt2")
    words = "the a of best base cubic oxide yield reaction with catalyst ligand solvent".split()
    chars = list('{}[]":,.-') + list(string.digits) + list(string.ascii_lowercase) + ["answer"]
    specials = ["<pad>", "<unk>", "<eos>", "<|system|>", "<|user|>", "<|assistant|>"]
    tokens = list(dict.fromkeys(specials + words + chars))
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(tokens)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>")
    fast.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
        "{% if add_generation_prompt %}<|assistant|> {% endif %}"
    )
    fast.save_pretrained(out)
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(tokens), n_positions=256, n_embd=32, n_layer=2, n_head=2, initializer_range=0.5,
        bos_token_id=2, eos_token_id=2, pad_token_id=0,
    )  # fmt: skip
    GPT2LMHeadModel(config).save_pretrained(out)
    return out


def prompts(schemas):
    return [
        Prompt(f"q{k}", ({"role": "user", "content": q},), response_schema=s)
        for k, (q, s) in enumerate(zip(QUESTIONS, schemas))
    ]


def test_every_reply_follows_its_own_schema_and_batching_changes_nothing(json_lm):
    items = prompts([MC, FB, MC, FB])
    params = {"max_tokens": 40, "temperature": 0.0}
    free = TransformersBackend("tiny", str(json_lm), batch_size=4, device="cpu").generate(items, params)
    assert len(schema_violations(items, free)) == 4, "unconstrained, the random model writes no valid answer"
    batched = TransformersBackend("tiny", str(json_lm), batch_size=4, device="cpu", structured_output=True)
    single = TransformersBackend("tiny", str(json_lm), batch_size=1, device="cpu", structured_output=True)
    got, one = batched.generate(items, params), single.generate(items, params)
    assert [c.response for c in got] == [c.response for c in one]
    assert schema_violations(items, got) == []
    assert all(c.finish_reason == "stop" for c in got), "the grammar ends the reply with end-of-sequence"
    answers = [json.loads(c.response) for c in got]
    assert all(0 <= a["answer"] <= 3 for a in answers[0::2])
    assert all(a["answer"]["base"] in (0, 2, 5) and a["answer"]["solvent"] == 1 for a in answers[1::2])
    version = __import__("importlib.metadata").metadata.version("xgrammar")
    assert batched.model.endswith(f":xgrammar-{version}:grammar4")
    # the properties come in the order of "required" (the prompt's; a prompt file sorts its keys)
    ordered = {**FB, "properties": {"answer": {**FB["properties"]["answer"], "required": ["solvent", "base"]}}}
    reply = batched.generate(prompts([ordered]), params)[0].response
    assert reply.index('"solvent"') < reply.index('"base"'), reply


def test_stage_records_the_engine_and_counts_replies_cut_off(json_lm, tmp_path):
    path = write_prompts(tmp_path / "prompts.jsonl", QUESTIONS, schemas=[MC, FB, MC, FB])
    entry = {
        "backend": "transformers",
        "path": str(json_lm),
        "device": "cpu",
        "structured_output": True,
        "params": {"max_tokens": 4},  # {"answer": ... needs more for the fill-in-blank answers
    }
    out = tmp_path / "r.jsonl"
    info = run_stage(path, "tiny", entry, out=out, record=tmp_path / "r.json", cache_dir=tmp_path / "cache")
    assert info["structured_output"]["enabled"] is True
    assert info["structured_output"]["enforced_by"].startswith("xgrammar ")
    rows = read_responses(out)
    assert info["n_cut_off"] == sum(r["finish_reason"] == "length" for r in rows) >= 2
    assert info["n_not_matching_schema"] == 0, "a cut-off reply is not counted as breaking its schema"
    assert info["checkpoint_file"] == {"sha256": None, "role": None}, "a directory has no single file hash"


def test_a_schema_the_grammar_does_not_enforce_stops_the_job_naming_the_item(json_lm):
    from crucible.llm.backend import StructuredOutputError

    ranged = {**MC, "properties": {"answer": {"type": "integer", "minimum": 0, "maximum": 3}}}
    backend = TransformersBackend("tiny", str(json_lm), device="cpu", structured_output=True)
    with pytest.raises(StructuredOutputError, match=r"item q0: response_schema .*maximum, minimum not enforced"):
        backend.generate(prompts([ranged]), {"max_tokens": 8})
