"""The stage: a prompt set and a model's config entry become a response file and its record.

The asking itself (cache first, then the backend, each answer cached as it arrives) is
crucible.llm.asking; the record's parts and the failure file are crucible.llm.run_record. The
response file is written once, at the end, in the prompt set's order.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from crucible import __version__
from crucible.core.errors import CrucibleError
from crucible.core.hashes import file_sha256
from crucible.core.io import InFile, write_json
from crucible.llm.asking import generate
from crucible.llm.backend import Backend, StructuredOutputError, too_many_failed
from crucible.llm.cache import ResponseCache
from crucible.llm.files import prompt_set_hash, read_prompts, schema_sha256, write_responses
from crucible.llm.model_entry import model_spec
from crucible.llm.run_record import checkpoint_identity, constraint_record, failure_file, public_url, write_failures

__all__ = ["GenerationFailedError", "StructuredOutputError", "generate", "make_backend", "run_stage"]

log = logging.getLogger(__name__)


class GenerationFailedError(CrucibleError):
    """More items failed than the model's ``max_failed_fraction`` allows."""


def make_backend(name: str, spec: dict[str, Any], replay_file: str | os.PathLike | None = None) -> Backend:
    backend = spec["backend"]
    if backend == "openai":
        from crucible.llm.openai_backend import DEFAULT_MAX_REPLY_BYTES, OpenAIBackend

        return OpenAIBackend(
            name,
            spec["model"],
            spec["base_url"],
            spec.get("api_key_env"),
            concurrency=spec["concurrency"],
            timeout_s=spec["timeout_s"],
            deadline_s=spec["deadline_s"],
            max_retries=spec["max_retries"],
            backoff_s=spec["backoff_s"],
            max_backoff_s=spec["max_backoff_s"],
            structured_output=spec.get("structured_output", False),
            response_format=spec.get("response_format", "json_schema"),
            # a default left out of the spec: entries without the key keep their hash and jobs
            max_reply_bytes=spec.get("max_reply_bytes", DEFAULT_MAX_REPLY_BYTES),
        )
    if backend == "transformers":
        from crucible.llm.transformers_backend import TransformersBackend

        return TransformersBackend(
            name,
            spec["path"],
            batch_size=spec["batch_size"],
            device=spec["device"],
            dtype=spec["dtype"],
            chat_template=spec.get("chat_template"),
            structured_output=spec.get("structured_output", False),
        )
    from crucible.llm.replay import ReplayBackend, replay_path

    return ReplayBackend(name, replay_file or replay_path(spec["path"]))


