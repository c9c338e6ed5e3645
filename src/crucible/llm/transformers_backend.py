"""A local checkpoint run inside the job with ``transformers``: CUDA with bf16 when present, else CPU.

Weights are never downloaded: the checkpoint is a directory, or a single GGUF file (llama.cpp's
format, which transformers dequantizes on load with the ``gguf`` package; tokenizer and chat
template come from its metadata), loaded with ``local_files_only`` and the hub switched
offline, so a missing file is an error instead of a silent download on a compute node. The tokenizer's chat template turns messages into text; prompts are sorted by
length and generated in left-padded batches, then put back in the prompt set's order.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crucible.core.errors import ConfigError
from crucible.llm.files import Completion, Prompt, schema_in_answer_order

log = logging.getLogger(__name__)


def checkpoint_fingerprint(path: str | os.PathLike) -> str:
    """The full SHA-256 of every byte the loader reads: the file, or every file of the folder
    (:func:`crucible.core.fingerprint.checkpoint_sha256`, cached by stat so a rerun reads nothing).
    A fine-tune that changes one middle tensor changes it; moving the checkpoint does not."""
    from crucible.core.fingerprint import checkpoint_sha256

    return checkpoint_sha256(path)


def checkpoint_identity(path: str | os.PathLike) -> str:
    """``<role>@sha256:<hex>`` for a file that is a role of config/sources.yaml (checked against
    its pin first: an edited one stops here), else ``<file or folder name>@sha256:<hex>``."""
    from crucible.sources.pinned_files import pin_at, pinned

    path = Path(path)
    found = pin_at(path) if path.is_file() else None
    if found is not None:
        pin, resources = found
        pinned(pin.role, path, resources=resources)
        return f"{pin.role}@sha256:{checkpoint_fingerprint(path)}"
    return f"{path.name}@sha256:{checkpoint_fingerprint(path)}"


# transformers builds a GGUF file's tokenizer with a plain byte-level split whatever the file's
# ``tokenizer.ggml.pre`` says; llama.cpp splits as the model was trained. SmolLM2 ("smollm")
# isolates every digit first: without that, "\n  0: base" became [ĊĠ, Ġ, 0, ...] instead of
# [ĊĠĠ, 0, ...], and 32 of the 48 prompts of the real-model benchmark were tokenized unlike
# training (and unlike llama.cpp's server). Each name here was checked token for token against
# llama.cpp on those prompts. Bump GGUF_LOADER when this changes: it is part of the cache key.
GGUF_LOADER = "pretok1"


def _digits_then_byte_level():
    from tokenizers import pre_tokenizers

    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        ]
    )


GGUF_PRE_TOKENIZERS = {"smollm": _digits_then_byte_level}


def gguf_pre_tokenizer(tokenizer, path: str | os.PathLike) -> str | None:
    """Give ``tokenizer`` (loaded from the GGUF file at ``path``) the pre-tokenizer its
    ``tokenizer.ggml.pre`` names, where transformers does not; that name, or None."""
    import gguf

    field = gguf.GGUFReader(str(path)).fields.get("tokenizer.ggml.pre")
    name = bytes(field.parts[field.data[0]]).decode("utf-8") if field is not None else None
    if name in GGUF_PRE_TOKENIZERS:
        tokenizer.backend_tokenizer.pre_tokenizer = GGUF_PRE_TOKENIZERS[name]()
        log.info("tokenizer of %s: pre-tokenizer %r as llama.cpp splits it", path, name)
    return name


# How crucible compiles a schema for xgrammar (crucible.llm.json_grammar: what llama.cpp's grammar
# allows); part of the cache key: bump it when that changes, so old constrained answers are asked again.
GRAMMAR_RULES = "grammar4"


def schema_grammar(schema: dict[str, Any]):
    """The xgrammar grammar of JSON following ``schema`` (:mod:`crucible.llm.json_grammar`), its
    properties in the order of ``required``. Compact JSON, as crucible asked for before, made SmolLM2
    write other numbers than through llama.cpp's server from the first value on (issue 33)."""
    import xgrammar as xgr

    from crucible.llm.json_grammar import schema_ebnf

    return xgr.Grammar.from_ebnf(schema_ebnf(schema_in_answer_order(schema)))


