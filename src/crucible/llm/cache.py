"""The response cache: one JSON file per answered request, keyed by what determines the answer.

The key is the SHA-256 of (backend, model, messages, generation parameters); the server's
address and the API key are not part of it, so that a vLLM server that moves to another node
keeps its cache, and no secret ever reaches the disk. Each entry is written to a temporary file
and renamed into place (one rename per item), so a job killed at any moment leaves only whole
entries: the next run reads them and sends only the requests that have none. Failures are not
cached, so a rerun retries them.

Each entry carries the SHA-256 of its own content (``sha256``), and a read checks it and that
the stored request still hashes to the entry's key: an entry edited on disk, however valid its
JSON, is refused with a warning naming it and asked again (the new answer replaces it).

Jobs sharing one cache (two benchmarks asking the same prompts, a rerun started beside a
running job) claim an item before asking for it: ``<key>.claim`` created exclusively, naming
the host and process, its modification time refreshed while the job lives. A job finding an
item claimed waits for the other's answer instead of paying for it again; a claim whose process
is gone (same host) or that has not been refreshed for ``stale_s`` (another node) is taken over.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crucible.core.errors import CrucibleError
from crucible.core.io import write_json
from crucible.llm.files import Completion

log = logging.getLogger(__name__)

DEFAULT_CACHE_DIR = "results/llm/cache"
HEARTBEAT_S = 10.0  # how often a live job refreshes its claims
STALE_S = 120.0  # a claim not refreshed for this long belongs to a dead job (clock skew between nodes)


class CacheWriteError(CrucibleError):
    """An entry or claim could not be written (full disk, permissions): the path and the reason."""


def request_key(
    backend: str,
    model: str,
    messages: list[dict] | tuple[dict, ...],
    params: dict[str, Any],
    sample: int = 0,
    response_schema: dict[str, Any] | None = None,
) -> str:
    """``sample`` numbers repeats of the same messages within one prompt set (0 for the first).

    A benchmark that asks for several samples of one prompt (k structures for one composition)
    must get k cached answers back, not one answer k times; the first occurrence keeps the plain
    key, so a prompt's key does not depend on whether it is repeated. ``response_schema`` is the
    schema the answer was constrained to (structured output), None for a free answer: the same
    messages answered under a schema and without one are two requests.
    """
    request: dict[str, Any] = {"backend": backend, "model": model, "messages": list(messages), "params": params}
    if sample:
        request["sample"] = sample
    if response_schema is not None:
        request["response_schema"] = response_schema
    canon = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def entry_digest(entry: dict[str, Any]) -> str:
    """SHA-256 of everything in the entry but the digest itself."""
    body = {k: v for k, v in entry.items() if k != "sha256"}
    canon = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def _refusal(entry: Any, key: str) -> str | None:
    """Why ``entry`` cannot be trusted as the answer for ``key``; None if it can."""
    if not isinstance(entry, dict):
        return f"it is a JSON {type(entry).__name__}, not an object"
    if entry.get("key") != key:
        return f"its key {str(entry.get('key'))[:16]}... is not its file's"
    if "sha256" not in entry:
        return "it has no checksum (written by an older crucible)"
    if entry["sha256"] != entry_digest(entry):
        return "its content does not match its checksum (edited after it was written)"
    try:
        again = request_key(
            entry["backend"],
            entry["model"],
            entry["messages"],
            entry["params"],
            int(entry.get("sample") or 0),
            entry.get("response_schema"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        return f"its request is incomplete ({exc!r})"
    if again != key:
        return "its request does not hash to its key"
    if not isinstance(entry.get("response"), str):
        return "its response is not a string"
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


class ResponseCache:
    """``root/<key[:2]>/<key>.json`` (entries) and ``<key>.claim`` (items being asked for)."""

    def __init__(self, root: str | os.PathLike, stale_s: float | None = None, heartbeat_s: float | None = None):
        self.root = Path(root)
        self.stale_s = float(STALE_S if stale_s is None else stale_s)
        self.heartbeat_s = float(HEARTBEAT_S if heartbeat_s is None else heartbeat_s)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def claim_path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.claim"

    def get(self, key: str) -> Completion | None:
        path = self.path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:  # cannot happen through put()
            log.warning("cache entry %s is unreadable (%s); asking again", path, exc)
            return None
        why = _refusal(entry, key)
        if why is not None:
            log.warning("cache entry %s refused: %s; asking again", path, why)
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
        response_schema: dict[str, Any] | None = None,
    ) -> None:
        if completion.response is None:
            return
        entry = {
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
        }
        if response_schema is not None:
            entry["response_schema"] = response_schema
        # The digest of the entry as it will read back (JSON turns tuples into lists).
        entry = json.loads(json.dumps(entry))
        entry["sha256"] = entry_digest(entry)
        path = self.path(key)
        try:
            write_json(entry, path)
        except OSError as exc:
            raise CacheWriteError(f"response cache: cannot write {path}: {exc.strerror or exc}") from exc

    def claims(self) -> Claims:
        return Claims(self)


class Claims:
    """The claims of one job on a cache; a context manager that refreshes them and, at exit,
    releases every one still held (the answered ones are released as they are written)."""

    def __init__(self, cache: ResponseCache):
        self.cache = cache
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.held: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Claims:
        self._thread = threading.Thread(target=self._heartbeat, name="llm-claims", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for key in list(self.held):
            self.release(key)

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.cache.heartbeat_s):
            with self._lock:
                keys = list(self.held)
            for key in keys:
                try:
                    os.utime(self.cache.claim_path(key))
                except OSError:
                    pass  # released meanwhile

    def take(self, key: str) -> bool:
        """Claim ``key``; False while another live job holds it. A stale claim is taken over."""
        path = self.cache.claim_path(key)
        for _ in range(2):
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                why = self.stale(key)
                if why is None:
                    return False
                log.warning("claim %s is stale (%s); taking it over", path, why)
                tomb = path.with_name(f"{path.name}.{uuid.uuid4().hex}.stale")
                try:
                    os.rename(path, tomb)  # one taker wins; the others find the new claim
                    tomb.unlink()
                except FileNotFoundError:
                    pass
                continue
            except OSError as exc:
                raise CacheWriteError(f"response cache: cannot write {path}: {exc.strerror or exc}") from exc
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump({"host": self.host, "pid": self.pid, "time": time.time()}, fh)
            except OSError as exc:
                path.unlink(missing_ok=True)
                raise CacheWriteError(f"response cache: cannot write {path}: {exc.strerror or exc}") from exc
            with self._lock:
                self.held.add(key)
            return True
        return False

    def stale(self, key: str) -> str | None:
        """Why the claim on ``key`` belongs to no live job; None while it does (or is gone)."""
        path = self.cache.claim_path(key)
        try:
            age = time.time() - path.stat().st_mtime
            holder = json.loads(path.read_text(encoding="utf-8") or "{}")
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            holder = {}  # being written this instant, or damaged: judged by its age alone
        if isinstance(holder, dict) and holder.get("host") == self.host and isinstance(holder.get("pid"), int):
            if holder["pid"] != self.pid and not _pid_alive(holder["pid"]):
                return f"process {holder['pid']} on this host has ended"
        # Also on this host: a live pid may be a new process that inherited a dead job's number.
        if age > self.cache.stale_s:
            return f"not refreshed for {age:.0f} s (more than {self.cache.stale_s:g} s)"
        return None

    def holder(self, key: str) -> str:
        try:
            h = json.loads(self.cache.claim_path(key).read_text(encoding="utf-8"))
            return f"process {h['pid']} on {h['host']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "another job"

    def is_free(self, key: str) -> bool:
        return not self.cache.claim_path(key).exists()

    def release(self, key: str) -> None:
        with self._lock:
            if key not in self.held:
                return
            self.held.discard(key)
        self.cache.claim_path(key).unlink(missing_ok=True)
