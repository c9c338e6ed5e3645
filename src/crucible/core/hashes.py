"""The hashes that pin a raw file: its SHA-256, its git blob id (what ``git hash-object``
prints) and its MD5 (what figshare publishes), each computed from every byte on every call (no cache: an edit is always seen)."""

from __future__ import annotations

import hashlib
import os

from crucible.core.errors import HashMismatchError

CHUNK = 1 << 20


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def check_hash(path: str | os.PathLike, expected: str, artifact: str) -> str:
    """Raise :class:`HashMismatchError` naming the artifact unless ``path`` hashes to ``expected``."""
    actual = sha256_file(path)
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