def _xgrammar_version(name: str) -> str:
    """The installed xgrammar's version; a ConfigError saying how to install it if there is none."""
    from importlib import metadata

    try:
        return metadata.version("xgrammar")
    except metadata.PackageNotFoundError:
        raise ConfigError(
            f"config llm.models.{name}.structured_output: the transformers backend enforces the answer schema with "
            f"xgrammar, which is not installed; `make install-llm` installs it (the llm-transformers extra)"
        ) from None


class TransformersBackend:
    kind = "transformers"

    def __init__(
        self,
        name: str,
        path: str,
        *,
        batch_size: int = 8,
        device: str = "auto",
        dtype: str = "auto",
        chat_template: str | None = None,
        structured_output: bool = False,
    ):
        self.name = name
        self.path = Path(path)
        self.gguf = self.path.suffix == ".gguf"
        if self.gguf and not self.path.is_file():
            raise ConfigError(f"config llm.models.{name}.path: {path} does not exist")
        if not self.gguf and not (self.path / "config.json").is_file():
            raise ConfigError(
                f"config llm.models.{name}.path: {path} is neither a checkpoint directory (no config.json) "
                f"nor a .gguf file"
            )
        self.batch_size = max(1, int(batch_size))
        self.device_request = device
        self.dtype_request = dtype
        self.chat_template = chat_template
        # The cache key names the checkpoint by content (and role), not by where it lies.
        self.model = checkpoint_identity(self.path)
        if self.gguf:  # how crucible turns the file into a tokenizer is part of what answers
            self.model += f":{GGUF_LOADER}"
        self.structured_output = bool(structured_output)
        if self.structured_output:
            # The engine is part of what answers: another xgrammar may allow other token paths.
            self.model += f":xgrammar-{_xgrammar_version(name)}:{GRAMMAR_RULES}"
        self.device = None
        self._model = None
        self._tokenizer = None
        self._grammars = None  # xgrammar's compiler for this tokenizer, once loaded

    def prepare(self) -> None:
        self.load()

    def constraint(self) -> dict[str, Any]:
        """For the record: what enforced the schema."""
        return {
            "enforced_by": f"xgrammar {_xgrammar_version(self.name)} logits processor (transformers generate)",
            "grammar": "as llama.cpp's for the schema: at most one space between JSON tokens, 16 digits per number part",
        }

    def _grammar_processor(self, prompts: list[Prompt]):
        """One xgrammar logits processor for a batch: row i may only write JSON that follows the
        schema of ``prompts[i]`` (:func:`schema_grammar`), then the end-of-sequence token."""
        import json

        import xgrammar as xgr
        from xgrammar.contrib.hf import LogitsProcessor

        from crucible.llm.backend import StructuredOutputError
        from crucible.llm.json_grammar import UnsupportedSchemaError

        if self._grammars is None:
            tok = self._tokenizer
            vocab = int(self._model.get_output_embeddings().weight.shape[0])
            info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=vocab, stop_token_ids=[tok.eos_token_id])
            self._grammars = (xgr.GrammarCompiler(info), {})
        compiler, compiled = self._grammars
        grammars = []
        for prompt in prompts:
            key = json.dumps(prompt.response_schema, sort_keys=True)
            if key not in compiled:
                try:
                    compiled[key] = compiler.compile_grammar(schema_grammar(prompt.response_schema))
                except UnsupportedSchemaError as exc:
                    raise StructuredOutputError(f"model {self.name}: item {prompt.id}: response_schema {exc}") from None
            grammars.append(compiled[key])
        return LogitsProcessor(grammars)

    def load(self) -> None:
        if self._model is not None:
            return
        os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: never reach the hub
        os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = self.device_request
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = self.dtype_request
        if dtype == "auto":
            dtype = "bfloat16" if device.startswith("cuda") and torch.cuda.is_bf16_supported() else "float32"
        t0 = time.perf_counter()
        where = {"pretrained_model_name_or_path": self.path, "local_files_only": True}
        if self.gguf:
            where = {**where, "pretrained_model_name_or_path": self.path.parent, "gguf_file": self.path.name}
        tokenizer = AutoTokenizer.from_pretrained(**where)
        if self.gguf:
            gguf_pre_tokenizer(tokenizer, self.path)
        tokenizer.padding_side = "left"  # decoder-only models continue from the right edge
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        if self.chat_template:
            tokenizer.chat_template = self.chat_template
        if not getattr(tokenizer, "chat_template", None):
            raise ConfigError(
                f"config llm.models.{self.name}: the checkpoint {self.path} has no chat template; "
                f"set llm.models.{self.name}.chat_template"
            )
        model = AutoModelForCausalLM.from_pretrained(**where, dtype=getattr(torch, dtype))
        model.to(device).eval()
        self._model, self._tokenizer, self.device, self.dtype = model, tokenizer, device, dtype
        log.info(
            "model %s: loaded %s on %s (%s) in %.1f s", self.name, self.path, device, dtype, time.perf_counter() - t0
        )

    def generate(
        self,
        prompts: list[Prompt],
        params: dict[str, Any],
        on_done: Callable[[int, Completion], None] | None = None,
        budget=None,
    ) -> list[Completion]:
        import torch

        self.load()
        tok, model = self._tokenizer, self._model
        texts = [tok.apply_chat_template(list(p.messages), add_generation_prompt=True, tokenize=False) for p in prompts]
        lengths = [len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
        # Similar lengths together: less padding, and the order does not depend on the batch size.
        order = sorted(range(len(prompts)), key=lambda i: (lengths[i], prompts[i].id))
        temperature = float(params.get("temperature", 0.0))
        gen_kwargs: dict[str, Any] = {
            "max_new_tokens": int(params.get("max_tokens", 512)),
            "pad_token_id": tok.pad_token_id,
            "do_sample": temperature > 0,
        }
        if temperature > 0:
            gen_kwargs["temperature"] = temperature
            if "top_p" in params:
                gen_kwargs["top_p"] = float(params["top_p"])
        stops = list(params.get("stop", []))
        eos = tok.eos_token_id
        results: list[Completion | None] = [None] * len(prompts)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            if budget is not None and budget.stopped:  # the job is failing: no more GPU time on it
                for i in idx:
                    results[i] = budget.not_sent(f"model {self.name}: item {prompts[i].id}", prompts[i].id)
                    if on_done is not None:
                        on_done(i, results[i])
                continue
            batch = tok([texts[i] for i in idx], return_tensors="pt", padding=True, add_special_tokens=False).to(
                self.device
            )
            if "seed" in params:
                torch.manual_seed(int(params["seed"]))
            constrained = {}
            if self.structured_output:
                processor = self._grammar_processor([prompts[i] for i in idx])
                constrained = {"logits_processor": [processor]}
            with torch.inference_mode():
                out = model.generate(**batch, **gen_kwargs, **constrained)
            new = out[:, batch["input_ids"].shape[1] :].cpu()
            for row, i in enumerate(idx):
                ids = new[row].tolist()
                finish = "length"
                if eos is not None and eos in ids:
                    ids = ids[: ids.index(eos)]
                    finish = "stop"
                ids = [t for t in ids if t != tok.pad_token_id]
                text = tok.decode(ids, skip_special_tokens=True)
                for stop in stops:
                    cut = text.find(stop)
                    if cut >= 0:
                        text, finish = text[:cut], "stop"
                usage = {
                    "prompt_tokens": lengths[i],
                    "completion_tokens": len(ids),
                    "total_tokens": lengths[i] + len(ids),
                }
                results[i] = Completion(
                    prompts[i].id, response=text, model_id=self.model, usage=usage, finish_reason=finish
                )
                if on_done is not None:
                    on_done(i, results[i])
        return results  # type: ignore[return-value]
