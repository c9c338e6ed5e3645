"""Pure functions of the config that the Snakefile calls: datasets, models, target paths."""

from __future__ import annotations

import json
import shlex
from typing import Any

from crucible.errors import ConfigError
from crucible.reactions.baselines import MODELS, NEEDS_OTHER_SUBSTRATES
from crucible.reactions.data import DATASETS, dataset_spec
from crucible.reactions.questions import DEFAULTS
from crucible.reactions.scoring import QUESTION_TYPES
from crucible.sources import resource_path

# Built-in tables with a single substrate: the leave-one-substrate-out baselines have nothing to
# learn from there.
SINGLE_SUBSTRATE = ("direct-arylation",)


def section(config: dict[str, Any]) -> dict[str, Any]:
    return config.get("reactions") or {}


def datasets(config: dict[str, Any]) -> list[str]:
    sec = section(config)
    names = list(sec.get("datasets", []))
    custom = sec.get("custom_datasets", {}) or {}
    for name in names:
        dataset_spec(name, custom)  # raises ConfigError for an unknown name
    clash = sorted(set(custom) & set(DATASETS))
    if clash:
        raise ConfigError(f"reactions.custom_datasets: {', '.join(clash)} would shadow a built-in dataset")
    return names


def question_types(config: dict[str, Any]) -> list[str]:
    return [q for q in QUESTION_TYPES if q in section(config).get("question_types", QUESTION_TYPES)]


def baselines(config: dict[str, Any], dataset: str | None = None) -> list[str]:
    names = list(section(config).get("models", []))
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        raise ConfigError(
            f"reactions.models: unknown baseline(s) {', '.join(unknown)}; known: {', '.join(sorted(MODELS))}"
        )
    if dataset in SINGLE_SUBSTRATE:
        names = [m for m in names if m not in NEEDS_OTHER_SUBSTRATES]
    return names


def llm_models(config: dict[str, Any]) -> list[str]:
    names = list(section(config).get("llm_models", []))
    clash = sorted(set(names) & set(MODELS))
    if clash:
        raise ConfigError(f"reactions.llm_models: {', '.join(clash)} is also a baseline name")
    return names


def models(config: dict[str, Any], dataset: str) -> list[str]:
    return baselines(config, dataset) + llm_models(config)


def question_params(config: dict[str, Any]) -> str:
    return json.dumps({**DEFAULTS, **(section(config).get("questions") or {})}, sort_keys=True)


def model_params(config: dict[str, Any], model: str) -> str:
    return json.dumps((section(config).get("model_params") or {}).get(model, {}), sort_keys=True)


def raw_file(config: dict[str, Any], dataset: str) -> str:
    if dataset in DATASETS:
        spec = DATASETS[dataset]
        return str(resource_path(spec.role))
    return str(section(config)["custom_datasets"][dataset]["csv"])


def custom_dataset_arg(config: dict[str, Any], dataset: str) -> str:
    """``--custom '<json>'`` for a user table, nothing for a built-in one (shell-quoted)."""
    custom = section(config).get("custom_datasets") or {}
    return (
        f"--custom {shlex.quote(json.dumps({dataset: custom[dataset]}, sort_keys=True))}" if dataset in custom else ""
    )


def system_prompt_arg(config: dict[str, Any]) -> str:
    text = section(config).get("system_prompt")
    return f"--system-prompt {shlex.quote(text)}" if text else ""


def questions_files(config: dict[str, Any], dataset: str) -> list[str]:
    return [f"results/reactions/{dataset}/{q}/questions.json" for q in question_types(config)]


def prompts_files(config: dict[str, Any], dataset: str) -> list[str]:
    return [f"results/reactions/{dataset}/{q}/prompts.jsonl" for q in question_types(config)]


def prediction_files(config: dict[str, Any], dataset: str, model: str) -> list[str]:
    return [f"results/reactions/{dataset}/{q}/predictions/{model}.json" for q in question_types(config)]


def response_files(config: dict[str, Any], dataset: str, model: str) -> list[str]:
    return [f"results/reactions/{dataset}/{q}/responses/{model}.jsonl" for q in question_types(config)]


def score_files(config: dict[str, Any], dataset: str) -> list[str]:
    return [f"results/reactions/{dataset}/scores/{m}.json" for m in models(config, dataset)]


def outputs(config: dict[str, Any]) -> list[str]:
    """Every final target of the reactions family."""
    out: list[str] = []
    for d in datasets(config):
        out += [f"results/reactions/data/{d}.parquet", f"results/reactions/data/{d}.json"]
        out += questions_files(config, d) + prompts_files(config, d)
        if models(config, d):
            out += score_files(config, d)
            out += [f"results/tables/reactions_{d}.{ext}" for ext in ("csv", "md", "tex")]
            out += [f"results/tables/reactions_{d}_paired.{ext}" for ext in ("csv", "md", "tex")]
            out += [f"results/figures/reactions_{d}.{ext}" for ext in ("png", "pdf")]
            out += [f"results/reactions/{d}/package/report.md"]
    return out
