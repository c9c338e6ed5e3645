"""One module of the Matbench Discovery leaderboard's code, run as it is from a checkout of
janosh/matbench-discovery, with what it imports from the rest of ``matbench_discovery`` stood in for.

The package root (whose data module downloads the WBM summary at import time), its ``data`` and
``enums`` modules are replaced by empty modules holding only the names the loaded module imports:
``MbdKey`` becomes a ``StrEnum`` of the given column names (each its own value), every other name
None. So nothing is downloaded and none of the leaderboard's dependencies beyond the loaded
module's own is needed. Used by ``diatomics_vs_leaderboard.py`` and ``kappa_vs_leaderboard.py``
(run as scripts, this folder is on ``sys.path``).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import Any

PACKAGE = "matbench_discovery"


def stand_in(name: str, search: list[Path] | None = None, **attrs: Any) -> types.ModuleType:
    """An empty module ``name`` holding ``attrs``; a package whose submodules are looked for in
    ``search`` when given (``[]``: a package with no real submodules)."""
    module = types.ModuleType(name)
    if search is not None:
        module.__path__ = [str(p) for p in search]
    for key, value in attrs.items():
        setattr(module, key, value)
    return module


def load_module(
    checkout: Path,
    relpath: str,
    *,
    mbd_keys: Iterable[str],
    data_names: Iterable[str] = (),
    enum_names: Iterable[str] = ("Model",),
    root_attrs: dict[str, Any] | None = None,
    others: Iterable[types.ModuleType] = (),
) -> types.ModuleType:
    """The module at ``checkout/relpath`` (a ``.py`` file, or a package's ``__init__.py``) under its
    dotted name, after standing in for the package root (with ``root_attrs``), its
    ``metrics`` package (searching the checkout's folder, so the loaded module's siblings import
    for real), ``data`` (``data_names``, None each) and ``enums`` (``MbdKey`` of ``mbd_keys``,
    ``enum_names`` None each), and ``others`` (modules of other packages, by their names).
    Exits naming the checkout when the file is not there."""
    path = checkout / relpath
    if not path.is_file():
        sys.exit(f"{checkout}: no {relpath}")
    src = checkout / PACKAGE
    modules = [
        stand_in(PACKAGE, [src], **(root_attrs or {})),
        stand_in(f"{PACKAGE}.data", **dict.fromkeys(data_names)),
        stand_in(f"{PACKAGE}.enums", MbdKey=StrEnum("MbdKey", {k: k for k in mbd_keys}), **dict.fromkeys(enum_names)),
        stand_in(f"{PACKAGE}.metrics", [src / "metrics"]),
        *others,
    ]
    sys.modules.update({m.__name__: m for m in modules})
    dotted = Path(relpath).with_suffix("")
    if dotted.name == "__init__":
        dotted = dotted.parent
    name = ".".join(dotted.parts)
    package = [str(path.parent)] if path.name == "__init__.py" else None
    spec = importlib.util.spec_from_file_location(name, path, submodule_search_locations=package)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
