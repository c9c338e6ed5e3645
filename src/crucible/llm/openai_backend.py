"""Chat completions from any OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, hosted APIs).

The official ``openai`` client sends the requests; retries are ours (the client's own are
switched off) so that every attempt is logged and counted: 429, 5xx, timeouts, dropped
connections and malformed replies (a body that is not chat-completion JSON, no ``choices``,
fields of the wrong type) are retried with exponential back-off, anything else (400, 401, 404)
fails the item at once. Each attempt ends within ``deadline_s`` however slowly the server
sends (crucible.llm.deadline); ``timeout_s`` bounds each wait for a byte. The reply body is
checked here, not by the client, whose models accept any shape. The API key comes from the
environment variable the config names and is redacted from every message crucible writes, and
from every answer (a server that echoes its Authorization header, raw or encoded), before the
answer reaches the cache or the response file.

Each reply is read with a bound on its decoded size (``max_reply_bytes``, crucible.llm.deadline's
transport), and an answer longer than ``max_tokens`` tokens could be is refused: neither is retried,
since the same request gets the same reply.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from crucible.core.errors import ConfigError
from crucible.llm.backend import FailureBudget, StructuredOutputError
from crucible.llm.files import Completion, Prompt, schema_in_answer_order

log = logging.getLogger(__name__)

DEFAULT_MAX_REPLY_BYTES = 4 << 20  # a chat completion of a few thousand tokens is tens of kB
# No tokenizer in use writes more than this many characters per token on average (the longest
# single tokens, runs of spaces or dashes, are a few dozen): an answer longer than max_tokens times
# this did not come from a request capped at max_tokens.
MAX_CHARS_PER_TOKEN = 64

# Servers that run without authentication (a vLLM or llama.cpp server started without
# --api-key) ignore the header, but the client insists on some value.
NO_KEY = "EMPTY"


class MalformedReplyError(Exception):
    """A 200 reply that is not a chat completion; retried like a 5xx (proxies and overloaded
    servers send these now and then)."""


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
        deadline_s: float | None = None,
        max_retries: int = 6,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        structured_output: bool = False,
        response_format: str = "json_schema",
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ):
        self.name = name
        self.structured_output = bool(structured_output)
        self.response_format = response_format  # how the schema is sent: RESPONSE_FORMATS
        self.canary: dict[str, Any] | None = None  # what the canary request got back
        self.system_fingerprints: set[str] = set()  # the server's build, where it reports one
        self.model = model
        self.base_url = base_url
        self.concurrency = max(1, int(concurrency))
        self.timeout_s = float(timeout_s)
        self.deadline_s = float(deadline_s) if deadline_s is not None else 2 * self.timeout_s
        self.max_retries = max(0, int(max_retries))
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.api_key_env = api_key_env
        self.max_reply_bytes = int(max_reply_bytes)
        self.n_scrubbed = 0  # answers that held the key (echoed by the server) and were scrubbed
        self._key: str | None = None  # read when the first request is due: a run answered
        self._client = None  # wholly from the cache needs no key
        self._lock = threading.Lock()

    def _get_client(self):
        with self._lock:
            if self._client is None:
                import httpx2
                import openai

                from crucible.llm.deadline import DeadlineTransport, environment_proxy

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
                from crucible.core.secrets import public_url

                transport = DeadlineTransport(
                    proxy=environment_proxy(self.base_url),
                    max_body_bytes=self.max_reply_bytes,
                    what=f"the reply from {public_url(self.base_url)}",
                    fix=f"Raise llm.models.{self.name}.max_reply_bytes if this server's replies are that long",
                )
                http = httpx2.Client(
                    transport=transport,
                    timeout=self.timeout_s,
                    follow_redirects=True,
                )
                self._client = openai.OpenAI(
                    base_url=self.base_url, api_key=key, timeout=self.timeout_s, max_retries=0, http_client=http
                )
            return self._client

    def prepare(self) -> None:
        self._get_client()
        if self.structured_output and self.canary is None:
            self.check_canary()

    def check_canary(self) -> None:
        """Before the first real request: does the server enforce ``response_format``?

        The canary asks for a word and constrains the reply to an object holding one fixed
        token that the prompt never mentions: an unconstrained model cannot write it, a
        constrained one can write nothing else. A server that ignores the field (vLLM 0.12
        accepts unknown fields and drops its old ``guided_json``) answers 200 with free text;
        that stops the job here, before any paid request, naming the model it served and what
        came back.
        """
        reply = self.complete(CANARY_PROMPT, {"temperature": 0.0, "max_tokens": 32})
        got = reply.response
        served = reply.model_id or "(the server named none)"
        try:
            value = json.loads(got) if got is not None else None
        except ValueError:
            value = None
        self.canary = {"passed": value == CANARY_ANSWER, "served_model": reply.model_id, "reply": _clip(got)}
        sent = f"response_format {self.response_format}"
        if reply.error is not None:
            hint = ""
            if self.response_format == "json_schema" and "response_format" in reply.error:
                # llama-cpp-python's server refuses the type (with HTTP 500) and takes the schema its own way.
                hint = (
                    f" If the server refused the field's type (llama-cpp-python's server takes only "
                    f"{{type: json_object, schema}}), set llm.models.{self.name}.response_format: json_object."
                )
            raise StructuredOutputError(
                f"model {self.name}: the structured-output canary request to {self.base_url} failed, so it is not known "
                f"whether the server enforces {sent}; nothing else was sent. {reply.error}{hint}"
            )
        if value != CANARY_ANSWER:
            raise StructuredOutputError(
                f"model {self.name}: the server at {self.base_url} (served model {served}) does not enforce "
                f"{sent}: asked for {json.dumps(CANARY_ANSWER)} under a strict schema, it "
                f"answered {_clip(got)!r} (finish_reason {reply.finish_reason}). Nothing else was sent. Use a server "
                f"that supports OpenAI's structured outputs (vLLM >= 0.6, SGLang, llama.cpp's server with a "
                f"grammar backend, OpenAI), or set llm.models.{self.name}.structured_output: false"
            )

    def constraint(self) -> dict[str, Any]:
        """For the record: what enforced the schema (the server, checked by the canary)."""
        how = ENFORCED_BY[self.response_format]
        if self.canary is None:
            return {"enforced_by": how, "canary": "not sent (every answer was cached)"}
        return {"enforced_by": how, "canary": self.canary}

    def redact(self, text: str) -> str:
        from crucible.core.secrets import scrub_key

        if self._key and self._key != NO_KEY:
            text = scrub_key(text, self._key)
        # Hosted APIs echo a shortened key in 401 messages ("Incorrect API key provided: sk-ab***yz").
        return re.sub(r"(API key provided:\s*)\S+", r"\1***", text)

    def _request_kwargs(self, prompt: Prompt, params: dict[str, Any]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, "messages": list(prompt.messages), "n": 1}
        for key in ("temperature", "top_p", "max_tokens", "seed", "stop"):
            if key in params:
                kwargs[key] = params[key]
        if params.get("extra_body"):  # a server's own fields (spec.py keeps crucible's out of it)
            kwargs["extra_body"] = dict(params["extra_body"])
        if self.structured_output and prompt.response_schema is not None:
            kwargs["response_format"] = response_format(prompt.response_schema, self.response_format)
        return kwargs

    def _backoff(self, attempt: int, exc: Exception) -> float:
        delay = self.backoff_s * (2**attempt)
        retry_after = getattr(getattr(exc, "response", None), "headers", {}).get("retry-after")
        try:
            delay = max(delay, float(retry_after)) if retry_after is not None else delay
        except ValueError:
            pass
        return min(delay, self.max_backoff_s)

    def _attempt(self, client, kwargs: dict[str, Any]) -> dict[str, Any]:
        """One request within the deadline; the checked fields of the reply."""
        import openai

        from crucible.core.bounded_body import BodyTooLargeError, UnsupportedEncodingError
        from crucible.llm.deadline import deadline

        try:
            with deadline(self.deadline_s):
                raw = client.chat.completions.with_raw_response.create(**kwargs)
                body = raw.content
        except openai.APIConnectionError as exc:
            # the client wraps what the transport raised while reading; a reply too large is no
            # dropped connection, and asking again gets the same reply
            cause = exc.__cause__
            if isinstance(cause, (BodyTooLargeError, UnsupportedEncodingError)):
                raise cause from None
            raise
        return parse_reply(body)

    def _scrub(self, text: str | None, where: str, what: str) -> str | None:
        """``text`` without the key in any form; a warning when the server had echoed it."""
        from crucible.core.secrets import public_url

        if text is None or not self._key or self._key == NO_KEY:
            return text
        clean = self.redact(text)
        if clean != text:
            with self._lock:
                self.n_scrubbed += 1
            log.warning(
                "%s: the server's %s held the API key (from %s, raw or encoded); replaced by *** before "
                "anything was written. Is %s echoing request headers?",
                where,
                what,
                self.api_key_env,
                public_url(self.base_url),
            )
        return clean

    def scrub_cached(self, c: Completion, where: str) -> Completion:
        """A cached answer without the key: an entry written before answers were scrubbed (issue
        52) must not carry it into a new response file. Reads the key, sends nothing."""
        if self._key is None and self.api_key_env:
            key = os.environ.get(self.api_key_env, "")
            if not key:
                return c
            self._key = key  # the client, made later, reads the same variable
        c.response = self._scrub(c.response, where, "cached answer")
        c.model_id = self._scrub(c.model_id, where, "cached model id")
        return c

    def _too_long(self, content: str, params: dict[str, Any]) -> str | None:
        max_tokens = params.get("max_tokens")
        if not isinstance(max_tokens, int) or len(content) <= max_tokens * MAX_CHARS_PER_TOKEN:
            return None
        from crucible.core.secrets import public_url

        return (
            f"the answer from {public_url(self.base_url)} has {len(content)} characters, more than max_tokens="
            f"{max_tokens} tokens can hold (at most {MAX_CHARS_PER_TOKEN} characters a token); the server did not "
            f"honour max_tokens, so the answer is refused (not retried, not cached)"
        )

    def complete(self, prompt: Prompt, params: dict[str, Any], budget: FailureBudget | None = None) -> Completion:
        """One item, retried; a failure comes back as a Completion with ``error`` set, never raised."""
        import openai

        client = self._get_client()
        kwargs = self._request_kwargs(prompt, params)
        attempts = self.max_retries + 1
        where = f"model {self.name}: item {prompt.id}"
        for attempt in range(attempts):
            if budget is not None and budget.stopped:
                return budget.not_sent(where, prompt.id)
            t0 = time.monotonic()
            try:
                reply = self._attempt(client, kwargs)
            except (
                openai.RateLimitError,
                openai.InternalServerError,
                openai.APITimeoutError,
                openai.APIConnectionError,
                openai.APIResponseValidationError,
                MalformedReplyError,
            ) as exc:
                reason = self.redact(_describe(exc))
                if isinstance(exc, openai.APITimeoutError) and time.monotonic() - t0 >= self.deadline_s:
                    reason = f"no complete reply within deadline_s={self.deadline_s:g} s ({reason})"
                if attempt + 1 == attempts:
                    message = f"{where}: gave up after {attempts} attempt(s); last error: {reason}"
                    log.error("%s", message)
                    return Completion(prompt.id, error=message)
                delay = self._backoff(attempt, exc)
                log.warning("%s: %s; retry %d/%d in %.2f s", where, reason, attempt + 1, self.max_retries, delay)
                if budget is not None:
                    budget.wait(delay)  # wakes at once when the job stops
                else:
                    time.sleep(delay)
                continue
            except openai.APIStatusError as exc:  # 400, 401, 404, ...: asking again will not help
                message = f"{where}: {self.redact(_describe(exc))}"
                if getattr(exc, "status_code", None) == 404:
                    message += (
                        f" (is base_url {self.base_url} right, usually ending in /v1, and does the server "
                        f"serve a model named {self.model!r}? GET {self.base_url.rstrip('/')}/models lists them)"
                    )
                log.error("%s", message)
                return Completion(prompt.id, error=message)
            except Exception as exc:  # anything else the client raises: this item's failure, not the job's
                message = f"{where}: {self.redact(_describe(exc))}"
                log.error("%s", message)
                return Completion(prompt.id, error=message)
            content = self._scrub(reply["content"], where, "answer")
            model_id = self._scrub(reply["model"], where, "model id")
            fingerprint = self._scrub(reply.get("system_fingerprint"), where, "system_fingerprint")
            if fingerprint:
                with self._lock:
                    self.system_fingerprints.add(fingerprint)
            too_long = self._too_long(content, params) if content is not None else None
            if too_long is not None:
                message = f"{where}: {too_long}"
                log.error("%s", message)
                return Completion(prompt.id, error=message, model_id=model_id, usage=reply["usage"])
            if content is None:
                return Completion(
                    prompt.id,
                    error=f"{where}: the server returned no message content (finish_reason {reply['finish_reason']})",
                    model_id=model_id,
                    usage=reply["usage"],
                )
            return Completion(
                prompt.id,
                response=content,
                model_id=model_id,
                usage=reply["usage"],
                finish_reason=reply["finish_reason"],
            )
        raise AssertionError("unreachable")

    def generate(
        self,
        prompts: list[Prompt],
        params: dict[str, Any],
        on_done: Callable[[int, Completion], None] | None = None,
        budget: FailureBudget | None = None,
    ) -> list[Completion]:
        """Every prompt, ``concurrency`` at a time; once ``budget`` stops, the queued ones are not sent."""
        budget = budget if budget is not None else FailureBudget(None, len(prompts))

        def run(i: int, p: Prompt) -> Completion:
            c = self.complete(p, params, budget)
            # Both in the worker, before it takes the next prompt: the next request already sees
            # the budget, and an answer is kept (cached) before another is asked for, so a killed
            # job loses only the requests in flight, however far behind the main thread is.
            budget.record(c)
            if on_done is not None:
                on_done(i, c)
            return c

        results: list[Completion | None] = [None] * len(prompts)
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="llm")
        try:
            futures = {pool.submit(run, i, p): i for i, p in enumerate(prompts)}
            for fut in as_completed(futures):
                results[futures[fut]] = fut.result()
        except BaseException:
            budget.stop("the job was interrupted")
            raise
        finally:
            # Requests in flight finish (within deadline_s); queued ones are dropped.
            pool.shutdown(wait=True, cancel_futures=True)
        return results  # type: ignore[return-value]


SCHEMA_NAME = "answer"
# A token no prompt mentions: the canary's reply can hold it only if the schema forced it.
CANARY_TOKEN = "crucible-canary-7d41"
CANARY_ANSWER = {"canary": CANARY_TOKEN}
CANARY_SCHEMA = {
    "type": "object",
    "properties": {"canary": {"type": "string", "enum": [CANARY_TOKEN]}},
    "required": ["canary"],
    "additionalProperties": False,
}
CANARY_PROMPT = Prompt(
    "structured-output-canary",
    ({"role": "user", "content": "Say hello in one word."},),
    response_schema=CANARY_SCHEMA,
)


ENFORCED_BY = {
    "json_schema": "server: response_format json_schema, strict",
    "json_object": "server: response_format json_object with schema",
}


def response_format(schema: dict[str, Any], form: str = "json_schema") -> dict[str, Any]:
    """The structured-output field: ``json_schema``, OpenAI's, as OpenAI, vLLM, SGLang and
    llama.cpp's llama-server accept it; ``json_object``, ``{type: json_object, schema}``, the only
    one llama-cpp-python's server takes (llama-server takes it too)."""
    ordered = schema_in_answer_order(schema)  # a server's decoder writes properties in this order
    if form == "json_object":
        return {"type": "json_object", "schema": ordered}
    return {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "schema": ordered, "strict": True}}


