"""``config/sources.yaml`` read and checked: the artifacts it pins, and the roles by which the
library asks for their files (:class:`Pin`). Nothing is fetched or read here beyond the sources
file itself; :mod:`crucible.sources.downloads` fetches the files, :mod:`crucible.sources.pinned_files` extracts and checks them."""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crucible.core.errors import ConfigError
from crucible.core.yaml_files import load_mapping

# The repository's own sources file (the package is installed editable from the checkout).
SOURCES_FILE = Path(__file__).resolve().parents[3] / "config" / "sources.yaml"


def load_sources(path: str | os.PathLike = SOURCES_FILE) -> dict[str, Any]:
    """Read ``config/sources.yaml`` and check that every entry carries what fetching needs, and
    that every role names exactly one file."""
    path = Path(path)
    try:
        doc = load_mapping(path)
    except ConfigError as exc:
        raise ConfigError(f"cannot read sources file {exc}") from None
    artifacts = (doc or {}).get("artifacts")
    if not isinstance(artifacts, dict) or not artifacts:
        raise ConfigError(f"{path}: no 'artifacts' mapping")
    for name, spec in artifacts.items():
        if not isinstance(spec, dict):
            raise ConfigError(f"{path}: artifact {name!r}: a mapping of its fields expected, got {spec!r:.40}")
        kind = spec.get("kind")
        # an http artifact may carry a git blob id or an MD5 (and size) instead of a SHA-256, or no
        # pin at all: fetching it then refuses and prints the pin to add (see fetch)
        required = {"pip": ("requirement", "filename", "sha256"), "http": ("url", "filename")}.get(kind)
        if required is None:
            raise ConfigError(f"{path}: artifact {name!r}: unknown kind {kind!r} (pip or http)")
        missing = [key for key in required if not spec.get(key)]
        if missing:
            raise ConfigError(f"{path}: artifact {name!r}: missing field(s) {', '.join(missing)}")
        if spec.get("md5") and not re.fullmatch(r"[0-9a-f]{32}", str(spec["md5"]).lower()):
            raise ConfigError(f"{path}: artifact {name!r}: md5 {spec['md5']!r} is not 32 hex digits")
        if "size" in spec and not (isinstance(spec["size"], int) and spec["size"] > 0):
            raise ConfigError(f"{path}: artifact {name!r}: size {spec['size']!r} is not a positive number of bytes")
        if not isinstance(spec.get("members") or {}, dict):
            raise ConfigError(f"{path}: artifact {name!r}: 'members' must map each member to its path and sha256")
        for member, mspec in (spec.get("members") or {}).items():
            if not (isinstance(mspec, dict) and mspec.get("path") and mspec.get("sha256")):
                raise ConfigError(f"{path}: artifact {name!r} member {member!r}: needs 'path' and 'sha256'")
        if spec.get("role") and spec.get("members"):
            raise ConfigError(f"{path}: artifact {name!r}: an archive's members carry the roles, not the archive")
        _check_shipped(path, name, spec)
    if not isinstance(doc.get("installed") or {}, dict):
        raise ConfigError(f"{path}: 'installed' must map each package to its version and files")
    for package, pspec in (doc.get("installed") or {}).items():
        if not (isinstance(pspec, dict) and pspec.get("version") and isinstance(pspec.get("files"), dict)):
            raise ConfigError(f"{path}: installed package {package!r}: needs 'version' and a 'files' mapping")
        for file, fspec in pspec["files"].items():
            if not (isinstance(fspec, dict) and fspec.get("role") and fspec.get("sha256")):
                raise ConfigError(f"{path}: installed package {package!r} file {file!r}: needs 'role' and 'sha256'")
    _role_pins(doc, str(path))
    return doc


