"""The stage: a prompt set and a model's config entry become a response file and its record.

Cached answers are taken first; only the rest go to the backend, and each answer is written to
the cache the moment it arrives, so a killed run loses at most the requests in flight. The
response file itself is written once, at the end, in the prompt set's order.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from crucible import __version__
from crucible.core.errors import CrucibleError
from crucible.core.io import InFile, write_json
from crucible.llm.backend import Backend, FailureBudget, StructuredOutputError, too_many_failed
from crucible.llm.cache import CacheWriteError, Claims, ResponseCache, request_key
from crucible.llm.files import Completion, Prompt, prompt_set_hash, read_prompts, schema_sha256, write_responses
from crucible.llm.spec import model_spec

log = logging.getLogger(__name__)


class GenerationFailedError(CrucibleError):
    """More items failed than the model's ``max_failed_fraction`` allows."""


def make_backend(name: str, spec: dict[str, Any], replay_file: str | os.PathLike | None = None) -> Backend:
    backend = spec["backend"]
    if backend == "openai":
        from crucible.llm.openai_backend import OpenAIBackend

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


class _Progress:
    """tqdm bar over items, with tokens/s and errors; thread-safe (answers arrive from a pool)."""

    def __init__(self, total: int, done: int, desc: str):
        from tqdm import tqdm

        # Always on: in a Snakemake job stderr is the rule's log, and the bar is how a user sees a
        # long run move; less often when it is a file.
        self.bar = tqdm(
            total=total,
            initial=done,
            desc=desc,
            unit="item",
            dynamic_ncols=True,
            mininterval=0.5 if sys.stderr.isatty() else 10.0,
        )
        self.t0 = time.perf_counter()
        self.tokens = 0
        self.errors = 0
        self.lock = threading.Lock()

    def update(self, c: Completion) -> None:
        with self.lock:
            self.tokens += int(c.usage.get("completion_tokens", 0))
            self.errors += c.error is not None
            rate = self.tokens / max(time.perf_counter() - self.t0, 1e-9)
            self.bar.set_postfix(tok_s=f"{rate:.1f}", errors=self.errors, refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def generate(
    prompts: list[Prompt],
    backend: Backend,
    params: dict[str, Any],
    cache: ResponseCache | None,
    model_name: str,
    max_failed_fraction: float | None = None,
    structured_output: bool = False,
) -> tuple[list[Completion], dict[str, Any]]:
    """Completions for ``prompts`` in order, and counts; cached answers are not asked again.

    Once more than ``max_failed_fraction`` of the items have failed (the job will fail), nothing
    more is sent: the answers already received are cached, the rest are failures "not sent".
    With ``structured_output`` every answer is constrained to its prompt's ``response_schema``
    (part of the cache key), and every prompt must have one.
    """
    if structured_output:
        without = [p.id for p in prompts if p.response_schema is None]
        if without:
            raise StructuredOutputError(
                f"model {model_name}: structured_output is on, but {len(without)} prompt(s) have no response_schema "
                f"(e.g. {', '.join(without[:5])}); the benchmark must give one per prompt"
            )
    schemas = [p.response_schema if structured_output else None for p in prompts]
    seen: dict[str, int] = {}
    samples = []
    for p in prompts:
        canon = json.dumps(p.messages, sort_keys=True, ensure_ascii=False)
        samples.append(seen.get(canon, 0))
        seen[canon] = samples[-1] + 1
    keys = [
        request_key(backend.kind, backend.model, p.messages, params, s, schema)
        for p, s, schema in zip(prompts, samples, schemas)
    ]
    results: list[Completion | None] = [None] * len(prompts)
    if cache is not None:
        for i, (p, key) in enumerate(zip(prompts, keys)):
            hit = cache.get(key)
            if hit is not None:
                hit.id = p.id
                results[i] = hit
    todo = [i for i, r in enumerate(results) if r is None]
    n_cached = len(prompts) - len(todo)
    log.info(
        "model %s (%s %s): %d items, %d cached, %d to generate",
        model_name,
        backend.kind,
        backend.model,
        len(prompts),
        n_cached,
        len(todo),
    )
    progress = _Progress(len(prompts), n_cached, model_name)
    budget = FailureBudget(max_failed_fraction, len(prompts))
    cache_errors: list[CrucibleError] = []
    claims: Claims | None = None
    sent: list[int] = []  # what this job asked the backend for
    clock = {"load_s": 0.0, "wall_s": 0.0}

    def keep(i: int, c: Completion) -> None:
        if cache is not None and c.response is not None and not cache_errors:
            try:
                cache.put(
                    keys[i],
                    backend=backend.kind,
                    model_name=model_name,
                    model=backend.model,
                    messages=prompts[i].messages,
                    params=params,
                    completion=c,
                    sample=samples[i],
                    response_schema=schemas[i],
                )
            except CrucibleError as exc:  # e.g. a full disk: stop paying for answers that cannot be kept
                cache_errors.append(exc)
                budget.stop(f"the response cache cannot be written ({exc})")
        if claims is not None:
            claims.release(keys[i])  # after the entry: a job waiting on the claim finds the answer
        progress.update(c)

    def send(batch: list[int]) -> None:
        if not sent:
            # Client import or model load before the clock starts: tokens/s measures generation
            # only, and nothing is loaded at all when every answer is cached.
            t_load = time.perf_counter()
            backend.prepare()
            clock["load_s"] = time.perf_counter() - t_load
        sent.extend(batch)
        t0 = time.perf_counter()
        try:
            new = backend.generate(
                [prompts[i] for i in batch], params, on_done=lambda j, c: keep(batch[j], c), budget=budget
            )
        finally:
            clock["wall_s"] += time.perf_counter() - t0
        for j, c in enumerate(new):
            c.id = prompts[batch[j]].id
            results[batch[j]] = c

    def take_answer(i: int) -> bool:
        hit = cache.get(keys[i]) if cache is not None else None
        if hit is None:
            return False
        hit.id = prompts[i].id
        results[i] = hit
        progress.update(hit)
        return True

    n_from_others = 0
    try:
        if cache is None:
            if todo:
                send(todo)
        else:
            with cache.claims() as claims:
                pending = todo
                while pending:
                    mine, theirs = [], []
                    for i in pending:
                        if not claims.take(keys[i]):
                            theirs.append(i)
                        elif take_answer(i):  # answered by the job that held it until just now
                            claims.release(keys[i])
                            n_from_others += 1
                        else:
                            mine.append(i)
                    if mine:
                        send(mine)
                    pending, answered = _wait_for_others(theirs, keys, claims, budget, take_answer, model_name)
                    n_from_others += answered
                    for i in pending if budget.stopped else []:
                        results[i] = budget.not_sent(f"model {model_name}: item {prompts[i].id}", prompts[i].id)
                        progress.update(results[i])
                    if budget.stopped:
                        pending = []
    finally:
        progress.close()
    if cache_errors:
        received = sum(results[i] is not None and results[i].response is not None for i in sent)
        raise CacheWriteError(
            f"{cache_errors[0]}; the job stopped sending requests ({received} answers were received, "
            f"those before the failure are cached)"
        ) from cache_errors[0]
    wall = clock["wall_s"]
    new_items = [results[i] for i in sent]
    completion_tokens = sum(int(c.usage.get("completion_tokens", 0)) for c in new_items)
    stats = {
        "n_items": len(prompts),
        "n_cached": n_cached + n_from_others,
        "n_from_other_jobs": n_from_others,
        "n_new": sum(c.error is None for c in new_items),
        "n_failed": sum(c.error is not None for c in results),
        "failed_ids": sorted(c.id for c in results if c.error is not None),
        "n_not_sent": len(budget.not_sent_ids),
        "load_s": round(clock["load_s"], 3),
        "generation_wall_s": round(wall, 3),
        "new_usage": {
            "prompt_tokens": sum(int(c.usage.get("prompt_tokens", 0)) for c in new_items),
            "completion_tokens": completion_tokens,
        },
        "new_completion_tokens_per_s": round(completion_tokens / wall, 2) if sent and wall > 0 else None,
        "model_ids": sorted({c.model_id for c in results if c.model_id}),
        "n_cut_off": sum(c.response is not None and c.finish_reason == "length" for c in results),
        "cut_off_ids": sorted(c.id for c in results if c.response is not None and c.finish_reason == "length"),
    }
    if structured_output:
        broken = schema_violations(prompts, results)  # type: ignore[arg-type]
        stats["n_not_matching_schema"] = len(broken)
        stats["not_matching_schema_ids"] = broken
    return results, stats  # type: ignore[return-value]


def schema_violations(prompts: list[Prompt], results: list[Completion]) -> list[str]:
    """Ids of the whole replies (not cut off) that are not JSON following their prompt's schema.

    A constraint is checked, not assumed: an engine that drops it silently shows up here."""
    from jsonschema import Draft202012Validator

    validators: dict[str, Any] = {}
    broken = []
    for p, c in zip(prompts, results):
        if c.response is None or c.finish_reason == "length" or p.response_schema is None:
            continue
        key = json.dumps(p.response_schema, sort_keys=True)
        if key not in validators:
            validators[key] = Draft202012Validator(p.response_schema)
        try:
            value = json.loads(c.response)
        except ValueError:
            broken.append(p.id)
            continue
        if not validators[key].is_valid(value):
            broken.append(p.id)
    return sorted(broken)


WAIT_POLL_S = 0.5


def _wait_for_others(
    theirs: list[int],
    keys: list[str],
    claims: Claims,
    budget: FailureBudget,
    take_answer: Callable[[int], bool],
    model_name: str,
) -> tuple[list[int], int]:
    """Wait while other jobs ask for ``theirs``; (the items to claim again, the number answered).

    An item comes back to be claimed when its claim is released without an answer (the other
    job failed it) or has gone stale (the other job died).
    """
    waiting = list(theirs)
    if waiting:
        log.info(
            "model %s: %d item(s) are being asked for by another job (%s); waiting for its answers",
            model_name,
            len(waiting),
            claims.holder(keys[waiting[0]]),
        )
    retry: list[int] = []
    answered = 0
    while waiting and not budget.stopped:
        still = []
        for i in waiting:
            if take_answer(i):
                answered += 1
            elif claims.is_free(keys[i]) or claims.stale(keys[i]) is not None:
                retry.append(i)
            else:
                still.append(i)
        waiting = still
        if waiting:
            budget.wait(WAIT_POLL_S)
    return sorted(retry + waiting), answered


def _constraint_record(backend: Backend, structured: bool) -> dict[str, Any]:
    """Whether the answers were constrained to their schema, and by what (the backend says)."""
    if not structured:
        return {"enabled": False, "enforced_by": None}
    described = getattr(backend, "constraint", None)
    return {"enabled": True, **(described() if callable(described) else {"enforced_by": None})}


def checkpoint_identity(path: str | os.PathLike) -> dict[str, Any]:
    """A single-file checkpoint's full SHA-256 and, when config/sources.yaml pins a file with
    that hash, its role (what `crucible sources provide ROLE` gives); a directory: neither."""
    path = Path(path)
    if not path.is_file():
        return {"sha256": None, "role": None}
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    sha = digest.hexdigest()
    role = None
    try:
        from crucible.sources.downloads import roles

        role = next((name for name, pin in sorted(roles().items()) if getattr(pin, "sha256", None) == sha), None)
    except Exception as exc:  # noqa: BLE001 - the record says what it can; no pins file is no error
        log.debug("no role looked up for %s: %s", path, exc)
    return {"sha256": sha, "role": role}


def _public_url(url: str) -> str:
    """The base URL without any user:password@ part."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def failure_file(out: str | os.PathLike) -> Path:
    """``responses/failed/{model}.json`` beside ``responses/{model}.jsonl``: no job's output."""
    out = Path(out)
    return out.parent / "failed" / f"{out.stem}.json"


def write_failures(results: list[Completion], path: Path, info: dict[str, Any]) -> None:
    """Which run failed (model, prompts file and hash, counts) and each failed item's reason,
    in prompt-set order."""
    keys = ("model_name", "backend", "model", "prompts_file", "prompts_sha256", "n_items", "n_failed", "n_not_sent")
    report = {k: info[k] for k in keys}
    report["failed"] = [{"id": c.id, "error": c.error} for c in results if c.error is not None]
    write_json(report, path)


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
        "prompts_sha256": hashlib.sha256(Path(prompts_path).read_bytes()).hexdigest(),
        "prompt_set_hash": prompt_set_hash(prompts),
        "prompt_template_hashes": template_hashes,
        # one hash per distinct schema (crystal's depends on the item's site count)
        "response_schema_sha256s": schema_hashes,
        "structured_output": _constraint_record(backend, structured),
        "cache_dir": str(cache_dir) if cache is not None else None,
        **stats,
        "wall_s": round(time.perf_counter() - t0, 3),
        "crucible_version": __version__,
    }
    if spec["backend"] == "openai":
        info["base_url"] = _public_url(spec["base_url"])
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
    from crucible.llm.spec import model_entry

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
