"""Chat completions from any OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, hosted APIs).

The official ``openai`` client sends the requests; retries are ours (the client's own are
switched off) so that every attempt is logged and counted: 429, 5xx, timeouts and dropped
connections are retried with exponential back-off, anything else (400, 401, 404) fails the
item at once. The API key comes from the environment variable the config names and is
redacted from every message crucible writes.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from crucible.errors import ConfigError
from crucible.llm.files import Completion, Prompt

log = logging.getLogger(__name__)

# Servers that run without authentication (a vLLM or llama.cpp server started without
# --api-key) ignore the header, but the client insists on some value.
NO_KEY = "EMPTY"


class OpenAIBackend:
    kind = "openai"

    def __init__(
        self,
        name: str,
        model: str,
        base_url: str,
        api_key_env: str | None = None,
        *,
        concurrency: int = 4,
        timeout_s: float = 120.0,
        max_retries: int = 6,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.name = name
        self.model = model
        self.base_url = base_url
        self.concurrency = max(1, int(concurrency))
        self.timeout_s = float(timeout_s)
        self.max_retries = max(0, int(max_retries))
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self._sleep = sleep
        self.api_key_env = api_key_env
        self._key: str | None = None  # read when the first request is due: a run answered
        self._client = None  # wholly from the cache needs no key
        self._lock = threading.Lock()

    def _get_client(self):
        with self._lock:
            if self._client is None:
                import openai

                key = NO_KEY
                if self.api_key_env:
                    key = os.environ.get(self.api_key_env, "")
                    if not key:
                        raise ConfigError(
                            f"config llm.models.{self.name}.api_key_env: environment variable {self.api_key_env} "
                            f"is not set (export it in the shell that runs crucible or snakemake)"
                        )
                self._key = key

                # The client and the HTTP library would log request details at DEBUG; keep them quiet.
                for noisy in ("openai", "httpx", "httpx2", "httpcore", "httpcore2"):
                    logging.getLogger(noisy).setLevel(logging.WARNING)
                self._client = openai.OpenAI(base_url=self.base_url, api_key=key, timeout=self.timeout_s, max_retries=0)
            return self._client

    def prepare(self) -> None:
        self._get_client()

    def redact(self, text: str) -> str:
        if self._key and self._key != NO_KEY:
            text = text.replace(self._key, "***")
        # Hosted APIs echo a shortened key in 401 messages ("Incorrect API key provided: sk-ab***yz").
        return re.sub(r"(API key provided:\s*)\S+", r"\1***", text)

    def _request_kwargs(self, prompt: Prompt, params: dict[str, Any]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, "messages": list(prompt.messages), "n": 1}
        for key in ("temperature", "top_p", "max_tokens", "seed", "stop"):
            if key in params:
                kwargs[key] = params[key]
        return kwargs

    def _backoff(self, attempt: int, exc: Exception) -> float:
        delay = self.backoff_s * (2**attempt)
        retry_after = getattr(getattr(exc, "response", None), "headers", {}).get("retry-after")
        try:
            delay = max(delay, float(retry_after)) if retry_after is not None else delay
        except ValueError:
            pass
        return min(delay, self.max_backoff_s)

    def complete(self, prompt: Prompt, params: dict[str, Any]) -> Completion:
        """One item, retried; a failure comes back as a Completion with ``error`` set."""
        import openai

        client = self._get_client()
        kwargs = self._request_kwargs(prompt, params)
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            try:
                reply = client.chat.completions.create(**kwargs)
            except (
                openai.RateLimitError,
                openai.InternalServerError,
                openai.APITimeoutError,
                openai.APIConnectionError,
            ) as exc:
                reason = self.redact(_describe(exc))
                if attempt + 1 == attempts:
                    message = (
                        f"model {self.name}: item {prompt.id}: gave up after {attempts} attempt(s); "
                        f"last error: {reason}"
                    )
                    log.error("%s", message)
                    return Completion(prompt.id, error=message)
                delay = self._backoff(attempt, exc)
                log.warning(
                    "model %s: item %s: %s; retry %d/%d in %.2f s",
                    self.name,
                    prompt.id,
                    reason,
                    attempt + 1,
                    self.max_retries,
                    delay,
                )
                self._sleep(delay)
                continue
            except openai.APIStatusError as exc:  # 400, 401, 404, ...: asking again will not help
                message = f"model {self.name}: item {prompt.id}: {self.redact(_describe(exc))}"
                if getattr(exc, "status_code", None) == 404:
                    message += (
                        f" (is base_url {self.base_url} right, usually ending in /v1, and does the server "
                        f"serve a model named {self.model!r}? GET {self.base_url.rstrip('/')}/models lists them)"
                    )
                log.error("%s", message)
                return Completion(prompt.id, error=message)
            except openai.APIError as exc:  # e.g. a reply that is not chat-completion JSON
                message = f"model {self.name}: item {prompt.id}: {self.redact(_describe(exc))}"
                log.error("%s", message)
                return Completion(prompt.id, error=message)
            return _completion(self.name, prompt.id, reply)
        raise AssertionError("unreachable")

    def generate(
        self, prompts: list[Prompt], params: dict[str, Any], on_done: Callable[[int, Completion], None] | None = None
    ) -> list[Completion]:
        results: list[Completion | None] = [None] * len(prompts)
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="llm") as pool:
            futures = {pool.submit(self.complete, p, params): i for i, p in enumerate(prompts)}
            for fut in as_completed(futures):
                i = futures[fut]
                results[i] = fut.result()
                if on_done is not None:
                    on_done(i, results[i])
        return results  # type: ignore[return-value]


def _describe(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    text = str(exc) or name
    return f"HTTP {status} {name}: {text}" if status else f"{name}: {text}"


def _completion(name: str, item: str, reply) -> Completion:
    choices = getattr(reply, "choices", None) or []
    if not choices:
        return Completion(item, error=f"model {name}: item {item}: the server returned no choices")
    choice = choices[0]
    content = getattr(choice.message, "content", None)
    usage = {}
    if getattr(reply, "usage", None) is not None:
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            value = getattr(reply.usage, key, None)
            if isinstance(value, int):
                usage[key] = value
    if content is None:
        return Completion(
            item,
            error=f"model {name}: item {item}: the server returned no message content "
            f"(finish_reason {choice.finish_reason})",
            model_id=reply.model,
            usage=usage,
        )
    return Completion(
        item,
        response=content,
        model_id=getattr(reply, "model", None),
        usage=usage,
        finish_reason=getattr(choice, "finish_reason", None),
    )
