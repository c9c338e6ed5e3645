"""What the MLIP part of the DAG builds, as pure functions of the config dict.

``workflow/rules/common.smk`` and ``workflow/rules/mlip.smk`` call these. Config values reach
the rules as ``params:`` strings, so that Snakemake's params trigger reruns exactly the jobs a
config change affects: a new element list reruns every EOS job, a new model adds one.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from crucible.config import put_on_python_path, section
from crucible.errors import ConfigError
from crucible.families import Family
from crucible.identity import Meaning, registered

# Potential and dataset names as they appear in paths (wildcard constraint).
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]*"


def _section(config: dict[str, Any]) -> dict[str, Any]:
    return section(config, "mlip")


def models(config: dict[str, Any]) -> list[str]:
    return list(_section(config)["models"])


def custom_potentials(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``mlip.custom_potentials``: name -> {class, params} (see :mod:`crucible.mlip.custom`)."""
    return {k: dict(v) for k, v in sorted(_section(config)["custom_potentials"].items())}


def potential_names(config: dict[str, Any]) -> list[str]:
    """Every potential name a config may use: the registered ones and the user's own."""
    from crucible.mlip.calculators import registered_models

    return sorted(set(registered_models()) | set(custom_potentials(config)))


def check_potential_names(config: dict[str, Any], names: list[str], key: str) -> None:
    """Fail at start-up on a potential name (at config ``key``) that is neither registered nor custom."""
    known = potential_names(config)
    unknown = [m for m in names if m not in known]
    if unknown:
        raise ConfigError(f"config {key}: unknown potential(s) {', '.join(unknown)}; known: {', '.join(known)}")


def check_models(config: dict[str, Any]) -> None:
    """Fail at start-up on a potential name that is not registered or custom, or on a custom
    potential whose factory does not import (the error names its config key)."""
    from crucible.mlip.calculators import registered_models
    from crucible.mlip.custom import check_custom_potentials

    check_custom_potentials(custom_potentials(config), registered_models())
    check_potential_names(config, models(config), "mlip.models")


def custom_potential_sources(config: dict[str, Any], name: str) -> list[str]:
    """Every source file of a user's potential whose module sits beside the project (under the
    working directory), as job inputs: the module's whole top-level package (what its import can
    read), so that editing any module of it reruns the potential's jobs. An installed package is
    identified in its provenance instead (version and the SHA-256 of its files); a registered
    potential has none."""
    import os

    from crucible.fingerprint import module_source, not_source, tree_files

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


def eos_format() -> int:
    """The meaning of run_eos's results file (:data:`crucible.mlip.eos.EOS_FORMAT`), a param of
    the rule: a file of an older format reruns."""
    from crucible.mlip.eos import EOS_FORMAT

    return EOS_FORMAT


def custom_potential(config: dict[str, Any], name: str) -> str:
    """The JSON ``{name: entry}`` a job running the user's potential ``name`` is handed (only its
    own entry: a changed class or params reruns its jobs and no other); "" for a registered one."""
    import json

    custom = custom_potentials(config)
    return json.dumps({name: custom[name]}, sort_keys=True) if name in custom else ""


def custom_potential_arg(config: dict[str, Any], name: str) -> str:
    """``--custom-potentials '{name: entry}'`` (:func:`custom_potential`), "" for a registered one."""
    from crucible.workflow import flag

    return flag("--custom-potentials", custom_potential(config, name))


def potential_meanings(config: dict[str, Any], names: Iterable[str]) -> dict[str, Meaning]:
    """``potential/<name>``: a registered potential, or a user's entry (mlip.custom_potentials),
    one meaning for every family that runs it."""
    custom = custom_potentials(config)
    return {
        f"potential/{name}": Meaning(
            {"custom": custom[name]} if name in custom else registered(name),
            f"mlip.custom_potentials.{name}" if name in custom else f"potential {name}",
            "give the potential a name of its own under mlip.custom_potentials",
        )
        for name in sorted(set(names))
    }


