"""Pure functions from the config dict to the crystal family's targets and rule parameters."""

from __future__ import annotations

import json
from typing import Any

from crucible.crystal.data import BUILTIN_DATASETS, dataset_roles
from crucible.errors import ConfigError
from crucible.sources import resource_path


def section(config: dict[str, Any]) -> dict[str, Any]:
    return config.get("crystal") or {}


def datasets(config: dict[str, Any]) -> list[str]:
    crystal = section(config)
    names = list(crystal.get("datasets", []))
    user = crystal.get("user_datasets", {})
    unknown = [d for d in names if d not in BUILTIN_DATASETS and d not in user]
    if unknown:
        raise ConfigError(
            f"config crystal.datasets: unknown {', '.join(unknown)}; built in: "
            f"{', '.join(BUILTIN_DATASETS)}; or define it under crystal.user_datasets"
        )
    return names


def dataset_source(config: dict[str, Any], dataset: str) -> str:
    if dataset in section(config).get("user_datasets", {}):
        return "user"
    return BUILTIN_DATASETS[dataset]


def dataset_inputs(config: dict[str, Any], dataset: str) -> list[str]:
    """Raw files of a dataset, in the order ``crucible crystal build-items --inputs`` wants."""
    user = section(config).get("user_datasets", {})
    if dataset in user:
        return [user[dataset]]
    return [str(resource_path(role)) for role in dataset_roles(dataset)]


def generators(config: dict[str, Any]) -> list[str]:
    from crucible.crystal.generators import get_generator_spec

    names = list(section(config).get("generators", []))
    for name in names:
        get_generator_spec(name)
    return names


def llm_models(config: dict[str, Any]) -> list[str]:
    """``crystal.llm_models``, each checked to be defined under ``llm.models`` (issue 12)."""
    from crucible.llm.workflow import benchmark_models

    return benchmark_models(config, "crystal")


def responders(config: dict[str, Any]) -> list[str]:
    """Everything scored: the generators, then the language models (their responses come from
    the LLM inference stage, ``results/crystal/{dataset}/responses/{model}.jsonl``)."""
    gens, models = generators(config), llm_models(config)
    clash = sorted(set(gens) & set(models))
    if clash:
        raise ConfigError(f"config crystal: {', '.join(clash)} named both as generator and as LLM model")
    return gens + models


def generator_params(config: dict[str, Any], name: str) -> str:
    return json.dumps(section(config).get("generator_params", {}).get(name, {}), sort_keys=True)


def build_params(config: dict[str, Any]) -> dict[str, Any]:
    crystal = section(config)
    split = crystal.get("split", {})
    return {
        "template": crystal.get("prompt_template", "composition-v1"),
        "test_fraction": split.get("test_fraction", 0.5),
        "seed": split.get("seed", 0),
        "max_sites": crystal.get("max_sites", 20),
        "max_test_items": crystal.get("max_test_items") or 0,
        "max_train_items": crystal.get("max_train_items") or 0,
    }


def get_crystal_outputs(config: dict[str, Any]) -> list[str]:
    out = []
    names = responders(config)
    for ds in datasets(config):
        out.append(f"results/crystal/{ds}/prompts.jsonl")
        out += [f"results/crystal/{ds}/scores/{g}.json" for g in names]
        if names:
            out += [f"results/tables/crystal_{ds}.{ext}" for ext in ("csv", "md", "tex")]
            out += [f"results/figures/crystal_{ds}_match_by_nsites.{ext}" for ext in ("png", "pdf")]
    return out
