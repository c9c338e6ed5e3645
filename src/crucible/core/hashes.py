"""The one function that hashes a file (:func:`file_sha256`), and the other digests a publisher
pins a file by: its git blob id (what ``git hash-object`` prints) and its MD5 (what figshare
publishes, checked on fetch, never a pin on its own).

A pin is checked against every byte on every read (``cached=False``, the default: an edit is
always seen, whatever a file's stat says). What only identifies a job's inputs may take the
digest from a cache (``cached=True``): hashing a large checkpoint takes seconds, and a rerun
then reads nothing again. The cache is keyed by the file's real path, size, mtime and ctime
(ns), inode and device, so any write to the file is hashed anew, also when its mtime was set
back afterwards (``touch -r`` restores an mtime; the ctime moves with every change and cannot
be set back). It lives in ``$CRUCIBLE_HASH_CACHE`` (default ``$XDG_CACHE_HOME/crucible/sha256``
or ``~/.cache/crucible/sha256``); a cache that cannot be written only costs time.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from crucible.core.errors import CrucibleError, HashMismatchError

log = logging.getLogger(__name__)

CHUNK = 1 << 20


def cache_dir() -> Path:
    explicit = os.environ.get("CRUCIBLE_HASH_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "crucible" / "sha256"


def _read_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: str | os.PathLike, *, cached: bool = False) -> str:
    """SHA-256 of the file at ``path`` (a link is followed). ``cached``: from the stat-keyed
    cache when the file is unchanged since it was last hashed (never for a pin's check)."""
    if not cached:
        return _read_sha256(path)
    real = Path(os.path.realpath(path))
    try:
        st = real.stat()
    except OSError as exc:
        raise CrucibleError(f"{path}: cannot read: {exc}") from exc
    stat = f"{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\0{st.st_dev}"
    key = hashlib.sha256(f"{real}\0{stat}".encode()).hexdigest()
    entry = cache_dir() / key[:2] / key
    try:
        cached_value = entry.read_text(encoding="ascii").strip()
        if len(cached_value) == 64:
            return cached_value
    except (OSError, UnicodeDecodeError):
        pass
    value = _read_sha256(real)
    if real.stat().st_ctime_ns != st.st_ctime_ns:
        return value  # written while it was read: never cache a digest the key may not match
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = entry.with_name(f".{key}.{os.getpid()}")
        tmp.write_text(value + "\n", encoding="ascii")
        os.replace(tmp, entry)
    except OSError as exc:
        log.debug("hash cache %s not written: %s", entry, exc)
    return value


def check_hash(path: str | os.PathLike, expected: str, artifact: str) -> str:
    """Raise :class:`HashMismatchError` naming the artifact unless ``path`` hashes to ``expected``."""
    actual = file_sha256(path)
    if actual != expected.lower():
        raise HashMismatchError(
            f"SHA-256 mismatch for artifact {artifact!r} ({path}): expected {expected.lower()}, got {actual}"
        )
    return actual


def md5_file(path: str | os.PathLike) -> str:
    """The MD5 a figshare file is published with; never a pin on its own (the fetch records the
    SHA-256 of the file that matched it)."""
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def git_blob_id(path: str | os.PathLike) -> str:
    """What ``git hash-object`` prints: SHA-1 of ``b"blob <size>\\0" + content``."""
    digest = hashlib.sha1(f"blob {os.path.getsize(path)}\0".encode())
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def pin_mismatch(
    path: str | os.PathLike,
    *,
    sha256: str | None = None,
    git_blob: str | None = None,
    md5: str | None = None,
    size: int | None = None,
    every: bool = True,
) -> tuple[str, str, str] | None:
    """The first pin the file at ``path`` fails, as (what, pinned, got), or None: the one ladder a
    fetch (``every``: each pin given, SHA-256, git blob id, size, MD5) and a read (``every=False``:
    the strongest pin given alone, SHA-256, else the git blob id, else size and MD5) both climb.
    Each caller words the error for its reader."""
    checks = [
        ("SHA-256", sha256, file_sha256),
        ("git blob id", git_blob, git_blob_id),
        ("size", None if size is None else str(size), lambda p: str(Path(p).stat().st_size)),
        ("MD5", md5, md5_file),
    ]
    given = [(what, pinned.lower(), digest) for what, pinned, digest in checks if pinned]
    if not every and given:
        strongest = given[0][0]
        given = given[:1] if strongest in ("SHA-256", "git blob id") else given
    for what, pinned, digest in given:
        got = digest(path)
        if got != pinned:
            return what, pinned, got
    return None
