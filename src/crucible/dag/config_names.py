"""Names that become paths or markup, and the config's name-keyed mappings: one rule for both.

A name (a run, dataset, model, potential, generator or file name) ends up in ``results/...``
paths, in Snakemake wildcards and in the report's reStructuredText. :func:`check_name` is the
one validator: a non-empty string without control or format characters (``"steels\\n"``, a
right-to-left override), without path separators and not ``.``/``..``. (The config schemas'
``pattern: "^...$"`` would not do: Python's ``$`` also matches before a final newline.)

:func:`check_config_names` runs at start-up (:func:`crucible.dag.config.check_config`): every key
of every mapping in the config must be a string (YAML reads ``1:`` as an integer, which then
breaks sorting and ``json.dumps(sort_keys=True)`` deep in a job), every name a user defines or
lists (at the key paths each family declares: ``Family.defined_names``, ``listed_names``,
``single_names``) passes :func:`check_name`, and a parameters mapping keyed by names (``model_params``,
``generator_params``) refuses a key that names nothing, since its parameters would be ignored.
Each refusal is a :class:`~crucible.core.errors.ConfigError` naming the key path, worded the same for
every family.
"""

from __future__ import annotations

import unicodedata
from typing import Any, Iterable, Mapping

from crucible.core.errors import ConfigError

MAX_NAME = 200


def name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be a name, or None."""
    if not isinstance(name, str):
        return f"{name!r} is a {type(name).__name__}, not a string (quote it in YAML)"
    if not name:
        return "an empty name"
    if len(name) > MAX_NAME:
        return f"{name[:40]!r}... is longer than {MAX_NAME} characters"
    for ch in name:
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            return f"{name!r} holds the control character {unicodedata.name(ch, f'U+{ord(ch):04X}')}"
    if "/" in name or "\\" in name:
        return f"{name!r} holds a path separator"
    if name in (".", ".."):
        return f"{name!r} names a folder, not a thing"
    if name != name.strip():
        return f"{name!r} begins or ends with white space"
    return None


def check_name(name: Any, where: str) -> str:
    """``name`` if it can be a path component and a literal in the report; else ConfigError."""
    why = name_problem(name)
    if why:
        raise ConfigError(f"config error at {where}: {why}")
    return name


def _path(parts: Iterable[Any]) -> str:
    return ".".join(str(p) for p in parts)


def _string_keys(value: Any, parts: tuple[Any, ...]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConfigError(
                    f"config error at {_path(parts + (key,))}: the key {key!r} is not a string ({type(key).__name__}); "
                    "keys are names (strings): quote it in YAML"
                )
            _string_keys(item, parts + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _string_keys(item, parts + (i,))


# The shared services' sections whose keys a user defines as new names (a family declares its
# own key paths: crucible.dag.families.Family.defined_names, listed_names, single_names).
SERVICE_DEFINED_NAMES = (("potentials",),)


def name_key_paths() -> tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...]]:
    """(defined, listed, single): the config's key paths of mappings whose keys are new names, of
    lists of names and of single names, each from the section's top: every registered family's
    (``Family.defined_names`` ...), then the services'."""
    from crucible.dag.families import families

    fams = families()
    defined = tuple((f.name, *k) for f in fams for k in f.defined_names) + SERVICE_DEFINED_NAMES
    listed = tuple((f.name, *k) for f in fams for k in f.listed_names)
    single = tuple((f.name, *k) for f in fams for k in f.single_names)
    return defined, listed, single


def _at(config: Mapping[str, Any], key_path: tuple[str, ...]) -> Any:
    value: Any = config
    for part in key_path:
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def check_config_names(config: Mapping[str, Any]) -> None:
    """The config's keys and names, before any family reads them (see the module docstring)."""
    _string_keys(config, ())
    defined, listed, single = name_key_paths()
    for key_path in defined:
        mapping = _at(config, key_path)
        for name in mapping if isinstance(mapping, Mapping) else ():
            check_name(name, f"{_path(key_path)}.{name}")
    for key_path in listed:
        names = _at(config, key_path) or []
        for i, name in enumerate(names if isinstance(names, list) else []):
            check_name(name, f"{_path(key_path)}[{i}]")
    for key_path in single:
        parent = _at(config, key_path[:-1])
        if isinstance(parent, Mapping) and key_path[-1] in parent:
            check_name(parent[key_path[-1]], _path(key_path))
    from crucible.dag.families import families

    keyed = [(f.name, key, what, known) for f in families() for key, (what, known) in sorted(f.keyed_by_name.items())]
    for section, key, what, known_names in keyed:
        sec = config.get(section) or {}
        given = sec.get(key) or {}
        if not given:
            continue
        known = known_names(sec)
        for name in sorted(given):
            if name not in known:
                raise ConfigError(
                    f"config error at {section}.{key}.{name}: no {what} of that name "
                    f"(known: {', '.join(sorted(known))}); its parameters would be ignored"
                )