def _clip(text: str | None, n: int = 200) -> str | None:
    return text if text is None or len(text) <= n else text[:n] + " ..."


def _describe(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    text = str(exc) or name
    return f"HTTP {status} {name}: {text}" if status else f"{name}: {text}"


def _excerpt(body: bytes, n: int = 80) -> str:
    text = body[:n].decode("utf-8", errors="replace")
    return repr(text) + (" ..." if len(body) > n else "")


def parse_reply(body: bytes) -> dict[str, Any]:
    """``content``, ``finish_reason``, ``model`` and ``usage`` of a chat-completion body, each of
    the type the protocol says; MalformedReplyError naming what is wrong otherwise."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedReplyError(f"the reply is not JSON ({exc}): {_excerpt(body)}") from None
    if not isinstance(data, dict):
        raise MalformedReplyError(f"the reply is a JSON {type(data).__name__}, not an object: {_excerpt(body)}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        error = data.get("error")
        said = f"; it says {error.get('message')!r}" if isinstance(error, dict) and error.get("message") else ""
        raise MalformedReplyError(
            f"the reply has no 'choices' (got {'an empty list' if choices == [] else repr(choices)[:40]}){said}"
        )
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise MalformedReplyError(f"choices[0].message is not an object: {repr(choice)[:80]}")
    content, finish = message.get("content"), choice.get("finish_reason")
    if content is not None and not isinstance(content, str):
        raise MalformedReplyError(f"choices[0].message.content is a {type(content).__name__}, not a string")
    if finish is not None and not isinstance(finish, str):
        raise MalformedReplyError(f"choices[0].finish_reason is a {type(finish).__name__}, not a string")
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise MalformedReplyError(f"'model' is a {type(model).__name__}, not a string")
    usage_in = data.get("usage")
    if usage_in is not None and not isinstance(usage_in, dict):
        raise MalformedReplyError(f"'usage' is a {type(usage_in).__name__}, not an object")
    usage = {}
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = (usage_in or {}).get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise MalformedReplyError(f"usage.{key} is {value!r}, not a token count")
        usage[key] = value
    fingerprint = data.get("system_fingerprint")
    if fingerprint is not None and not isinstance(fingerprint, str):
        fingerprint = None  # informational only: a server's odd value is not worth a retry
    return {
        "content": content,
        "finish_reason": finish,
        "model": model,
        "usage": usage,
        "system_fingerprint": fingerprint,
    }
