"""One artifact of ``config/sources.yaml`` by its name: fetched (a mirror in place of its upstream
folder), its members extracted, or the file of a role provided; what ``crucible sources`` runs."""

from __future__ import annotations

import os

from crucible.core.archives import extract
from crucible.core.io import InFile
from crucible.sources import downloads, pinned_files, pins


def fetch_artifact(
    out: str | os.PathLike,
    artifact: str | None = None,
    matminer_task: str | None = None,
    sources: str | os.PathLike = "config/sources.yaml",
    url_prefix: str | None = None,
    sha256: str | None = None,
    lock: str | os.PathLike | None = None,
    upstream: bool = False,
) -> None:
    """Download ``artifact`` (or the upstream matminer dataset of ``matminer_task``, pinned by
    ``sha256`` when it comes from a mirror) to ``out`` and check its SHA-256.

    Args:
        out: destination file
        artifact: artifact name in the sources file
        matminer_task: upstream matminer dataset of this Matbench task
        url_prefix: mirror replacing the upstream URL's folder
        sha256: pinned hash of a mirror's own copy
        lock: lock file recording the SHA-256 of artifacts pinned by git blob id
        sources: the pinned sources file (default: config/sources.yaml)
        upstream: download an artifact that ships in the repository (``shipped:``) instead of
            copying it; the pins are the same
    """
    if matminer_task:
        spec = pinned_files.matminer_artifact(matminer_task, url_prefix, sha256)
        name = matminer_task
    else:
        spec = pinned_files.get_artifact(pinned_files.load_sources(sources), artifact)
        spec = pins.origin_spec(spec, pins.repo_root(sources), url_prefix, upstream)
        name = artifact
    downloads.fetch(name, spec, out, lock=lock, sources_file=sources)


def extract_members(
    artifact: str,
    archive: InFile,
    out_dir: str | os.PathLike,
    sources: str | os.PathLike = "config/sources.yaml",
    members: list[str] | None = None,
) -> None:
    """Take the pinned ``members`` (default: every one) of ``artifact`` out of ``archive``.

    Args:
        artifact: artifact name in the sources file
        archive: the downloaded archive (its SHA-256 is checked first)
        out_dir: folder the members are written into
        members: default: every pinned member
        sources: as in :func:`crucible.sources.artifacts.fetch_artifact`
    """
    spec = pinned_files.get_artifact(pinned_files.load_sources(sources), artifact)
    extract(artifact, spec, archive, out_dir, members or None)


def provide_role(
    role: str,
    sources: str | os.PathLike | None = None,
    resources: str | os.PathLike = "resources",
    url_prefix: str | None = None,
    upstream: bool = False,
) -> None:
    """:func:`crucible.sources.pinned_files.provide`, printing the path of the checked file.

    Args:
        role: e.g. reactions/cernak (see config/sources.yaml)
        sources: the pinned sources file (default: config/sources.yaml)
        resources: the folder the workflow fills
        url_prefix: mirror replacing the upstream URL's folder (http artifacts)
        upstream: download a file that ships in the repository instead of copying it
    """
    print(pinned_files.provide(role, resources, sources=sources, url_prefix=url_prefix, upstream=upstream))
