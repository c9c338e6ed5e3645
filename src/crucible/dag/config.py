"""The workflow config: one schema section per benchmark family, put together here.

Each family's section is described by ``crucible/<family>/config.schema.yaml`` and stands alone: a
config with only ``reactions:`` (or only ``crystal:``) is complete. Defaults live only in those
schemas: :func:`fill_defaults` writes them into the config (as Snakemake's ``validate`` would), and
:func:`section` gives one family's section with them filled, so that the families' pure workflow
functions read the same values from a raw config as from a validated one.

Errors are one short :class:`~crucible.core.errors.ConfigError` with the key path and the cause
(``matbench.model_params.gbm-magpi: no model of that name ...``), never the schema itself.
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from crucible.core.errors import ConfigError
from crucible.core.yaml_files import check_expanded, loads_yaml

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def key_path(parts: Iterable[Any]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


# Top-level sections of the shared services that every family reads (not families: no rules or
# targets of their own), each described by config.schema.yaml inside its package and checked at
# start-up by its workflow module's check(config).
SERVICE_SECTIONS = {"potentials": "crucible.potentials"}


@lru_cache(maxsize=None)
def family_schema(name: str) -> dict[str, Any]:
    """The schema of one config section, a family's or a service's (read once)."""
    from importlib.resources import files

    from crucible.dag.families import family_package

    package = SERVICE_SECTIONS[name] if name in SERVICE_SECTIONS else family_package(name)
    schema_file = files(package) / "config.schema.yaml"
    return loads_yaml(schema_file.read_text(encoding="utf-8"), str(schema_file))


def schema() -> dict[str, Any]:
    """The whole config's schema: every registered family's section and every service's, each
    optional, nothing else."""
    from crucible.dag.families import families

    return {
        "$schema": SCHEMA_DIALECT,
        "description": "crucible workflow configuration: one section per benchmark family or shared service",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            **{f.name: {**_with_switch(family_schema(f.name)), "default": {}} for f in families()},
            **{name: {**family_schema(name), "default": {}} for name in SERVICE_SECTIONS},
        },
    }


def _with_switch(section_schema: dict[str, Any]) -> dict[str, Any]:
    """A family's section schema with the switch every section has (crucible.dag.families.SWITCH)."""
    from crucible.dag.families import SWITCH, SWITCH_SCHEMA

    if SWITCH in section_schema.get("properties", {}):
        raise RuntimeError(f"a family's schema declares {SWITCH!r}: the switch is every family's, declared once")
    out = {**section_schema, "properties": {SWITCH: SWITCH_SCHEMA, **section_schema.get("properties", {})}}
    if "required" in out:  # a section switched off needs nothing else (matbench: {enabled: false})
        switched_off = {"properties": {SWITCH: {"const": False}}, "required": [SWITCH]}
        required = out.pop("required")
        out = {**out, "if": {"not": switched_off}, "then": {"required": required}}
    return out


def _schema_error_text(error: Any) -> str:
    """The error with its key path; a value its schema marks ``writeOnly`` (it may hold a secret
    put in the wrong place: ``api_key_env: hf_…``) masked, never quoted."""
    from crucible.core.secrets import masked

    where = key_path(error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = set((error.schema.get("properties") or {}))
        extra = sorted(k for k in error.instance if k not in allowed)
        # a mapping that takes no key (a generator without parameters) said "(known keys: )"
        known = f"known keys: {', '.join(sorted(allowed))}" if allowed else "it takes no keys"
        return f"{where}: unexpected key {', '.join(repr(k) for k in extra)} ({known})"
    message = error.message
    if isinstance(error.instance, str) and error.schema.get("writeOnly"):
        message = message.replace(repr(error.instance), masked(error.instance)).replace(error.instance, "…")
        if error.schema.get("description"):  # what belongs there, since the value is not shown
            message += f"; expected: {error.schema['description']}"
    return f"{where}: {message}"


def check_schema(config: Mapping[str, Any], schema_doc: Mapping[str, Any] | None = None) -> None:
    """The config against :func:`schema` (or ``schema_doc``): the first error, with its key path."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema() if schema_doc is None else schema_doc)
    errors = sorted(validator.iter_errors(config), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    if errors:
        from crucible.core.secrets import scrub

        error = jsonschema.exceptions.best_match(errors)
        # scrubbed: the message goes to Snakemake's log and .snakemake/log, and may quote a key
        raise ConfigError(scrub(f"config error at {_schema_error_text(error)}"))


def _filling_validator(schema_doc: Mapping[str, Any]):
    """A validator that writes each missing property's default before descending into it: the
    same extension Snakemake's ``validate(config, schema)`` uses, so the values are the same."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    validate_properties = base.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(base, {"properties": set_defaults})(schema_doc)


def fill_defaults(config: dict[str, Any]) -> dict[str, Any]:
    """Write every schema default into ``config`` (in place; also returned). Check first: this
    does not report errors."""
    for _ in _filling_validator(schema()).iter_errors(config):
        pass
    return config


@lru_cache(maxsize=256)
def _filled_section(name: str, raw: str) -> dict[str, Any]:
    value = json.loads(raw)
    for _ in _filling_validator(family_schema(name)).iter_errors(value):
        pass
    return value


def section(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Family ``name``'s section of ``config`` with the schema's defaults filled in (a copy):
    ``{}`` gives the defaults only, i.e. a family that is not configured."""
    raw = config.get(name) or {}
    return copy.deepcopy(_filled_section(name, json.dumps(raw, sort_keys=True, default=str)))


def check_config(config: Mapping[str, Any]) -> None:
    """Everything that can be known wrong before a job starts: the schema, then each family's own
    start-up checks (unknown model names, inputs a model cannot get, ...); raise :class:`ConfigError`."""
    from crucible.core.secrets import scrub
    from crucible.dag.config_names import check_config_names
    from crucible.dag.families import families

    check_expanded(config, "config")  # before anything walks it: a bomb from --config or a merge
    try:
        check_schema(config)
        check_config_names(config)
        for package in SERVICE_SECTIONS.values():
            importlib.import_module(f"{package}.workflow").check(dict(config))
        for f in families():
            f.check(dict(config))
    except ConfigError as exc:
        # whatever check refused a value, its message reaches Snakemake's logs: no key, no URL's
        # password or query string in it
        raise ConfigError(scrub(str(exc))) from None


def check_output_dirs(
    root: str | os.PathLike, names: Iterable[str] = ("results", "results/tables", "results/figures", "logs")
) -> None:
    """A file where an output folder must be: say so before Snakemake fails creating it."""
    for name in names:
        path = Path(root) / name
        if path.exists() and not path.is_dir():
            raise ConfigError(f"{path} is a file, but outputs go into a folder of that name: move it away")


def put_on_python_path(directory: str | os.PathLike) -> None:
    """Make ``directory`` importable here and in every job started from here (``PYTHONPATH``).

    The workflow's start-up check imports custom models in Snakemake's own process; the jobs
    are new processes, which only see the directory through the environment.
    """
    directory = str(directory)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != directory]
    os.environ["PYTHONPATH"] = os.pathsep.join([directory, *parts])
    if directory not in sys.path:
        sys.path.insert(0, directory)
