"""A language model's config entry, checked, with defaults filled in.

``llm: models: {name: {backend, ...}}`` in config/config.yaml. The schema checks the keys; this
module checks what depends on the backend and gives one normalised dict of generation
parameters, which goes into every cache key and every record.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from crucible.core.errors import ConfigError

BACKENDS = ("openai", "transformers", "replay")

# What each backend needs, besides `backend`.
REQUIRED = {"openai": ("model", "base_url"), "transformers": ("path",), "replay": ("path",)}

# Greedy decoding and a bounded answer unless the config says otherwise: a benchmark's
# numbers should not depend on sampling noise by default.
DEFAULT_PARAMS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 512}
PARAM_KEYS = ("temperature", "top_p", "max_tokens", "seed", "stop", "extra_body")
# Request fields crucible sets itself; extra_body may not set them again behind its back.
OWN_REQUEST_FIELDS = ("model", "messages", "n", "stream", "response_format", *PARAM_KEYS)
# How the openai backend sends the answer schema: OpenAI's form, or the one llama-cpp-python's
# server takes (it refuses type json_schema; llama.cpp's own llama-server takes both).
RESPONSE_FORMATS = ("json_schema", "json_object")

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
    if backend == "openai":
        _check_base_url(where, str(entry["base_url"]))
        if entry.get("api_key_env") is not None:
            check_api_key_env(where, entry["api_key_env"])
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
    structured = spec.get("structured_output", False)
    if not isinstance(structured, bool):
        raise ConfigError(f"{where}.structured_output: expected true or false, got {structured!r}")
    if structured and backend == "replay":
        raise ConfigError(
            f"{where}.structured_output: a replay model's answers were produced elsewhere; nothing here can constrain them"
        )
    # Only when on: an entry without it keeps the hash (and the jobs) it had before the key existed.
    if structured:
        spec["structured_output"] = True
    else:
        spec.pop("structured_output", None)
    fmt = spec.pop("response_format", None)
    if fmt is not None:
        if backend != "openai" or not structured:
            raise ConfigError(
                f"{where}.response_format: how an openai model with structured_output: true sends its answer schema; "
                f"this model is {backend}{'' if structured else ' without structured_output'}"
            )
        if fmt not in RESPONSE_FORMATS:
            raise ConfigError(f"{where}.response_format: {fmt!r} is not one of {', '.join(RESPONSE_FORMATS)}")
        if fmt != RESPONSE_FORMATS[0]:  # the default keeps the hash an entry had without the key
            spec["response_format"] = fmt
    if spec.get("max_reply_bytes") is not None and backend != "openai":
        raise ConfigError(
            f"{where}.max_reply_bytes: the most bytes one reply of an OpenAI-compatible server may hold; a {backend} "
            f"model reads no reply"
        )
    spec["params"] = generation_params(name, entry.get("params") or {})
    if "extra_body" in spec["params"] and backend != "openai":
        raise ConfigError(
            f"{where}.params.extra_body: fields sent to an OpenAI-compatible server as they are; a {backend} "
            f"model sends no request"
        )
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
    extra = out.get("extra_body")
    if extra is not None:
        if not isinstance(extra, dict):
            raise ConfigError(f"config llm.models.{name}.params.extra_body: expected a mapping, got {extra!r}")
        taken = sorted(set(extra) & set(OWN_REQUEST_FIELDS))
        if taken:
            raise ConfigError(
                f"config llm.models.{name}.params.extra_body: {', '.join(taken)} set by crucible itself; give "
                f"{'them' if len(taken) > 1 else 'it'} as params (or structured_output), not in extra_body"
            )
        if not extra:
            del out["extra_body"]
        else:
            out["extra_body"] = dict(sorted(extra.items()))
    _refuse_keys_in_params(f"config llm.models.{name}.params", out)
    return dict(sorted(out.items()))


# Fields of a request body that carry credentials (extra_body is sent as it is and recorded).
CREDENTIAL_FIELDS = frozenset(
    {"api_key", "apikey", "key", "token", "access_token", "secret", "password", "authorization"}
)


def _refuse_keys_in_params(where: str, value: Any) -> None:
    """No key in the params: they go into the request body as they are, and so into the response
    record, the cache entries and their key (``extra_body: {api_key: sk-…}`` reached all three).
    A credential's field name or a value of a key's form is refused, the value masked."""
    from crucible.core.secrets import looks_like_key, masked

    if isinstance(value, dict):
        for key, item in value.items():
            if str(key).lower() in CREDENTIAL_FIELDS and item not in (None, ""):
                shown = masked(item) if isinstance(item, str) else f"a {type(item).__name__}"
                raise ConfigError(
                    f"{where}.{key}: a credential ({shown}) is sent and recorded with every request from here; "
                    f"{KEY_FIX}"
                )
            _refuse_keys_in_params(f"{where}.{key}", item)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _refuse_keys_in_params(f"{where}[{i}]", item)
    elif isinstance(value, str) and looks_like_key(value):
        raise ConfigError(
            f"{where}: {masked(value)} has the form of a key, which would be sent and recorded with every request; "
            f"{KEY_FIX}"
        )


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
KEY_FIX = "put the key in an environment variable and give that variable's NAME as api_key_env"


def check_api_key_env(where: str, value: Any) -> None:
    """``api_key_env`` is the NAME of an environment variable, never the key: a value that is no
    such name, or that has the form of a key (``hf_…``, ``sk-…``, a long random word), is refused
    showing at most its known prefix and its length, since the message goes to the logs."""
    from crucible.core.secrets import looks_like_key, masked

    if not isinstance(value, str) or not ENV_NAME.fullmatch(value):
        shown = masked(value) if isinstance(value, str) else f"a {type(value).__name__}"
        raise ConfigError(
            f"{where}.api_key_env: {shown} is not the name of an environment variable (letters, digits and _, "
            f"not starting with a digit); {KEY_FIX}"
        )
    if looks_like_key(value):
        raise ConfigError(
            f"{where}.api_key_env: {masked(value)} has the form of a key, not of a variable's name; {KEY_FIX}"
        )


def _check_base_url(where: str, url: str) -> None:
    """No credentials in the address: the URL is logged and recorded, and the client would send
    them as HTTP Basic auth instead of the configured key; nor a query string or fragment
    (``?api_key=…``), which would be recorded with it. The message does not repeat them."""
    from crucible.core.secrets import public_url

    parts = urlsplit(url)
    fix = "put the key in the variable that api_key_env names (the NAME of an environment variable holding it)"
    try:
        has_userinfo = parts.username is not None or parts.password is not None or "@" in parts.netloc
    except ValueError:
        has_userinfo = "@" in parts.netloc
    shown = public_url(urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", "")))
    if has_userinfo:
        raise ConfigError(
            f"{where}.base_url: credentials in the URL (user:password@) are refused, because the URL is "
            f"written to logs and records; use {shown} and {fix}"
        )
    if parts.query or parts.fragment or url.rstrip().endswith(("?", "#")):
        raise ConfigError(
            f"{where}.base_url: a query string or fragment in the URL (?…) is refused, because the URL is written "
            f"to logs and records and a key in it would be too; use {shown} and {fix}"
        )


def spec_sha256(name: str, entry: dict[str, Any]) -> str:
    """SHA-256 of the checked entry with its defaults: the same for two spellings of one model."""
    canon = json.dumps(model_spec(name, entry), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


# Keys that say where and how patiently a model is asked, not what answers: as in the cache key,
# a server that comes back at another address (the llama.cpp server on a new port, a vLLM
# server on another node) is the same model.
TRANSPORT_KEYS = (
    "base_url", "api_key_env", "concurrency", "timeout_s", "deadline_s", "max_retries", "backoff_s", "max_backoff_s",
    "max_reply_bytes",
)  # fmt: skip


def answering_sha256(name: str, entry: dict[str, Any]) -> str:
    """SHA-256 of the checked entry less :data:`TRANSPORT_KEYS`: what the name means in a results
    folder (crucible.identity.records). :func:`spec_sha256`, the whole entry, is what a job checks."""
    spec = {k: v for k, v in model_spec(name, entry).items() if k not in TRANSPORT_KEYS}
    canon = json.dumps(spec, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def _merge(base: dict, over: dict) -> dict:
    """Nested update, later values winning: how Snakemake merges its config files."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def entry_from_config_files(paths: Iterable[str | os.PathLike], name: str) -> dict[str, Any]:
    """``llm.models.<name>`` of the config files merged in order (later files win).

    The model entry reaches a job this way, by name, and never as a command-line argument,
    which Snakemake prints and records.
    """
    from crucible.core.yaml_files import load_mapping

    paths = [str(p) for p in paths]
    config: dict[str, Any] = {}
    for path in paths:
        loaded = load_mapping(path)
        config = _merge(config, loaded)
    llm = config.get("llm") or {}
    models = (llm.get("models") if isinstance(llm, dict) else None) or {}
    if not isinstance(models, dict):
        raise ConfigError(f"{', '.join(paths)}: llm.models must map each language model's name to its entry")
    if name not in models:
        raise ConfigError(
            f"{', '.join(paths)}: llm.models has no {name!r} (has: {', '.join(sorted(models)) or 'none'})"
        )
    return models[name]


