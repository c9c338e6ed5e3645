"""The SHA-256 of a file or a folder, of every byte its reader reads.

A folder's digest is the SHA-256 of its sorted ``<relative path>\\0<file SHA-256>\\n`` lines
(the format of the catalysis datasets' pins). How a folder treats symbolic links is chosen by
the caller to match its reader, so that the digest always covers what is read:

- ``links="refuse"``: a link anywhere below the folder is an error naming it (readers that take
  the folder as data, e.g. a VASP tree, refuse links too: :func:`tree_files` is their listing);
- ``links="follow"``: links are followed, as an importer or a model loader follows them (a
  Hugging Face snapshot folder is made of links to its blobs); a folder reached twice through
  links is an error.

Each file's digest is :func:`crucible.core.hashes.file_sha256`'s, from its stat-keyed cache: a
rerun reads nothing again.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable, Literal

from crucible.core.errors import CrucibleError, DataValidationError
from crucible.core.hashes import file_sha256

Links = Literal["refuse", "follow"]


class LinkRefusedError(DataValidationError):
    """A symbolic link inside a folder whose digest and reader refuse links."""


def _skip_nothing(rel: str) -> bool:
    return False


def tree_files(
    root: str | os.PathLike, *, links: Links = "refuse", skip: Callable[[str], bool] = _skip_nothing
) -> list[tuple[str, Path]]:
    """Every regular file below ``root`` as (relative POSIX path, path), sorted by the relative
    path; ``skip`` leaves out entries (files or folders) by their relative path."""
    root = Path(root)
    if not root.is_dir():
        raise DataValidationError(f"{root}: not a folder")
    if links == "refuse" and root.is_symlink():
        raise LinkRefusedError(
            f"{root}: is a symbolic link (to {os.readlink(root)}); give the folder itself (links are not read)"
        )
    out: list[tuple[str, Path]] = []
    seen = {os.path.realpath(root)}

    def walk(folder: Path, prefix: str) -> None:
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            rel = f"{prefix}{entry.name}"
            if skip(rel):
                continue
            path = Path(entry.path)
            if entry.is_symlink():
                if links == "refuse":
                    raise LinkRefusedError(
                        f"{path}: a symbolic link (to {os.readlink(path)}) inside {root}; links are neither hashed "
                        f"nor read there. Replace it by what it points to (e.g. copy the folder with cp -rL)"
                    )
                if not path.exists():
                    raise DataValidationError(f"{path}: a broken symbolic link (to {os.readlink(path)}) inside {root}")
            if entry.is_dir():  # follows a link (refused above when links are refused)
                real = os.path.realpath(path)
                if real in seen:
                    raise DataValidationError(f"{path}: reaches {real} a second time through a link inside {root}")
                seen.add(real)
                walk(path, rel + "/")
            elif entry.is_file():
                out.append((rel, path))

    walk(root, "")
    return sorted(out, key=lambda item: item[0].split("/"))  # path order, part by part


def tree_sha256(
    root: str | os.PathLike, *, links: Links = "refuse", skip: Callable[[str], bool] = _skip_nothing
) -> str:
    """The digest of a folder: SHA-256 of its sorted ``<relative path>\\0<file SHA-256>\\n`` lines."""
    digest = hashlib.sha256()
    for rel, path in tree_files(root, links=links, skip=skip):
        digest.update(f"{rel}\0{file_sha256(path, cached=True)}\n".encode())
    return digest.hexdigest()


def path_sha256(
    path: str | os.PathLike, *, links: Links = "refuse", skip: Callable[[str], bool] = _skip_nothing
) -> str:
    """SHA-256 of a file, or :func:`tree_sha256` of a folder: the one digest of what a job reads."""
    path = Path(path)
    if path.is_file():
        if links == "refuse" and path.is_symlink():
            raise LinkRefusedError(f"{path}: is a symbolic link (to {os.readlink(path)}); give the file itself")
        return file_sha256(path, cached=True)
    if path.is_dir():
        return tree_sha256(path, links=links, skip=skip)
    raise CrucibleError(f"{path}: no such file or folder")


def not_source(rel: str) -> bool:
    """What an import does not read as source: bytecode caches (written by the interpreter) and
    hidden files."""
    name = rel.rsplit("/", 1)[-1]
    return name == "__pycache__" or name.startswith(".") or name.endswith((".pyc", ".pyo"))


def module_source(module: str) -> Path | None:
    """What Python imports for ``module``'s top-level package: its folder, or the one file of a
    plain module; None when it has no files (builtins, namespace packages without a location)."""
    import importlib.util

    top = module.partition(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        locations = list(spec.submodule_search_locations)
        return Path(locations[0]) if len(locations) == 1 else None
    if spec.origin and spec.has_location and Path(spec.origin).is_file():
        return Path(spec.origin)
    return None


def package_sha256(module: str) -> str | None:
    """SHA-256 of every file of ``module``'s top-level package as Python imports it (links
    followed, bytecode caches and hidden files left out: the interpreter writes those itself),
    or of its one file; None for a module without files."""
    source = module_source(module)
    if source is None:
        return None
    return path_sha256(source, links="follow", skip=not_source)


def checkpoint_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a model checkpoint as a loader reads it: a file, or every file of a folder
    (links followed, as loaders follow them; hidden entries such as ``.cache/`` left out)."""
    return path_sha256(path, links="follow", skip=lambda rel: rel.rsplit("/", 1)[-1].startswith("."))