def _check_shipped(path: Path, name: str, spec: dict[str, Any]) -> None:
    """``shipped``: a file of the repository's ``data/`` folder (a relative path, never leaving it);
    ``upstream_config``: only beside it."""
    shipped = spec.get("shipped")
    if shipped is not None:
        parts = Path(str(shipped)).parts
        if not isinstance(shipped, str) or Path(shipped).is_absolute() or ".." in parts or parts[:1] != ("data",):
            raise ConfigError(
                f"{path}: artifact {name!r}: shipped {shipped!r} must be a path under data/, relative to the "
                "repository root (data/<source>/<upstream path>)"
            )
    if spec.get("upstream_config") and not shipped:
        raise ConfigError(f"{path}: artifact {name!r}: upstream_config without shipped (nothing to switch from)")


def repo_root(sources: str | os.PathLike | None = None) -> Path:
    """The repository a sources file belongs to (the folder above its ``config/``), against which
    ``shipped`` paths are read; for a sources file elsewhere (an edited copy) or none, this checkout."""
    if sources is not None and not isinstance(sources, dict):
        path = Path(sources).resolve()
        if path.parent.name == "config":
            return path.parent.parent
    return SOURCES_FILE.parents[1]


def config_value(config: dict[str, Any], key: str | None) -> Any:
    """The value of a dotted config key (``discovery.url_prefix``), None when unset."""
    if not key:
        return None
    value: Any = config
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def origin_spec(
    spec: dict[str, Any],
    root: str | os.PathLike | None = None,
    url_prefix: str | None = None,
    upstream: bool = False,
) -> dict[str, Any]:
    """The artifact's spec as its fetch uses it: a shipped file is copied from ``root``/``shipped``
    unless ``upstream``; a download goes to its url, or below ``url_prefix`` (a mirror keeping the
    upstream layout, ``mirror_path``, else the file name). The pins are the same either way."""
    spec = dict(spec)
    if spec.get("shipped") and not upstream:
        spec["shipped"] = str(Path(root if root is not None else repo_root()) / spec["shipped"])
        return spec
    spec.pop("shipped", None)
    if url_prefix and spec["kind"] == "http":
        spec["url"] = url_prefix.rstrip("/") + "/" + spec.get("mirror_path", spec["filename"])
    return spec


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


@dataclass(frozen=True)
class Pin:
    """The one file a role of ``config/sources.yaml`` names, and the hashes that pin it."""

    role: str
    artifact: str
    member: str | None  # None: the artifact's own file (a download that is read as it is)
    location: str  # relative to the resources folder: extracted/<artifact>/<member> or downloads/<filename>
    sha256: str | None  # None: pinned by git blob id or MD5, its SHA-256 recorded in the lock file on fetch
    git_blob: str | None = None
    md5: str | None = None  # a figshare file's published MD5 (and size in bytes)
    size: int | None = None
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
                    str(spec.get("sha256") or "").lower() or None,
                    str(spec.get("git_blob") or "").lower() or None,
                    str(spec.get("md5") or "").lower() or None,
                    spec.get("size"),
                )
            )
        for member, mspec in (spec.get("members") or {}).items():
            if mspec.get("role"):
                add(Pin(str(mspec["role"]), name, member, f"extracted/{name}/{member}", str(mspec["sha256"]).lower()))
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


def pin_at(
    path: str | os.PathLike, sources: dict[str, Any] | str | os.PathLike | None = None
) -> tuple[Pin, Path] | None:
    """(pin, resources folder) of a file lying where the fetch stage puts a role's file, under
    any resources folder (``.../extracted/<artifact>/<member>`` or ``.../downloads/<filename>``);
    None for any other file. Nothing is read: :func:`crucible.sources.pinned_files.pinned` checks it."""
    parts = Path(os.path.abspath(path)).parts
    for pin in _role_pins(sources_doc(sources)).values():
        if pin.package:
            continue
        tail = Path(pin.location).parts
        if len(parts) > len(tail) and parts[-len(tail) :] == tail:
            return pin, Path(*parts[: -len(tail)])
    return None