def _check_entry_schema(name: str, entry: Any, where: str) -> None:
    """The entry against the config schema's ``llm.models`` entry: a hand-run job (``--model-spec``,
    or ``--config-file`` outside the workflow) skips the workflow's check, and ``"temperature":
    "hot"`` was a bare ValueError, an unknown key (``pathh``) ignored."""
    from crucible.dag import config as _config

    models = _config.family_schema("llm")["properties"]["models"]
    doc = {"type": "object", "properties": {"llm": {"type": "object", "properties": {"models": models}}}}
    try:
        _config.check_schema({"llm": {"models": {name: entry}}}, doc)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def model_entry(
    name: str,
    spec_json: str | None = None,
    config_file: str | os.PathLike | Iterable[str | os.PathLike] | None = None,
    sha256: str | None = None,
) -> dict[str, Any]:
    """A model's config entry: ``spec_json`` (the entry as JSON) if given, else ``llm.models.<name>``
    of the crucible config file(s) at ``config_file`` (several: merged in order, as Snakemake does).

    ``sha256`` (the rule passes :func:`spec_sha256` of the entry Snakemake planned with) refuses
    any other entry: one given with ``--config`` on Snakemake's command line, or a file edited since.
    """
    if spec_json:
        from crucible.core.errors import DataValidationError
        from crucible.core.strict_json import parse_json

        try:
            entry = parse_json(spec_json, "--model-spec")
        except DataValidationError as exc:
            raise ConfigError(str(exc)) from None
        where = "--model-spec"
    else:
        files = [config_file] if isinstance(config_file, (str, os.PathLike)) else list(config_file or [])
        if not files:
            raise ConfigError(f"language model {name!r}: no config file and no --model-spec to read it from")
        entry = entry_from_config_files(files, name)
        where = ", ".join(str(f) for f in files)
    _check_entry_schema(name, entry, where)
    if sha256 and spec_sha256(name, entry) != sha256:
        raise ConfigError(
            f"llm.models.{name} in {where} is not the entry the workflow was planned with (was it set with "
            f"--config on the command line, or a config file edited since?); put it in a config file and run again"
        )
    return entry
