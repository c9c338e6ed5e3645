"""Pure helpers for the Snakefile and for other benchmark families: targets and rule params.

A benchmark that scores language models writes ``results/{benchmark}/{dataset}/prompts.jsonl``
and asks for :func:`response_targets`; rule ``generate_llm_responses`` (workflow/rules/llm.smk)
makes them. The stage is a service: a benchmark declares the response files it asks for with
:func:`asks_language_models` on its function of the config, and :func:`final_outputs` (``snakemake
llm``) is the union of those. It is registered and declared as the families are (its rules,
section, switch and target), with ``layer="services"`` in :data:`FAMILY`: the families import
it, so it stands below them. Nothing here touches the file system except :func:`replay_input`,
which names a replay file so that editing it reruns the job.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterable
from typing import Any

from crucible.core.errors import ConfigError
from crucible.dag import config as _config
from crucible.dag.families import Family
from crucible.dag.rules import alternation
from crucible.llm.model_entry import model_spec, spec_sha256
from crucible.llm.replay import replay_path

NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]*"


def llm_models(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every configured language model, checked, by name."""
    models = _config.section(config, "llm")["models"]
    for name in models:
        if not re.fullmatch(NAME_PATTERN, name):
            raise ConfigError(f"config llm.models: name {name!r} must match {NAME_PATTERN}")
    return {name: model_spec(name, models[name]) for name in sorted(models)}


def models_by_backend(config: dict[str, Any], backends: Iterable[str]) -> list[str]:
    wanted = set(backends)
    return [name for name, spec in llm_models(config).items() if spec["backend"] in wanted]


def benchmark_models(config: dict[str, Any], benchmark: str) -> list[str]:
    """``config[benchmark]["llm_models"]``, each checked to exist under ``llm.models``."""
    names = list((config.get(benchmark) or {}).get("llm_models") or [])
    known = llm_models(config)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(
            f"config {benchmark}.llm_models: {', '.join(unknown)} not defined under llm.models "
            f"(defined: {', '.join(known) or 'none'})"
        )
    return names


def response_file(benchmark: str, dataset: str, model: str) -> str:
    return f"results/{benchmark}/{dataset}/responses/{model}.jsonl"


def response_targets(
    config: dict[str, Any], benchmark: str, datasets: Iterable[str], models: Iterable[str] | None = None
) -> list[str]:
    """Response files for every dataset x model (the benchmark's ``llm_models`` unless given).

    ``benchmark`` is one path component; a dataset may contain slashes.
    """
    if "/" in benchmark or not benchmark:
        raise ConfigError(f"benchmark name {benchmark!r} must be one path component")
    names = benchmark_models(config, benchmark) if models is None else list(models)
    known = llm_models(config)
    for name in names:
        if name not in known:
            raise ConfigError(f"language model {name!r} is not defined under llm.models")
    return [response_file(benchmark, d.strip("/"), m) for d in sorted(datasets) for m in names]


def model_sha256(config: dict[str, Any], name: str) -> str:
    """The hash of the model's checked entry: a rule param, so that editing the entry reruns the
    job, and passed to it, so that the job refuses an entry other than the one planned with.

    The entry itself never goes on the command line (Snakemake prints and records every shell
    command and param); the job reads it from the config files by name.
    """
    return spec_sha256(name, _entry(config, name))


def _entry(config: dict[str, Any], name: str) -> dict[str, Any]:
    entry = (config.get("llm") or {}).get("models", {}).get(name)
    if entry is None:
        raise ConfigError(f"language model {name!r} is not defined under llm.models")
    return entry


def config_file_flags(directive_files: Iterable[str], command_line_files: Iterable[str]) -> str:
    """``--config-file A --config-file B ...``, absolute and quoted, in Snakemake's precedence:
    the Snakefile's ``configfile:`` first, then each ``--configfile`` (later ones win)."""
    cli = [os.path.abspath(str(f)) for f in command_line_files]
    files = [os.path.abspath(str(f)) for f in directive_files if os.path.abspath(str(f)) not in cli] + cli
    return " ".join(f"--config-file {shlex.quote(f)}" for f in files)


