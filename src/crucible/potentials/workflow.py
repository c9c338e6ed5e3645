"""The potentials every family runs, as pure functions of the config dict for the rules.

A potential name (in ``mlip.models``, ``catalysis.models``, crystal mlip-search's ``model``) is a
registered one (:mod:`crucible.potentials.registry`) or a user's, defined in the top-level
``potentials:`` section (:mod:`crucible.potentials.custom`). The section used to be
``mlip.custom_potentials``; that key is still read for one release, with a deprecation message
logged once, and a name defined under both is a :class:`ConfigError`.

A rule that runs a potential comes in two variants, ``<rule>`` and ``<rule>_neural``: each takes the
potentials of one device (:func:`potentials_on`, from the spec's ``device``), so that a CPU
potential (EMT, a user's with ``device: cpu``) never asks for a GPU and a network always does.
The variant is named for what it runs (a network), not for a GPU the machine may not have: on a
CPU-only machine it runs there, holding the scheduler's one ``gpu`` slot so networks run one at a
time; on SLURM its name routes it to the GPU partition (profiles/slurm).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from crucible.core.errors import ConfigError
from crucible.dag.config import put_on_python_path, section
from crucible.identity.name_book import Meaning, registered

log = logging.getLogger(__name__)

SECTION = "potentials"
DEPRECATED_KEY = "mlip.custom_potentials"  # read until the next release
_deprecation_logged = False


def _deprecated_entries(config: dict[str, Any]) -> dict[str, Any]:
    """``mlip.custom_potentials`` as configured (the schema's defaults filled in)."""
    if not (config.get("mlip") or {}).get("custom_potentials"):
        return {}
    return section(config, "mlip")["custom_potentials"]


def _log_deprecation() -> None:
    global _deprecation_logged
    if not _deprecation_logged:
        _deprecation_logged = True
        log.warning(
            "config %s is deprecated and read for one more release only: move its entries to the "
            "top-level section %s: (the same entries, one name each)",
            DEPRECATED_KEY,
            SECTION,
        )


def config_keys(config: dict[str, Any]) -> dict[str, str]:
    """The config key of every user's potential: ``potentials.<name>``, or the deprecated
    ``mlip.custom_potentials.<name>`` where it is defined there."""
    keys = {name: f"{SECTION}.{name}" for name in section(config, SECTION)}
    for name in _deprecated_entries(config):
        if name in keys:
            raise ConfigError(
                f"config {DEPRECATED_KEY}.{name}: potential {name!r} is also defined under {SECTION}.{name}; "
                f"define it once, under {SECTION}: ({DEPRECATED_KEY} is deprecated)"
            )
        keys[name] = f"{DEPRECATED_KEY}.{name}"
    return dict(sorted(keys.items()))


def custom_potentials(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every user's potential: name -> {class, params, ...} (see :mod:`crucible.potentials.custom`),
    from ``potentials:`` and the deprecated ``mlip.custom_potentials``."""
    config_keys(config)  # a name defined twice
    old = _deprecated_entries(config)
    if old:
        _log_deprecation()
    entries = section(config, SECTION) | old
    return {k: dict(v) for k, v in sorted(entries.items())}


def potential_names(config: dict[str, Any]) -> list[str]:
    """Every potential name a config may use: the registered ones and the user's own."""
    from crucible.potentials.registry import registered_models

    return sorted(set(registered_models()) | set(custom_potentials(config)))


def check_potential_names(config: dict[str, Any], names: list[str], key: str) -> None:
    """Fail at start-up on a potential name (at config ``key``) that is neither registered nor custom."""
    known = potential_names(config)
    unknown = [m for m in names if m not in known]
    if unknown:
        raise ConfigError(f"config {key}: unknown potential(s) {', '.join(unknown)}; known: {', '.join(known)}")


def check(config: dict[str, Any]) -> None:
    """Start-up check of the users' potentials (crucible.dag.config.check_config runs it before the
    families' checks): each factory imports, no name shadows a registered potential or is
    defined twice (the error names the entry's config key)."""
    from crucible.potentials.custom import check_custom_potentials
    from crucible.potentials.registry import registered_models

    check_custom_potentials(custom_potentials(config), registered_models(), config_keys(config))


def device(config: dict[str, Any], name: str) -> str:
    """Where potential ``name``'s jobs run ("cpu" or "gpu"): its spec's device, or a user's
    entry's ``device`` (gpu unless it says cpu)."""
    from crucible.potentials.custom import device_of
    from crucible.potentials.registry import REGISTRY

    custom = custom_potentials(config)
    if name in custom:
        return device_of(custom[name])
    return REGISTRY[name].device if name in REGISTRY else "gpu"


def potentials_on(config: dict[str, Any], on: str, names: Iterable[str]) -> list[str]:
    """Those of ``names`` whose jobs run on ``on`` ("cpu" or "gpu"): the ``cat_model``/``model``
    constraint of a potential rule's CPU or GPU variant. An unknown name goes to the GPU variant
    (the start-up check refuses it before any job runs)."""
    return sorted(name for name in set(names) if device(config, name) == on)


def custom_potential_sources(config: dict[str, Any], name: str) -> list[str]:
    """Every source file of a user's potential whose module sits beside the project (under the
    working directory), as job inputs: the module's whole top-level package (what its import can
    read), so that editing any module of it reruns the potential's jobs. An installed package is
    identified in its provenance instead (version and the SHA-256 of its files); a registered
    potential has none."""
    from crucible.core.fingerprint import module_source, not_source, tree_files

    custom = custom_potentials(config)
    if name not in custom:
        return []
    module = custom[name]["class"].partition(":")[0]
    put_on_python_path(os.getcwd())  # where a module beside the project is found (common.smk does the same)
    source = module_source(module)
    here = Path(os.getcwd()).resolve()
    if source is None or here not in source.resolve().parents:
        return []  # not found (the start-up check names the key) or installed
    source = source.resolve()
    if source.is_file():
        return [source.relative_to(here).as_posix()]
    files = tree_files(source, links="follow", skip=not_source)
    return [(source / rel).relative_to(here).as_posix() for rel, _ in files]


def custom_potential_json(config: dict[str, Any], name: str) -> str:
    """``{name: entry}`` as JSON for a job running the user's potential ``name`` (only its own
    entry: a changed class or params reruns its jobs and no other); "" for a registered one. The
    same entry gives the same JSON under either config key."""
    custom = custom_potentials(config)
    return json.dumps({name: custom[name]}, sort_keys=True) if name in custom else ""


POTENTIAL_REGISTRY = "crucible.potentials.registry"


def potential_code(config: dict[str, Any], name: str) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """What potential ``name`` runs beyond its jobs' commands, and the files it loads by path: a
    registered one's registry entry (and a hub model's local weights), a user's factory (followed
    through the user's modules beside the project) and every existing file or folder its params
    name (a checkpoint)."""
    from crucible.identity.job_code import class_root, entry_root

    custom = custom_potentials(config)
    if name in custom:
        entry = custom[name]
        params = entry.get("params") or {}
        files = tuple(sorted(str(v) for v in params.values() if isinstance(v, str) and v and os.path.exists(v)))
        return (class_root(entry["class"]),), files
    from crucible.potentials.registry import REGISTRY, weights_files

    if name not in REGISTRY:
        return (), ()
    return (entry_root(POTENTIAL_REGISTRY, name),), tuple(weights_files(name))


def potential_meanings(config: dict[str, Any], names: Iterable[str]) -> dict[str, Meaning]:
    """``potential/<name>``: a registered potential, or a user's entry, one meaning for every
    family that runs it (whichever key the entry is under)."""
    custom = custom_potentials(config)
    keys = config_keys(config)
    out = {}
    for name in sorted(set(names)):
        code, files = potential_code(config, name)
        out[f"potential/{name}"] = Meaning(
            {"custom": custom[name]} if name in custom else registered(name),
            keys[name] if name in custom else f"potential {name}",
            f"give the potential a name of its own under {SECTION}",
            code=code,
            files=files,
            declared=tuple(custom[name].get("files", [])) if name in custom else (),
        )
    return out
