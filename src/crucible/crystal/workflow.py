"""Pure functions from the config dict to the crystal family's targets and rule parameters. The
``crystal`` section is read with the schema's defaults filled in (:func:`crucible.config.section`);
:data:`FAMILY` declares the family to :mod:`crucible.families`."""

from __future__ import annotations

import json
from typing import Any

from crucible import config as _config
from crucible.crystal.data import BUILTIN_DATASETS, dataset_roles
from crucible.errors import ConfigError
from crucible.families import Family
from crucible.sources import resource_path
from crucible.workflow import alternation


def section(config: dict[str, Any]) -> dict[str, Any]:
    return _config.section(config, "crystal")


def datasets(config: dict[str, Any]) -> list[str]:
    crystal = section(config)
    names = list(crystal["datasets"])
    user = crystal["user_datasets"]
    unknown = [d for d in names if d not in BUILTIN_DATASETS and d not in user]
    if unknown:
        raise ConfigError(
            f"config crystal.datasets: unknown {', '.join(unknown)}; built in: "
            f"{', '.join(BUILTIN_DATASETS)}; or define it under crystal.user_datasets"
        )
    return names


def dataset_source(config: dict[str, Any], dataset: str) -> str:
    if dataset in section(config)["user_datasets"]:
        return "user"
    return BUILTIN_DATASETS[dataset]


def dataset_inputs(config: dict[str, Any], dataset: str) -> list[str]:
    """Raw files of a dataset, in the order ``crucible crystal build-items --inputs`` wants."""
    user = section(config)["user_datasets"]
    if dataset in user:
        return [user[dataset]]
    return [str(resource_path(role)) for role in dataset_roles(dataset)]


def generators(config: dict[str, Any]) -> list[str]:
    from crucible.crystal.generators import get_generator_spec

    names = list(section(config)["generators"])
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
    return json.dumps(section(config)["generator_params"].get(name, {}), sort_keys=True)


def build_params(config: dict[str, Any]) -> dict[str, Any]:
    crystal = section(config)
    return {
        "template": crystal["prompt_template"],
        "test_fraction": crystal["split"]["test_fraction"],
        "seed": crystal["split"]["seed"],
        "max_sites": crystal["max_sites"],
        "max_test_items": crystal["max_test_items"],
        "max_train_items": crystal["max_train_items"],
    }


def generation_seed(config: dict[str, Any]) -> int:
    return section(config)["seed"]


def score_timeout(config: dict[str, Any]) -> float:
    """Seconds the structure matcher may spend on one answer."""
    return section(config)["score_timeout_s"]


def generators_on(device: str) -> list[str]:
    """The registered generators that run on ``device`` ('cpu' or 'gpu')."""
    from crucible.crystal.generators import GENERATORS

    return [name for name, spec in GENERATORS.items() if spec.device == device]


def wildcard_constraints(config: dict[str, Any], device: str | None = None) -> dict[str, str]:
    """The crystal rules' constraints (per rule); ``device``: the generator rule's generators."""
    out = {"crystal_dataset": alternation(datasets(config))}
    if device:
        out["crystal_generator"] = alternation(generators_on(device))
    return out


def response_info(responses: str) -> str:
    """The sidecar JSON beside a response file (``{model}.json`` beside ``{model}.jsonl``)."""
    return responses[: -len(".jsonl")] + ".json" if responses.endswith(".jsonl") else responses + ".json"


def score_summaries(config: dict[str, Any], dataset: str) -> list[str]:
    """Every responder's score summary on one dataset: what its table and figure are made from."""
    return [f"results/crystal/{dataset}/scores/{g}.json" for g in responders(config)]


def final_outputs(config: dict[str, Any]) -> list[str]:
    out = []
    names = responders(config)
    for ds in datasets(config):
        out.append(f"results/crystal/{ds}/prompts.jsonl")
        out += score_summaries(config, ds)
        if names:
            out += [f"results/tables/crystal_{ds}.{ext}" for ext in ("csv", "md", "tex")]
            out += [f"results/figures/crystal_{ds}_match_by_nsites.{ext}" for ext in ("png", "pdf")]
    return out


def check(config: dict[str, Any]) -> None:
    """Unknown datasets or generators, language models not defined under llm.models, a name
    used both as generator and as language model."""
    datasets(config)
    responders(config)


def llm_responses(config: dict[str, Any]) -> list[str]:
    """The response files the language models of ``crystal.llm_models`` are asked for."""
    from crucible.llm.workflow import response_targets

    return response_targets(config, "crystal", datasets(config), llm_models(config))


FAMILY = Family(
    name="crystal",
    package="crucible.crystal",
    final_outputs=final_outputs,
    check=check,
    captions=("crystal_table.rst", "crystal_figure.rst"),
    llm_responses=llm_responses,
)