def run_stage(
    prompts_path: str | os.PathLike,
    model_name: str,
    entry: dict[str, Any],
    *,
    out: str | os.PathLike,
    record: str | os.PathLike,
    cache_dir: str | os.PathLike | None,
    replay_file: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Read the prompt set, generate, write ``out`` (responses) and ``record`` (sidecar JSON).

    Both files are written even when items failed (failures as rows with their reason); then,
    if more than ``max_failed_fraction`` of the items failed, the failed items' reasons go to
    :func:`failure_file` and GenerationFailedError is raised, so that the DAG stops instead of
    scoring a broken run. Snakemake deletes the outputs of a failed job, ``out`` and ``record``
    among them; the failure file is no output, so it stays (a later successful run removes it).
    Successes stay cached for the rerun.
    """
    t0 = time.perf_counter()
    spec = model_spec(model_name, entry)
    prompts = read_prompts(prompts_path)
    backend = make_backend(model_name, spec, replay_file)
    cache = ResponseCache(cache_dir) if cache_dir and spec["backend"] != "replay" else None
    params = spec["params"]
    structured = bool(spec.get("structured_output", False))
    results, stats = generate(
        prompts, backend, params, cache, model_name, float(spec["max_failed_fraction"]), structured_output=structured
    )
    write_responses(results, out)
    template_hashes = sorted({str(p.meta["template_hash"]) for p in prompts if "template_hash" in p.meta})
    schema_hashes = sorted({h for h in (schema_sha256(p.response_schema) for p in prompts) if h is not None})
    info: dict[str, Any] = {
        "model_name": model_name,
        "backend": spec["backend"],
        "model": backend.model,
        "params": params,
        "prompts_file": str(prompts_path),
        "prompts_sha256": file_sha256(prompts_path),
        "prompt_set_hash": prompt_set_hash(prompts),
        "prompt_template_hashes": template_hashes,
        # one hash per distinct schema (crystal's depends on the item's site count)
        "response_schema_sha256s": schema_hashes,
        "structured_output": constraint_record(backend, structured),
        "cache_dir": str(cache_dir) if cache is not None else None,
        **stats,
        "wall_s": round(time.perf_counter() - t0, 3),
        "crucible_version": __version__,
    }
    if spec["backend"] == "openai":
        info["base_url"] = public_url(spec["base_url"])
        info["api_key_env"] = spec.get("api_key_env")
        info["server_system_fingerprints"] = sorted(getattr(backend, "system_fingerprints", set()))
    elif spec["backend"] == "transformers":
        info["checkpoint"] = str(spec["path"])
        info["checkpoint_file"] = checkpoint_identity(spec["path"])
        info["device"], info["dtype"] = backend.device, getattr(backend, "dtype", None)
        info["batch_size"] = backend.batch_size
    else:
        info["replay_file"] = str(backend.path)
    write_json(info, record)
    n, failed = stats["n_items"], stats["n_failed"]
    log.info(
        "model %s: %d items (%d cached, %d new, %d failed) in %.1f s -> %s",
        model_name,
        n,
        stats["n_cached"],
        stats["n_new"],
        failed,
        info["wall_s"],
        out,
    )
    failures = failure_file(out)
    if not too_many_failed(failed, n, spec["max_failed_fraction"]):
        failures.unlink(missing_ok=True)  # an earlier run's reasons no longer describe the outputs
    else:
        write_failures(results, failures, info)
        shown = ", ".join(stats["failed_ids"][:10]) + (" ..." if failed > 10 else "")
        not_sent = stats["n_not_sent"]
        held_back = f", {not_sent} of them not sent once the job was bound to fail" if not_sent else ""
        raise GenerationFailedError(
            f"model {model_name}: {failed} of {n} items failed ({shown}{held_back}); each item's reason is in "
            f"{failures} (kept after the job fails, unlike its outputs) and the log. "
            f"Successful answers are cached, so a rerun asks only for these; to accept failures as wrong "
            f"answers, raise llm.models.{model_name}.max_failed_fraction (now {spec['max_failed_fraction']})"
        )
    return info


def generate_responses(
    prompts: InFile,
    model: str,
    out: str | os.PathLike,
    out_record: str | os.PathLike,
    config_file: list[str] | None = None,
    model_spec: str | None = None,
    model_sha256: str | None = None,
    cache_dir: str | os.PathLike = "results/llm/cache",
    no_cache: bool = False,
    replay_file: InFile | None = None,
    threads: int | None = None,
) -> None:
    """``crucible llm generate``: :func:`run_stage` with the model's entry read by name from the
    config files (``model_sha256``: refused unless it is the entry the rule planned with) or given
    as ``model_spec`` JSON.

    Args:
        prompts: prompts.jsonl ({id, messages, meta} per line)
        model: the model's name under llm.models
        out: responses/{model}.jsonl
        out_record: the sidecar JSON record
        model_spec: the model's config entry as JSON (outside the workflow)
        model_sha256: refuse to run unless the entry read has this hash (set by the rule)
        cache_dir: response cache (default: %(default)s)
        no_cache: neither read nor write the response cache
        replay_file: replay backend: the {id, response} JSONL (default: the entry's path)
        threads: CPU threads for a local checkpoint (transformers backend)
        config_file: a crucible config.yaml to read llm.models.<model> from; repeated: merged in order, later ones
            winning
    """
    from crucible.llm.model_entry import model_entry

    entry = model_entry(model, model_spec, config_file, sha256=model_sha256)
    if entry.get("backend") == "transformers":
        from crucible.core.torch_setup import configure_torch

        # threads: a local checkpoint on CPU otherwise takes every core of a shared node
        configure_torch(threads)
    run_stage(
        prompts,
        model,
        entry,
        out=out,
        record=out_record,
        cache_dir=None if no_cache else cache_dir,
        replay_file=replay_file,
    )
