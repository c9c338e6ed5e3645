"""Pure functions from the config dict to the crystal family's targets and rule parameters. The
``crystal`` section is read with the schema's defaults filled in (:func:`crucible.dag.config.section`);
:data:`FAMILY` declares the family to :mod:`crucible.dag.families`."""

from __future__ import annotations

import json
from typing import Any

from crucible.core.errors import ConfigError
from crucible.crystal.data import BUILTIN_DATASETS, dataset_roles
from crucible.dag import config as _config
from crucible.dag.families import Family
from crucible.dag.rules import alternation
from crucible.llm import workflow as llm_workflow
from crucible.sources.pinned_files import resource_path


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


MLIP_SEARCH_DEFAULT_MODEL = "chgnet-0.3.0"  # MlipSearchGenerator's default potential


def generator_params(config: dict[str, Any], name: str) -> str:
    """A generator's params as JSON. ``mlip-search`` with a user's potential (config
    ``potentials:``) also gets that potential's entry, so that the job loads it and a
    change of its class or params reruns the job."""
    from crucible.potentials.workflow import custom_potentials

    params = dict(section(config)["generator_params"].get(name, {}))
    if name == "mlip-search":
        model = params.get("model", MLIP_SEARCH_DEFAULT_MODEL)
        custom = custom_potentials(config)
        if model in custom:
            params["custom_potentials"] = {model: custom[model]}
    return json.dumps(params, sort_keys=True)


def names(config: dict[str, Any]) -> dict[str, Any]:
    """Every name a crystal run is made of, with its meaning (see crucible.identity.name_book.NameBook)."""
    from crucible.identity.name_book import Meaning, settings
    from crucible.potentials.workflow import potential_meanings

    if "crystal" not in config:
        return {}
    sec = section(config)
    out = {
        "crystal/settings": Meaning(
            {
                **settings(sec, exclude=("user_datasets", "generator_params", "csp", "cdvae_url_prefix", "audit")),
                # the audit's worker count changes its speed, not its verdicts
                "audit": {k: v for k, v in sorted(sec["audit"].items()) if k != "workers"},
                "csp_k": sec["csp"]["k"],
            },
            "crystal",
            "use another --directory",
        )
    }
    from crucible.identity.job_code import entry_root
    from crucible.potentials.workflow import potential_code

    for name in generators(config):
        params = json.loads(generator_params(config, name))
        code, files, declared = (entry_root("crucible.crystal.generators", name),), (), ()
        if isinstance(params.get("model"), str):  # a generator that runs a potential (mlip-search)
            more, files = potential_code(config, params["model"])
            code += more
            # a user's potential brings the files it declared (potentials.NAME.files): inputs of these jobs too
            declared = tuple(params.get("custom_potentials", {}).get(params["model"], {}).get("files", []))
        out[f"crystal/generator/{name}"] = Meaning(
            params,
            f"crystal.generator_params.{name}",
            "use another --directory (a generator's name is its class)",
            code=code,
            files=files,
            declared=declared,
        )
    user = sec["user_datasets"]
    for name in datasets(config):
        if name in user:
            out[f"crystal/dataset/{name}"] = Meaning(
                user[name], f"crystal.user_datasets.{name}", "give it a name of its own under crystal.user_datasets"
            )
    relax = sec["csp"]["relax"]
    settings_of_relax = {k: v for k, v in sorted(relax.items()) if k != "potentials"}
    for name in relax["potentials"]:
        # what relax-then-match's relaxed samples under relaxed/{potential}/ were made with
        out[f"crystal/relax/{name}"] = Meaning(
            {**settings_of_relax, "k": sec["csp"]["k"]},
            "crystal.csp.relax",
            "use another --directory",
            rules=("relax_crystal_samples", "relax_crystal_samples_neural"),
        )
    out |= potential_meanings(config, relax["potentials"])
    for name, spec in sorted(sec["csp"]["samples_files"].items()):
        out[f"crystal/samples/{name}"] = Meaning(
            spec, f"crystal.csp.samples_files.{name}", "give it a name of its own under crystal.csp.samples_files"
        )
    return out


