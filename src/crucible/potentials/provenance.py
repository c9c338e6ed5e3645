"""What ran: the provenance of a loaded potential (its class, params, package and version, the
SHA-256 of a user's code and checkpoints), as recorded beside every result table it produced."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from crucible.potentials.spec import PotentialSpec


def _distribution(module: str) -> tuple[str | None, str | None]:
    """(distribution, version) that installed the top-level package of ``module``, if any."""
    import importlib.metadata

    top = module.partition(".")[0]
    names = importlib.metadata.packages_distributions().get(top) or []
    for dist in sorted(names):
        try:
            return dist, importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None, None


def provenance(spec: PotentialSpec, calc: object, device: str) -> dict[str, Any]:
    """What ran: the potential's name and kind, the class path (a custom potential's factory as
    configured, else the calculator's class), its params, the package that provides it and that
    package's version. A module that no installed distribution provides (one beside the project)
    is identified by its ``__version__`` if it has one. A custom potential is also identified by
    the SHA-256 of every file of its top-level package (``code_sha256``: editing any module of it
    changes it, not only the one the class names) and of every file or folder a param names
    (``files_sha256``: a checkpoint its factory loads), see :mod:`crucible.core.fingerprint`."""
    import sys

    from crucible.core.fingerprint import checkpoint_sha256, package_sha256

    if spec.class_path:
        class_path, module = spec.class_path, spec.class_path.partition(":")[0]
    else:
        cls = type(calc)
        class_path, module = f"{cls.__module__}:{cls.__qualname__}", cls.__module__
    package, version = _distribution(module)
    out: dict[str, Any] = {
        "potential": spec.name,
        "kind": spec.kind,
        "class": class_path,
        "params": dict(spec.params),
        "package": package,
        "version": version,
        "device": device,
    }
    if package is None:
        mod = sys.modules.get(module)
        out["version"] = str(getattr(mod, "__version__", "")) or None
    if spec.kind == "custom":
        code = package_sha256(module)
        if code:
            out["code_sha256"] = code
        files = {
            key: checkpoint_sha256(value)
            for key, value in sorted(spec.params.items())
            if isinstance(value, str) and value and Path(value).exists()
        }
        if files:
            out["files_sha256"] = files
    return out


def provenance_text(prov: Mapping[str, Any]) -> str:
    """One line for a table cell: ``class {params} (package version)``; "" when unknown."""
    import json

    if not prov:
        return ""
    text = str(prov["class"])
    if prov.get("params"):
        text += " " + json.dumps(prov["params"], sort_keys=True)
    if prov.get("package"):
        text += f" ({prov['package']} {prov.get('version')})"
    elif prov.get("version") or prov.get("code_sha256"):
        where = f"version {prov['version']}" if prov.get("version") else "local module"
        sha = prov.get("code_sha256")
        text += f" ({where}{', sha256 ' + sha[:12] if sha else ''})"
    return text


PROVENANCE_KEY = "potential"  # the parquet metadata key of a result table's potential


def provenance_metadata(potential: object) -> dict[str, Any]:
    """The metadata :func:`crucible.core.io.write_parquet` stores with a potential's result table."""
    prov = getattr(potential, "provenance", None)
    return {PROVENANCE_KEY: dict(prov)} if prov else {}


def read_provenance(path: str | os.PathLike) -> dict[str, Any]:
    """The provenance stored with a result table (empty for a file written without one)."""
    from crucible.core.io import read_parquet_metadata

    return dict(read_parquet_metadata(path).get(PROVENANCE_KEY) or {})
