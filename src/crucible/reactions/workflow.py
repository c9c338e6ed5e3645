"""Pure functions of the config that the Snakefile calls: datasets, models, target paths, rule
params. The ``reactions`` section is read with the schema's defaults filled in
(:func:`crucible.dag.config.section`); :data:`FAMILY` declares the family to :mod:`crucible.dag.families`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from crucible.core.errors import ConfigError
from crucible.dag import config as _config
from crucible.dag.families import Family
from crucible.dag.rules import alternation
from crucible.llm import workflow as llm_workflow
from crucible.reactions.baselines import BASELINES, NEEDS_OTHER_SUBSTRATES
from crucible.reactions.data import DATASETS, dataset_spec
from crucible.reactions.questions import DEFAULTS
from crucible.reactions.scoring import QUESTION_TYPES
from crucible.sources.pinned_files import resource_path

# Built-in tables with a single substrate: the leave-one-substrate-out baselines have nothing to
# learn from there.
SINGLE_SUBSTRATE = ("direct-arylation",)


# The key user tables had before they were called user datasets, as in matbench and crystal:
# still read for one release, with a message, then refused by the schema.
OLD_USER_DATASETS = "custom_datasets"
_log = logging.getLogger(__name__)
_told: set[str] = set()


def section(config: dict[str, Any]) -> dict[str, Any]:
    """The ``reactions`` section with its defaults; ``custom_datasets`` (deprecated) read as ``user_datasets``."""
    sec = _config.section(config, "reactions")
    old = sec.pop(OLD_USER_DATASETS, None)
    if old is not None:
        if sec["user_datasets"]:
            raise ConfigError(
                "config reactions: both user_datasets and custom_datasets (its old name) are set; keep user_datasets"
            )
        sec["user_datasets"] = old
        if "reactions" not in _told:
            _told.add("reactions")
            _log.warning(
                "config reactions.custom_datasets is deprecated: rename it reactions.user_datasets "
                "(the old key is read in this release only)"
            )
    return sec


def datasets(config: dict[str, Any]) -> list[str]:
    sec = section(config)
    names = list(sec["datasets"])
    custom = sec["user_datasets"]
    for name in names:
        dataset_spec(name, custom)  # raises ConfigError for an unknown name
    clash = sorted(set(custom) & set(DATASETS))
    if clash:
        raise ConfigError(f"reactions.user_datasets: {', '.join(clash)} would shadow a built-in dataset")
    return names


def question_types(config: dict[str, Any]) -> list[str]:
    return [q for q in QUESTION_TYPES if q in section(config)["question_types"]]


def baselines(config: dict[str, Any], dataset: str | None = None) -> list[str]:
    names = list(section(config)["models"])
    unknown = [m for m in names if m not in BASELINES]
    if unknown:
        raise ConfigError(
            f"reactions.models: unknown baseline(s) {', '.join(unknown)}; known: {', '.join(sorted(BASELINES))}"
        )
    if dataset in SINGLE_SUBSTRATE:
        names = [m for m in names if m not in NEEDS_OTHER_SUBSTRATES]
    return names


def llm_models(config: dict[str, Any]) -> list[str]:
    names = list(section(config)["llm_models"])
    clash = sorted(set(names) & set(BASELINES))
    if clash:
        raise ConfigError(f"reactions.llm_models: {', '.join(clash)} is also a baseline name")
    return names


def models(config: dict[str, Any], dataset: str) -> list[str]:
    return baselines(config, dataset) + llm_models(config)


def names(config: dict[str, Any]) -> dict[str, Any]:
    """Every name a reactions run is made of, with its meaning (see crucible.identity.name_book.NameBook)."""
    from crucible.identity.name_book import Meaning, settings

    if "reactions" not in config:
        return {}
    sec = section(config)
    out = {
        "reactions/settings": Meaning(
            settings(sec, exclude=("model_params", "user_datasets")), "reactions", "use another --directory"
        )
    }
    for model in baselines(config):
        out[f"reactions/model/{model}"] = Meaning(
            sec["model_params"].get(model, {}),
            f"reactions.model_params.{model}",
            "use another --directory (a baseline's name is its class)",
        )
    for name in datasets(config):
        if name in sec["user_datasets"]:
            out[f"reactions/dataset/{name}"] = Meaning(
                sec["user_datasets"][name],
                f"reactions.user_datasets.{name}",
                "give it a name of its own under reactions.user_datasets",
            )
    return out


def question_params(config: dict[str, Any]) -> str:
    return json.dumps({**DEFAULTS, **section(config)["questions"]}, sort_keys=True)


def model_params(config: dict[str, Any], model: str) -> str:
    return json.dumps(section(config)["model_params"].get(model, {}), sort_keys=True)


def raw_file(config: dict[str, Any], dataset: str) -> str:
    if dataset in DATASETS:
        spec = DATASETS[dataset]
        return str(resource_path(spec.role))
    return str(section(config)["user_datasets"][dataset]["csv"])


def user_dataset(config: dict[str, Any], dataset: str) -> str:
    """The JSON of a user table's config entry (``crucible reactions clean --custom``); empty for
    a built-in dataset."""
    custom = section(config)["user_datasets"]
    return json.dumps({dataset: custom[dataset]}, sort_keys=True) if dataset in custom else ""


def system_prompt(config: dict[str, Any]) -> str:
    """The configured system prompt of every prompt; empty: the benchmark's own."""
    return section(config).get("system_prompt") or ""


