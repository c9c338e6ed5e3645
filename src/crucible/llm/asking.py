"""Asking a backend for what the response cache lacks, in prompt-set order.

Cached answers are taken first; only the rest go to the backend, and each answer is written to
the cache the moment it arrives, so a killed run loses at most the requests in flight. Jobs that
share the cache claim an item before asking for it and wait for each other's answers. With
structured output every whole reply is then held to its schema (crucible.llm.schema_check).

A server that says it ran another model than the one configured (the reply's ``model``) is
warned about; its answers go to the response file, but the cache keeps them under the id that
served them, never under the configured model's name, and a cached answer that another model
served is not taken for the configured one's (:func:`served_as_configured`).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from crucible.core.errors import CrucibleError
from crucible.llm.backend import Backend, FailureBudget, StructuredOutputError
from crucible.llm.cache import CacheWriteError, Claims, ResponseCache, request_key
from crucible.llm.files import Completion, Prompt
from crucible.llm.schema_check import check_replies

log = logging.getLogger(__name__)

# A hosted API answers an alias with a dated snapshot of it (gpt-4o: gpt-4o-2024-08-06,
# gpt-4: gpt-4-0613, claude-3-5-sonnet: claude-3-5-sonnet-20241022), Ollama a name with ":latest".
SNAPSHOT_SUFFIX = re.compile(r"-\d{4}(?:-\d{2}-\d{2})?|-\d{8}|:latest")


def served_as_configured(backend_kind: str, configured: str, served: str | None) -> bool:
    """Whether the model id a reply names is the configured model: the same id, a dated snapshot
    of it, or no id at all (nothing to tell by). Only an OpenAI-compatible server says which model
    it ran; a local checkpoint is the configured one."""
    if backend_kind != "openai" or not served or served == configured:
        return True
    return served.startswith(configured) and bool(SNAPSHOT_SUFFIX.fullmatch(served[len(configured) :]))


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
            hit = _served_hit(cache.get(key), backend, cache, key, model_name)
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
            key, model = keys[i], backend.model
            if not served_as_configured(backend.kind, backend.model, c.model_id):
                # the answer of the model that gave it, found by a run configured with that id
                model = str(c.model_id)
                key = request_key(backend.kind, model, prompts[i].messages, params, samples[i], schemas[i])
            try:
                cache.put(
                    key,
                    backend=backend.kind,
                    model_name=model_name,
                    model=model,
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
        hit = _served_hit(cache.get(keys[i]), backend, cache, keys[i], model_name) if cache is not None else None
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
    other_models = _warn_other_models(results, backend, model_name)  # type: ignore[arg-type]
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
        "model_ids_not_configured": other_models,
        "n_cut_off": sum(c.response is not None and c.finish_reason == "length" for c in results),
        "cut_off_ids": sorted(c.id for c in results if c.response is not None and c.finish_reason == "length"),
    }
    if structured_output:
        # every whole reply, cached or new: an answer that breaks its schema is off-schema in the
        # response file (an invalid answer wherever it is scored), not only counted here
        broken = check_replies(prompts, results)  # type: ignore[arg-type]
        stats["n_not_matching_schema"] = len(broken)
        stats["not_matching_schema_ids"] = sorted(broken)
        if broken:
            log.warning(
                "model %s: %d of %d replies do not follow the schema their request asked for (e.g. %s: %s); "
                "they are scored as off-schema, invalid",
                model_name,
                len(broken),
                len(prompts),
                *next(iter(broken.items())),
            )
    return results, stats  # type: ignore[return-value]


def _served_hit(hit: Completion | None, backend: Backend, cache: ResponseCache, key: str, model_name: str):
    """A cache hit, unless another model served it, scrubbed of the key (entries of a crucible
    before issue 52 may hold either)."""
    scrub = getattr(backend, "scrub_cached", None)
    if hit is not None and scrub is not None:
        hit = scrub(hit, f"model {model_name}: cache entry {cache.path(key)}")
    if hit is None or served_as_configured(backend.kind, backend.model, hit.model_id):
        return hit
    log.warning(
        "model %s: cache entry %s was served by %r, not the configured %r; not taken, asking again",
        model_name,
        cache.path(key),
        hit.model_id,
        backend.model,
    )
    return None


def _warn_other_models(results: list[Completion], backend: Backend, model_name: str) -> list[str]:
    """The ids, other than the configured model's, that answered; one warning naming them."""
    counts: dict[str, int] = {}
    for c in results:
        if c.response is not None and not served_as_configured(backend.kind, backend.model, c.model_id):
            counts[str(c.model_id)] = counts.get(str(c.model_id), 0) + 1
    if counts:
        said = ", ".join(f"{mid!r} answered {n}" for mid, n in sorted(counts.items()))
        log.warning(
            "model %s: the server was asked for model %r, but another model answered %d of %d items (%s); those answers are "
            "in the response file and its record (model_ids_not_configured), and cached under the id that served "
            "them, not under %r. Check llm.models.%s.model and what the server at base_url serves "
            "(GET <base_url>/models)",
            model_name,
            backend.model,
            sum(counts.values()),
            len(results),
            said,
            backend.model,
            model_name,
        )
    return sorted(counts)


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
