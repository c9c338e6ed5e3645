"""What the MLIP part of the DAG builds, as pure functions of the config dict.

``workflow/rules/common.smk`` and ``workflow/rules/mlip.smk`` call these. Config values reach
the rules as ``params:`` strings, so that Snakemake's params trigger reruns exactly the jobs a
config change affects: a new element list reruns every EOS job, a new model adds one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crucible.core.errors import ConfigError
from crucible.dag.config import section
from crucible.dag.families import Family
from crucible.dag.rules import alternation
from crucible.identity.name_book import Meaning
from crucible.potentials import workflow as potentials_wf

# Potential and dataset names as they appear in paths (wildcard constraint).
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]*"


def _section(config: dict[str, Any]) -> dict[str, Any]:
    return section(config, "mlip")


def models(config: dict[str, Any]) -> list[str]:
    return list(_section(config)["models"])


def models_on(config: dict[str, Any], device: str) -> str:
    """The ``model`` constraint of a potential rule's CPU or GPU variant (``run_eos``/``run_eos_neural``):
    every potential the config knows whose jobs run on ``device``."""
    return alternation(potentials_wf.potentials_on(config, device, potentials_wf.potential_names(config)))


def check_models(config: dict[str, Any]) -> None:
    """Fail at start-up on a potential name that is neither registered nor a user's (the users'
    entries themselves are checked by crucible.potentials.workflow.check)."""
    potentials_wf.check_potential_names(config, models(config), "mlip.models")


def eos_format() -> int:
    """The meaning of run_eos's results file (:data:`crucible.mlip.eos.EOS_FORMAT`), a param of
    the rule: a file of an older format reruns."""
    from crucible.mlip.eos import EOS_FORMAT

    return EOS_FORMAT


def names(config: dict[str, Any]) -> dict[str, Meaning]:
    """Every name an MLIP run is made of, with its meaning (see crucible.identity.name_book.NameBook)."""
    if "mlip" not in config or not models(config):
        return {}
    out = {
        "mlip/settings": Meaning(
            {"eos": eos_params(config)},
            "mlip.eos",
            "use another --directory",
            rules=("run_eos", "run_eos_neural", "tabulate_eos", "plot_eos"),
        )
    }
    out |= potentials_wf.potential_meanings(config, models(config))
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
    defined_names=(("custom_potentials",),),
    listed_names=(("models",),),
)