def bootstrap(config: dict[str, Any]) -> dict[str, int]:
    """``n`` resamples and ``seed`` of the report's bootstrap intervals."""
    return dict(section(config)["bootstrap"])


def wildcard_constraints(config: dict[str, Any]) -> dict[str, str]:
    """Every reactions rule's constraints (per rule: each wildcard matches only configured names)."""
    names = datasets(config)
    base = sorted({m for d in names for m in baselines(config, d)})
    llms = llm_models(config)
    return {
        "rxn_dataset": alternation(names),
        "rxn_baseline": alternation(base),
        "rxn_llm": alternation(llms),
        "rxn_model": alternation(base + llms),
        "rxn_qtype": alternation(question_types(config)),
    }


def questions_files(config: dict[str, Any], dataset: str) -> list[str]:
    return [f"results/reactions/{dataset}/{q}/questions.json" for q in question_types(config)]


def prompts_files(config: dict[str, Any], dataset: str) -> list[str]:
    return [f"results/reactions/{dataset}/{q}/prompts.jsonl" for q in question_types(config)]


def prediction_files(config: dict[str, Any], dataset: str, model: str) -> list[str]:
    return [f"results/reactions/{dataset}/{q}/predictions/{model}.json" for q in question_types(config)]


def response_files(config: dict[str, Any], dataset: str, model: str) -> list[str]:
    return [f"results/reactions/{dataset}/{q}/responses/{model}.jsonl" for q in question_types(config)]


def package_dir(dataset: str) -> str:
    """Where ``crucible reactions package`` writes the dataset's question package."""
    return f"results/reactions/{dataset}/package"


def score_files(config: dict[str, Any], dataset: str) -> list[str]:
    return [f"results/reactions/{dataset}/scores/{m}.json" for m in models(config, dataset)]


def final_outputs(config: dict[str, Any]) -> list[str]:
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
            out += [f"{package_dir(d)}/report.md"]
    return out


def check(config: dict[str, Any]) -> None:
    """Unknown datasets or baselines, a language model named like a baseline, a baseline's
    parameter it does not take."""
    try:
        datasets(config)
        baselines(config)
        llm_models(config)
    except ConfigError as exc:
        raise ConfigError(f"config reactions: {exc}") from None
    check_params_taken(config)


def check_params_taken(config: dict[str, Any]) -> None:
    """Each baseline's ``model_params`` against the names its ``get_params()`` gives (the
    scikit-learn protocol), when the config is checked: a typo otherwise passed planning and
    stopped every predict job of that baseline, naming no config key."""
    params = section(config)["model_params"]
    for name in sorted(set(params) & set(BASELINES)):
        accepted = sorted(BASELINES[name].build().get_params())
        for key in sorted(params[name] or {}):
            if key not in accepted:
                raise ConfigError(
                    f"config error at reactions.model_params.{name}.{key}: the baseline {name} takes no "
                    f"parameter {key!r}; it takes: {', '.join(accepted) or 'none'}"
                )


@llm_workflow.asks_language_models("reactions")
def llm_responses(config: dict[str, Any]) -> list[str]:
    """The response files the language models of ``reactions.llm_models`` are asked for."""
    return [r for d in datasets(config) for m in llm_models(config) for r in response_files(config, d, m)]


def built(config: dict[str, Any]) -> dict[str, list[str]]:
    """The report front page's summary: datasets, the baselines some dataset runs, the LLMs."""
    ran = {m for d in datasets(config) for m in baselines(config, d)}
    return {
        "datasets": datasets(config),
        "baselines": [m for m in baselines(config) if m in ran],
        "language models": llm_models(config),
    }


FAMILY = Family(
    name="reactions",
    package="crucible.reactions",
    final_outputs=final_outputs,
    check=check,
    captions=("reactions_table.rst", "reactions_paired.rst", "reactions_figure.rst", "reactions_package.rst"),
    built=built,
    names=names,
    keyed_by_name={"model_params": ("model", lambda sec: set(BASELINES) | set(sec.get("llm_models") or []))},
    defined_names=(("user_datasets",), ("custom_datasets",)),  # custom_datasets: its old name, read one release
    listed_names=(("datasets",), ("models",), ("llm_models",)),
)