def potential_sources(config: dict[str, Any], generator: str) -> list[str]:
    """The source file of mlip-search's potential when it is a user's module beside the project."""
    from crucible.potentials.workflow import custom_potential_sources

    if generator != "mlip-search":
        return []
    model = section(config)["generator_params"].get("mlip-search", {}).get("model", MLIP_SEARCH_DEFAULT_MODEL)
    return custom_potential_sources(config, model)


def check_mlip_search(config: dict[str, Any]) -> None:
    """mlip-search's potential must be registered or a user's (config ``potentials:``)."""
    from crucible.potentials.workflow import check_potential_names

    if "mlip-search" in section(config)["generators"]:
        model = section(config)["generator_params"].get("mlip-search", {}).get("model", MLIP_SEARCH_DEFAULT_MODEL)
        check_potential_names(config, [model], "crystal.generator_params.mlip-search.model")


def max_sites(config: dict[str, Any], dataset: str) -> int:
    """The site limit of ``dataset``: ``crystal.max_sites`` (a number, or a mapping naming the
    set), else the set's own (:data:`crucible.crystal.data.DATASET_MAX_SITES`)."""
    from crucible.crystal.data import max_sites_for

    return max_sites_for(dataset, section(config)["max_sites"])


def check_max_sites(config: dict[str, Any]) -> None:
    """A ``{dataset: number}`` site limit naming a set not in ``crystal.datasets`` (a typo such as
    ``mp20``) would leave the set meant at its own limit without a word."""
    setting = section(config)["max_sites"]
    if isinstance(setting, dict):
        extra = sorted(set(setting) - set(datasets(config)))
        if extra:
            raise ConfigError(
                f"config crystal.max_sites: dataset(s) {', '.join(extra)} not in crystal.datasets "
                f"({', '.join(datasets(config)) or 'none'})"
            )