def names(config: dict[str, Any]) -> dict[str, Meaning]:
    """Every name an MLIP run is made of, with its meaning (see crucible.identity.NameBook)."""
    if "mlip" not in config or not models(config):
        return {}
    out = {
        "mlip/settings": Meaning(
            {"eos": eos_params(config)},
            "mlip.eos",
            "use another --directory",
            rules=("run_eos", "tabulate_eos", "plot_eos"),
        )
    }
    out |= potential_meanings(config, models(config))
    for name, source in sorted(s2ef_datasets(config).items()):
        out[f"mlip/s2ef/{name}"] = Meaning(
            source, f"mlip.s2ef.datasets.{name}", "give the dataset a name of its own under mlip.s2ef.datasets"
        )
    return out


def check_eos(config: dict[str, Any]) -> None:
    """An element list or volume range the EOS benchmark cannot use."""
    from crucible.mlip.eos import check_volume_range, parse_elements

    eos = _section(config)["eos"]
    try:
        if not isinstance(eos["elements"], str) or eos["elements"].strip().lower() != "all":
            parse_elements(eos["elements"])
        check_volume_range(eos["volume_range"])
    except ConfigError as exc:
        raise ConfigError(f"config error at {exc}") from None


def check(config: dict[str, Any]) -> None:
    check_eos(config)
    check_models(config)


def eos_params(config: dict[str, Any]) -> dict[str, Any]:
    """The EOS command's arguments: elements (sorted, so reordering reruns nothing), points, range."""
    eos = _section(config)["eos"]
    elements = eos["elements"]
    return {
        "elements": elements if isinstance(elements, str) else ",".join(sorted(elements)),
        "points": eos["points"],
        "volume_range": " ".join(str(v) for v in eos["volume_range"]),
    }


def s2ef_datasets(config: dict[str, Any]) -> dict[str, str]:
    return dict(_section(config)["s2ef"]["datasets"])


def s2ef_input(config: dict[str, Any], name: str) -> str | list[str]:
    """The dataset file, so that editing it reruns its predictions; built-in names have none."""
    from crucible.mlip.frames import ASE_VASP_TESTDATA

    source = s2ef_datasets(config)[name]
    if source == ASE_VASP_TESTDATA:
        return []
    if not Path(source).is_file():
        raise ConfigError(f"config mlip.s2ef.datasets.{name}: no such file {source}")
    return source


def eos_files(config: dict[str, Any]) -> list[str]:
    return [f"results/mlip/eos/{m}.parquet" for m in models(config)]


def s2ef_files(config: dict[str, Any], dataset: str) -> list[str]:
    return [f"results/mlip/s2ef/{dataset}/{m}.parquet" for m in models(config)]


def final_outputs(config: dict[str, Any]) -> list[str]:
    """Every MLIP target of ``rule all`` (none when no potential is configured)."""
    ms = models(config)
    if not ms:
        return []
    out = eos_files(config)
    out += [f"results/tables/mlip_eos.{ext}" for ext in ("csv", "md", "tex")]
    out += [f"results/figures/mlip_eos_{kind}.{ext}" for kind in ("delta", "b0_parity") for ext in ("png", "pdf")]
    datasets = sorted(s2ef_datasets(config))
    if datasets:
        out += [f"results/mlip/s2ef/{d}/{m}.parquet" for d in datasets for m in ms]
        out += [f"results/tables/mlip_s2ef_{d}.{ext}" for d in datasets for ext in ("csv", "md", "tex")]
    return out


FAMILY = Family(
    name="mlip",
    package="crucible.mlip",
    final_outputs=final_outputs,
    check=check,
    captions=("mlip_eos.rst", "mlip_eos_delta.rst", "mlip_b0_parity.rst", "mlip_s2ef.rst"),
    built=lambda c: {
        "potentials": models(c),
        "EOS elements": eos_params(c)["elements"].split(","),
        "S2EF datasets": sorted(s2ef_datasets(c)),
    },
    names=names,
)
