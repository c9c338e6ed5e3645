"""Pure functions from the config dict to the crystal family's targets and rule parameters."""

from __future__ import annotations

import json
from typing import Any

from crucible.errors import ConfigError

# Built-in crystal sets: (loader source, CDVAE folder or None)
BUILTIN_DATASETS = {
    "aflow-prototypes": ("aflow", None),
    "mp-20": ("cdvae", "mp_20"),
    "perov-5": ("cdvae", "perov_5"),
    "carbon-24": ("cdvae", "carbon_24"),
}
AFLOW_FILE = "resources/extracted/pymatgen-2026.10.24/aflow_prototypes.json.gz"
LOCK_FILE = "resources/sources.lock.json"


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
    return BUILTIN_DATASETS[dataset][0]


def dataset_inputs(config: dict[str, Any], dataset: str) -> list[str]:
    """Raw files of a dataset, in the order ``crucible crystal build-items --inputs`` wants."""
    user = section(config).get("user_datasets", {})
    if dataset in user:
        return [user[dataset]]
    source, folder = BUILTIN_DATASETS[dataset]
    if source == "aflow":
        return [AFLOW_FILE]
    return [f"resources/downloads/cdvae-{folder}-{split}.csv" for split in ("train", "test")]


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
    return out + get_csp_outputs(config)


def cdvae_mirror_args(config: dict) -> str:
    """The fetch command's --url-prefix for a CDVAE mirror (crystal.cdvae_url_prefix), or ''."""
    import shlex

    prefix = (config.get("crystal") or {}).get("cdvae_url_prefix")
    return f"--url-prefix {shlex.quote(prefix)}" if prefix else ""


# ---------------------------------------------------------------- CSP at k samples and the audit


def csp_section(config: dict[str, Any]) -> dict[str, Any]:
    """``crystal.csp`` with its defaults: k, the responders answering k times, samples files."""
    from crucible.crystal.csp import DEFAULT_K

    csp = section(config).get("csp") or {}
    return {
        "k": int(csp.get("k", DEFAULT_K)),
        "responders": list(csp.get("responders") or []),
        "samples_files": dict(csp.get("samples_files") or {}),
    }


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
    return csp["responders"] + sorted(files)


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
    """Raw files for the audit: as build-items, plus the validation CSV of a CDVAE set."""
    if dataset_source(config, dataset) != "cdvae":
        return dataset_inputs(config, dataset)
    folder = BUILTIN_DATASETS[dataset][1]
    return [f"resources/downloads/cdvae-{folder}-{split}.csv" for split in ("train", "val", "test")]


def audit_params(config: dict[str, Any]) -> dict[str, Any]:
    from crucible.crystal.audit import DEFAULT_MAX_COMPARISONS
    from crucible.crystal.scoring import DEFAULT_CONVENTION

    audit = section(config).get("audit") or {}
    return {
        "convention": audit.get("convention", DEFAULT_CONVENTION),
        "max_comparisons": int(audit.get("max_comparisons", DEFAULT_MAX_COMPARISONS)),
    }


def csp_summaries(config: dict[str, Any]) -> list[str]:
    return [
        f"results/crystal/{ds}/csp/{r}.json" for ds in datasets(config) for r in csp_dataset_responders(config, ds)
    ]


def get_csp_outputs(config: dict[str, Any]) -> list[str]:
    """Per dataset the audit; with CSP responders their summaries and the CSP table."""
    out = []
    for ds in datasets(config):
        out += [f"results/crystal/{ds}/audit.json"] + [f"results/tables/crystal_{ds}_audit.{e}" for e in ("csv", "md")]
    summaries = csp_summaries(config)
    if summaries:
        out += summaries + [f"results/tables/crystal_csp.{e}" for e in ("csv", "md", "tex")]
    return out


def csp_llm_responses(config: dict[str, Any]) -> list[str]:
    """The LLM stage's answers to the repeated prompt sets (language models among the CSP responders)."""
    models = [r for r in csp_section(config)["responders"] if r in llm_models(config)]
    k = csp_section(config)["k"]
    return [f"results/crystal/{ds}/k{k}/responses/{m}.jsonl" for ds in datasets(config) for m in models]