def build_params(config: dict[str, Any]) -> dict[str, Any]:
    """The params build-items and the audit share; ``max_sites`` is per dataset (a function of
    the rule's wildcards)."""
    crystal = section(config)
    return {
        "template": crystal["prompt_template"],
        "test_fraction": crystal["split"]["test_fraction"],
        "seed": crystal["split"]["seed"],
        "split_by": crystal["split"]["by"],
        "max_sites": lambda wc: max_sites(config, wc.crystal_dataset),
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


def relax_constraints(config: dict[str, Any], device: str | None = None) -> dict[str, str]:
    """The relax-then-match rules' constraints: the relax potentials (on ``device`` when given)
    and a responder name without a slash (the relaxed summaries and their pairs share a folder)."""
    return {
        **wildcard_constraints(config),
        "crystal_potential": alternation(relax_potentials(config, device)),
        "responder": r"[^/]+",
    }


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
    return out + get_csp_outputs(config)


def check(config: dict[str, Any]) -> None:
    """Unknown datasets or generators, language models not defined under llm.models, a name
    used both as generator and as language model; CSP responders that are neither."""
    datasets(config)
    responders(config)
    csp_responders(config)
    check_mlip_search(config)
    check_relax(config)
    check_max_sites(config)


# ---------------------------------------------------------------- CSP at k samples and the audit


def csp_section(config: dict[str, Any]) -> dict[str, Any]:
    """``crystal.csp`` (schema defaults filled): k, the responders answering k times, samples files."""
    csp = section(config)["csp"]
    return {
        "k": int(csp["k"]),
        "responders": list(csp["responders"]),
        "samples_files": dict(csp["samples_files"]),
        "chance": bool(csp["chance"]),
        "workers": int(csp["workers"]),
    }


CHANCE = "chance"  # the generator whose rows are the chance floor of every dataset's CSP rows


def csp_responders(config: dict[str, Any]) -> list[str]:
    """Who is scored at k samples: the listed generators and language models (each checked to be
    configured as one), then the samples files' models."""
    csp = csp_section(config)
    gens, models = generators(config), llm_models(config)
    unknown = [r for r in csp["responders"] if r not in gens and r not in models]
    if unknown:
        raise ConfigError(
            f"config crystal.csp.responders: {', '.join(unknown)} not in crystal.generators or crystal.llm_models"
        )
    files = csp["samples_files"]
    clash = sorted(set(files) & (set(gens) | set(models)))
    if clash:
        raise ConfigError(f"config crystal.csp.samples_files: {', '.join(clash)} is also a generator or LLM model")
    ds = set(datasets(config))
    for name, per_dataset in files.items():
        extra = sorted(set(per_dataset) - ds)
        if extra:
            raise ConfigError(
                f"config crystal.csp.samples_files.{name}: dataset(s) {', '.join(extra)} not in crystal.datasets"
            )
    if csp["k"] < 1 and (csp["responders"] or files):
        raise ConfigError(f"config crystal.csp.k must be at least 1, got {csp['k']}")
    listed = csp["responders"] + sorted(files)
    # a match rate is read against its chance floor: the chance rows come with any CSP rows
    if listed and csp["chance"] and CHANCE not in listed:
        listed = [CHANCE] + listed
    return listed


def chance_scores(config: dict[str, Any], dataset: str) -> list[str]:
    """The chance responder's CSP scores on ``dataset`` where it runs: the match-by-sites figure's
    chance floor (none without them)."""
    if CHANCE not in csp_dataset_responders(config, dataset):
        return []
    return [f"results/crystal/{dataset}/csp/{CHANCE}.parquet"]


def csp_dataset_responders(config: dict[str, Any], dataset: str) -> list[str]:
    """The CSP responders with samples for ``dataset`` (a samples file covers the datasets it names)."""
    files = csp_section(config)["samples_files"]
    return [r for r in csp_responders(config) if r not in files or dataset in files[r]]


def sample_prompts_path(config: dict[str, Any], dataset: str) -> str:
    return f"results/crystal/{dataset}/k{csp_section(config)['k']}/prompts.jsonl"


def samples_input(config: dict[str, Any], dataset: str, responder: str) -> str:
    """Where a CSP responder's samples come from: a generator's samples rule, the LLM stage's
    answers to the repeated prompt set, or the configured samples file."""
    csp = csp_section(config)
    if responder in csp["samples_files"]:
        return csp["samples_files"][responder][dataset]
    if responder in llm_models(config):
        return f"results/crystal/{dataset}/k{csp['k']}/responses/{responder}.jsonl"
    return f"results/crystal/{dataset}/samples/k{csp['k']}/{responder}.jsonl"


def samples_format(config: dict[str, Any], responder: str) -> str:
    return "responses" if responder in llm_models(config) else "auto"


def samples_info(samples_path: str) -> str:
    """The sidecar next to a generator's samples file (absent for other samples: optional)."""
    import os

    return f"{os.path.splitext(samples_path)[0]}.json"


def audit_inputs(config: dict[str, Any], dataset: str) -> list[str]:
    """Raw files for the audit: as build-items, plus the validation CSV of a CDVAE set (train,
    val, test: the order ``crucible crystal audit --inputs`` wants)."""
    if dataset_source(config, dataset) != "cdvae":
        return dataset_inputs(config, dataset)
    return [str(resource_path(f"crystal/{dataset}/{split}")) for split in ("train", "val", "test")]


def audit_params(config: dict[str, Any]) -> dict[str, Any]:
    audit = section(config)["audit"]
    return {
        "convention": audit["convention"],
        "max_comparisons": int(audit["max_comparisons"]),
        "workers": int(audit["workers"]),
    }


def relax_section(config: dict[str, Any]) -> dict[str, Any]:
    """``crystal.csp.relax`` (schema defaults filled): the potentials relax-then-match uses, and
    the relaxation's settings."""
    return dict(section(config)["csp"]["relax"])


def relax_params(config: dict[str, Any]) -> dict[str, Any]:
    """The relax-samples command's settings (no cell filter: the empty string, its default none)."""
    relax = relax_section(config)
    return {
        "optimizer": relax["optimizer"],
        "fmax": relax["fmax"],
        "steps": relax["steps"],
        "cell_filter": relax["cell_filter"] or "",
    }


def relax_potentials(config: dict[str, Any], device: str | None = None) -> list[str]:
    """The potentials of ``crystal.csp.relax``, those that run on ``device`` when given."""
    from crucible.potentials.workflow import potentials_on

    names = list(relax_section(config)["potentials"])
    return names if device is None else potentials_on(config, device, names)


def relax_potential_sources(config: dict[str, Any], potential: str) -> list[str]:
    """The source files of a relaxing potential that is a user's module beside the project."""
    from crucible.potentials.workflow import custom_potential_sources

    return custom_potential_sources(config, potential)


def relax_custom_potential(config: dict[str, Any], potential: str) -> str:
    """A user's potential's entry as JSON for the relax job ("" for a registered one)."""
    from crucible.potentials.workflow import custom_potential_json

    return custom_potential_json(config, potential)


def check_relax(config: dict[str, Any]) -> None:
    """Relax-then-match's potentials must be registered or a user's, and have samples to relax."""
    from crucible.potentials.workflow import check_potential_names

    names = relax_potentials(config)
    if not names:
        return
    check_potential_names(config, names, "crystal.csp.relax.potentials")
    if not csp_responders(config):
        raise ConfigError(
            "config crystal.csp.relax.potentials: no CSP samples to relax (crystal.csp.responders and "
            "crystal.csp.samples_files are empty)"
        )


def relaxed_summaries(config: dict[str, Any]) -> list[str]:
    """The CSP summaries of every responder's samples relaxed with each relax potential."""
    return [
        f"results/crystal/{ds}/csp_relaxed/{p}/{r}.json"
        for ds in datasets(config)
        for r in csp_dataset_responders(config, ds)
        for p in relax_potentials(config)
    ]


def csp_summaries(config: dict[str, Any]) -> list[str]:
    """Every CSP summary the CSP table is made of: as drawn, then relaxed (relax-then-match)."""
    drawn = [
        f"results/crystal/{ds}/csp/{r}.json" for ds in datasets(config) for r in csp_dataset_responders(config, ds)
    ]
    return drawn + relaxed_summaries(config)


def get_csp_outputs(config: dict[str, Any]) -> list[str]:
    """Per dataset the audit; with CSP responders their summaries and the CSP table."""
    out = []
    for ds in datasets(config):
        out += [f"results/crystal/{ds}/audit.json"] + [f"results/tables/crystal_{ds}_audit.{e}" for e in ("csv", "md")]
    summaries = csp_summaries(config)
    if summaries:
        out += summaries + [f"results/tables/crystal_csp.{e}" for e in ("csv", "md", "tex")]
    return out


@llm_workflow.asks_language_models("crystal")
def llm_responses(config: dict[str, Any]) -> list[str]:
    """The response files the language models of ``crystal.llm_models`` are asked for, and those
    of the CSP responders among them for the repeated prompt sets (dataset ``{dataset}/k{k}``)."""
    out = llm_workflow.response_targets(config, "crystal", datasets(config), llm_models(config))
    models = [r for r in csp_section(config)["responders"] if r in llm_models(config)]
    if models:
        k = csp_section(config)["k"]
        out += llm_workflow.response_targets(config, "crystal", [f"{ds}/k{k}" for ds in datasets(config)], models)
    return out


FAMILY = Family(
    name="crystal",
    package="crucible.crystal",
    final_outputs=final_outputs,
    check=check,
    captions=("crystal_table.rst", "crystal_figure.rst", "crystal_csp.rst", "crystal_audit.rst"),
    names=names,
    defined_names=(("user_datasets",), ("csp", "samples_files")),
    listed_names=(("datasets",), ("llm_models",), ("generators",)),
)
