"""What the stage writes beside a response file: how the answers were constrained, which
checkpoint or address answered, and, for a failed run, each failed item's reason."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from crucible.core.hashes import file_sha256
from crucible.core.io import write_json
from crucible.llm.backend import Backend
from crucible.llm.files import Completion

log = logging.getLogger(__name__)


def constraint_record(backend: Backend, structured: bool) -> dict[str, Any]:
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
    sha = file_sha256(path)
    role = None
    try:
        from crucible.sources.pinned_files import roles

        role = next((name for name, pin in sorted(roles().items()) if getattr(pin, "sha256", None) == sha), None)
    except Exception as exc:  # noqa: BLE001 - the record says what it can; no pins file is no error
        log.debug("no role looked up for %s: %s", path, exc)
    return {"sha256": sha, "role": role}


def public_url(url: str) -> str:
    """The base URL without any user:password@ part, query string or fragment: what a record may
    hold. The config refuses all three (crucible.llm.model_entry); this holds for a backend made by hand."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


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