def replay_input(config: dict[str, Any], name: str, benchmark: str, dataset: str) -> list[str]:
    """The replay file for this prompt set (a rule input), or nothing for other backends."""
    spec = llm_models(config)[name]
    if spec["backend"] != "replay":
        return []
    return [replay_path(spec["path"], benchmark, dataset)]


def cache_dir(config: dict[str, Any]) -> str:
    return _config.section(config, "llm")["cache_dir"]


def model_pattern(config: dict[str, Any], backends: Iterable[str]) -> str:
    """The ``llm_model`` constraint of the rule that runs these backends."""
    return alternation(models_by_backend(config, backends))


# Own wildcard names (llm_*), so that no other family's global constraint applies to them.
BENCHMARK_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_-]*"
DATASET_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._/-]*"


def wildcard_constraints(config: dict[str, Any], backends: Iterable[str]) -> dict[str, str]:
    return {
        "llm_benchmark": BENCHMARK_PATTERN,
        "llm_dataset": DATASET_PATTERN,
        "llm_model": model_pattern(config, backends),
    }


# benchmark -> its function of the config listing the response files it asks for; filled as each
# family's workflow module is imported (crucible.dag.families.families() imports them all).
_ASKED_BY: dict[str, Callable[[dict[str, Any]], list[str]]] = {}


def asks_language_models(benchmark: str):
    """Decorator: ``responses(config) -> [response files]`` is what ``benchmark`` asks its language
    models for (:func:`response_targets` of its prompt sets); the inference stage makes them."""

    def register(responses: Callable[[dict[str, Any]], list[str]]):
        if _ASKED_BY.get(benchmark, responses) is not responses:
            raise ValueError(f"benchmark {benchmark!r} declares its language-model responses twice")
        _ASKED_BY[benchmark] = responses
        return responses

    return register


def final_outputs(config: dict[str, Any]) -> list[str]:
    """Every response file some benchmark asks its language models for, in the families' order:
    ``snakemake llm`` runs the inference stage alone (e.g. on a GPU node), leaving the scoring to
    a later run."""
    from crucible.dag.families import enabled, families

    order = [f.name for f in families()]  # imports every family's workflow module: all declared
    asked = sorted(_ASKED_BY, key=lambda b: (order.index(b) if b in order else len(order), b))
    # a family switched off (crucible.dag.families.SWITCH) asks no language model
    return [r for benchmark in asked if enabled(config, benchmark) for r in _ASKED_BY[benchmark](config)]


def check(config: dict[str, Any]) -> None:
    llm_models(config)


def names(config: dict[str, Any]) -> dict[str, Any]:
    """``llm/<name>`` for every language model some benchmark asks: the hash of its checked entry
    less where and how patiently it is asked (:func:`crucible.llm.model_entry.answering_sha256`; never
    the entry, which may name a key's variable or a private endpoint). With the address in it, a
    server restarted on another port or node made the results folder refuse the config."""
    from crucible.identity.name_book import Meaning
    from crucible.llm.model_entry import answering_sha256

    # only the models defined here: a benchmark may score response files made elsewhere
    used = sorted({os.path.splitext(os.path.basename(r))[0] for r in final_outputs(config)} & set(llm_models(config)))
    return {
        f"llm/{name}": Meaning(
            {"answering_entry_sha256": answering_sha256(name, _entry(config, name))},
            f"llm.models.{name}",
            "give the changed entry a name of its own under llm.models",
            formerly=({"entry_sha256": model_sha256(config, name)},),  # the whole entry, until issue 33
            files=_loaded_files(_entry(config, name)),
        )
        for name in used
    }


def _loaded_files(entry: dict[str, Any]) -> tuple[str, ...]:
    """What a model's jobs load by path (a local model's folder of weights): hashed into the code
    identity of exactly those jobs (crucible.identity.name_book.Meaning.files). A replay's path is a
    template of the jobs' own inputs, checked as inputs are."""
    path = entry.get("path") if entry.get("backend") == "transformers" else None
    return (str(path),) if path else ()


FAMILY = Family(
    name="llm",
    package="crucible.llm",
    final_outputs=final_outputs,
    check=check,
    captions=(),
    built=lambda c: {"language models": list(llm_models(c))},
    names=names,
    layer="services",
    defined_names=(("models",),),
)
