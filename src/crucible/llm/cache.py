"""The response cache: one JSON file per answered request, keyed by what determines the answer.

The key is the SHA-256 of (backend, model, messages, generation parameters); the server's
address and the API key are not part of it, so that a vLLM server that moves to another node
keeps its cache, and no secret ever reaches the disk. Each entry is written to a temporary file
and renamed into place (one rename per item), so a job killed at any moment leaves only whole
entries: the next run reads them and sends only the requests that have none. Failures are not
cached, so a rerun retries them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crucible.io import write_json
from crucible.llm.files import Completion

log = logging.getLogger(__name__)

DEFAULT_CACHE_DIR = "results/llm/cache"


def request_key(
    backend: str, model: str, messages: list[dict] | tuple[dict, ...], params: dict[str, Any], sample: int = 0
) -> str:
    """``sample`` numbers repeats of the same messages within one prompt set (0 for the first).

    A benchmark that asks for several samples of one prompt (k structures for one composition)
    must get k cached answers back, not one answer k times; the first occurrence keeps the plain
    key, so a prompt's key does not depend on whether it is repeated.
    """
    request: dict[str, Any] = {"backend": backend, "model": model, "messages": list(messages), "params": params}
    if sample:
        request["sample"] = sample
    canon = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


class ResponseCache:
    """``root/<key[:2]>/<key>.json``; ``get`` ignores (and logs) an unreadable entry."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Completion | None:
        path = self.path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError) as exc:  # cannot happen through put(); a hand edit can
            log.warning("cache entry %s is unreadable (%s); asking again", path, exc)
            return None
        if entry.get("key") != key or not isinstance(entry.get("response"), str):
            log.warning("cache entry %s does not belong to its key; asking again", path)
            return None
        return Completion(
            id="",
            response=entry["response"],
            model_id=entry.get("model_id"),
            usage=dict(entry.get("usage") or {}),
            finish_reason=entry.get("finish_reason"),
        )

    def put(
        self,
        key: str,
        *,
        backend: str,
        model_name: str,
        model: str,
        messages,
        params: dict,
        completion: Completion,
        sample: int = 0,
    ) -> None:
        if completion.response is None:
            return
        write_json(
            {
                "key": key,
                "backend": backend,
                "model_name": model_name,  # the config's name for it
                "model": model,  # what crucible asked for (server model name or checkpoint)
                "model_id": completion.model_id,  # what the server reports it ran
                "messages": list(messages),
                "params": params,
                "sample": sample,
                "response": completion.response,
                "finish_reason": completion.finish_reason,
                "usage": completion.usage,
                "time": datetime.now(UTC).isoformat(timespec="seconds"),
            },
            self.path(key),
        )
