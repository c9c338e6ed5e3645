"""A language model's config entry, checked, with defaults filled in.

``llm: models: {name: {backend, ...}}`` in config/config.yaml. The schema checks the keys; this
module checks what depends on the backend and gives one normalised dict of generation
parameters, which goes into every cache key and every record.
"""

from __future__ import annotations

from typing import Any

from crucible.errors import ConfigError

BACKENDS = ("openai", "transformers", "replay")

# What each backend needs, besides `backend`.
REQUIRED = {"openai": ("model", "base_url"), "transformers": ("path",), "replay": ("path",)}

# Greedy decoding and a bounded answer unless the config says otherwise: a benchmark's
# numbers should not depend on sampling noise by default.
DEFAULT_PARAMS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 512}
PARAM_KEYS = ("temperature", "top_p", "max_tokens", "seed", "stop")

OPENAI_DEFAULTS = {"concurrency": 4, "timeout_s": 120.0, "max_retries": 6, "backoff_s": 1.0, "max_backoff_s": 60.0}
DEADLINE_PER_TIMEOUT = 2.0
TRANSFORMERS_DEFAULTS = {"batch_size": 8, "device": "auto", "dtype": "auto"}


def model_spec(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """``entry`` with backend defaults filled in; a ConfigError naming the model and key if wrong."""
    where = f"config llm.models.{name}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(entry).__name__}")
    backend = entry.get("backend")
    if backend not in BACKENDS:
        raise ConfigError(f"{where}.backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    missing = [k for k in REQUIRED[backend] if not entry.get(k)]
    if missing:
        raise ConfigError(f"{where}: backend {backend} needs {', '.join(missing)}")
    spec = dict(entry)
    if backend == "openai":
        spec = {**OPENAI_DEFAULTS, **spec}
        # timeout_s bounds each wait for a byte; deadline_s the whole attempt, so that a server
        # trickling its reply cannot hold a request for ever. A normal reply arrives in one piece
        # once generated, within timeout_s, so twice that never cuts a healthy server short.
        if spec.get("deadline_s") is None:
            spec["deadline_s"] = DEADLINE_PER_TIMEOUT * float(spec["timeout_s"])
    elif backend == "transformers":
        spec = {**TRANSFORMERS_DEFAULTS, **spec}
    spec.setdefault("max_failed_fraction", 0.0)
    spec["params"] = generation_params(name, entry.get("params") or {})
    return spec


def generation_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(params) - set(PARAM_KEYS))
    if unknown:
        raise ConfigError(
            f"config llm.models.{name}.params: unknown key(s) {', '.join(unknown)}; known: {', '.join(PARAM_KEYS)}"
        )
    out = {**DEFAULT_PARAMS, **{k: v for k, v in params.items() if v is not None}}
    if isinstance(out.get("stop"), str):
        out["stop"] = [out["stop"]]
    if out.get("stop") == []:
        del out["stop"]
    if "temperature" in out:
        out["temperature"] = float(out["temperature"])
    if "top_p" in out:
        out["top_p"] = float(out["top_p"])
    return dict(sorted(out.items()))
