"""Start-up checks of ``config/config.yaml``: the schema, then what a schema cannot say.

Errors are one short :class:`~crucible.errors.ConfigError` with the key path and the cause
(``matbench.model_params.gbm-magpi: no model of that name ...``), never the schema itself.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from crucible.errors import ConfigError


def key_path(parts: Iterable[Any]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _schema_error_text(error: Any) -> str:
    where = key_path(error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = set((error.schema.get("properties") or {}))
        extra = sorted(k for k in error.instance if k not in allowed)
        known = ", ".join(sorted(allowed))
        return f"{where}: unexpected key {', '.join(repr(k) for k in extra)} (known keys: {known})"
    return f"{where}: {error.message}"


def check_schema(config: Mapping[str, Any], schema_path: str | os.PathLike) -> None:
    import jsonschema

    schema = yaml.safe_load(Path(schema_path).read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    if errors:
        error = jsonschema.exceptions.best_match(errors)
        raise ConfigError(f"config error at {_schema_error_text(error)}")


def check_model_params(matbench: Mapping[str, Any]) -> None:
    from crucible.models.registry import builtin_models

    known = (
        set(builtin_models()) | set(matbench.get("custom_models") or {}) | set(matbench.get("prediction_files") or {})
    )
    for name in sorted(matbench.get("model_params") or {}):
        if name not in known:
            raise ConfigError(
                f"config error at matbench.model_params.{name}: no model of that name "
                f"(known: {', '.join(sorted(known))}); its parameters would be ignored"
            )


def check_mlip(mlip: Mapping[str, Any]) -> None:
    eos = mlip.get("eos") or {}
    elements = eos.get("elements", "all")
    if not isinstance(elements, str) or elements.strip().lower() != "all":
        from crucible.mlip.eos import parse_elements

        try:
            parse_elements(elements)
        except ConfigError as exc:
            raise ConfigError(f"config error at {exc}") from None
    if "volume_range" in eos:
        from crucible.mlip.eos import check_volume_range

        try:
            check_volume_range(eos["volume_range"])
        except ConfigError as exc:
            raise ConfigError(f"config error at {exc}") from None


def check_config(config: Mapping[str, Any], schema_path: str | os.PathLike) -> None:
    """Everything that can be known wrong before a job starts; raise :class:`ConfigError`."""
    check_schema(config, schema_path)
    matbench = config.get("matbench") or {}
    if not matbench.get("tasks", True) and not matbench.get("user_datasets"):
        raise ConfigError("config matbench.tasks: [] should be non-empty (or name a dataset in matbench.user_datasets)")
    check_model_params(matbench)
    check_mlip(config.get("mlip") or {})


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
