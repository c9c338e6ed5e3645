"""What a config's ``matbench`` section selects, and its start-up checks: the tasks and models,
which rules make each model's predictions (CPU per fold or per task, GPU, imported files), the
user datasets and what they are defined on, which per-structure features a model reads.

Pure functions of the config dict (the section read with :func:`crucible.dag.config.section`,
defaults from the schema); an unknown name is a :class:`~crucible.core.errors.ConfigError`
naming the config key. The paths the rules read and write are :mod:`crucible.matbench.workflow`'s.
"""

from __future__ import annotations

import json
import re
from typing import Any

from crucible.core.errors import ConfigError
from crucible.dag.config import section
from crucible.dag.rules import PRIORITY
from crucible.matbench.tasks import TASKS

# cpu: the CPU rules (one job per fold, or per task where job_granularity says so); gpu: the GPU
# rule; files: import of predictions made elsewhere.
MODEL_KINDS = ("cpu", "gpu", "files")


GRANULARITIES = ("fold", "task")


def matbench_section(config: dict[str, Any]) -> dict[str, Any]:
    return section(config, "matbench")


def tasks(config: dict[str, Any]) -> list[str]:
    """The configured tasks in Matbench's order (by dataset size), whatever the config's order."""
    wanted = matbench_section(config)["tasks"]
    return [t for t in TASKS if t in wanted]


def models(config: dict[str, Any]) -> list[str]:
    return list(matbench_section(config)["models"])


def model_kind(config: dict[str, Any], name: str) -> str:
    """Which rules make the model's predictions: one of :data:`MODEL_KINDS`.

    'files' for user-supplied predictions, else the registered model's device, gpu or cpu.
    """
    mb = matbench_section(config)
    if name in mb["prediction_files"]:
        return "files"
    return model_spec(config, name).device


def model_spec(config: dict[str, Any], name: str):
    """The model's registry entry; an unknown name is a ConfigError naming the config key."""
    from crucible.models.registry import get_spec

    try:
        return get_spec(name, matbench_section(config)["custom_models"])
    except ConfigError as exc:
        raise ConfigError(f"config matbench.models: {exc}") from None


def models_of_kind(config: dict[str, Any], kind: str) -> list[str]:
    """The configured models routed to the CPU rules, the GPU rule, or the import rule."""
    if kind not in MODEL_KINDS:
        raise ValueError(f"kind must be one of {MODEL_KINDS}, not {kind!r}")
    return [m for m in models(config) if model_kind(config, m) == kind]


def cpu_models(config: dict[str, Any]) -> list[str]:
    """Models fitted on the CPU (a user dataset's fold jobs, one per fold, take them all)."""
    return models_of_kind(config, "cpu")


def job_granularity(config: dict[str, Any], model: str, task: str) -> str:
    """'task' when one job fits the model's five folds on this task in turn, else 'fold'.

    Declared by the model for the task's size (``ModelSpec.task_jobs_up_to``): a cheap fit is
    not worth a job's start-up, an expensive one is worth a job per fold. GPU models and
    imported predictions are always per fold.
    """
    from crucible.matbench.tasks import N_SAMPLES

    if model_kind(config, model) != "cpu":
        return "fold"
    return model_spec(config, model).granularity(N_SAMPLES[task])


def predict_priority(config: dict[str, Any], model: str) -> int:
    """A model cheap on every task (one job per task everywhere: dummy) fits before the others, so
    that its scores, figures and results file do not wait for the run's tail."""
    cheap = model_kind(config, model) == "cpu" and model_spec(config, model).task_jobs_up_to == float("inf")
    return PRIORITY["quick_fit" if cheap else "fit"]


def cpu_model_pattern(config: dict[str, Any], granularity: str) -> str:
    """The ``model`` wildcard constraint of the per-fold ("fold") or per-task ("task") CPU rule.

    Granularity belongs to a (model, task) pair, but Snakemake constrains each wildcard on its
    own. Both rules' outputs are ``.../predictions/{model}/{task}/fold_<k>...``, so each model's
    branch carries a lookahead on the task directory that follows it: exactly one of the two
    rules can make any prediction file, and a model may be per task on small tasks and per fold
    on large ones.
    """
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, not {granularity!r}")
    branches = []
    for model in sorted(cpu_models(config)):
        own = [t for t in TASKS if job_granularity(config, model, t) == granularity]
        if own:
            branches.append(f"{re.escape(model)}(?=/(?:{'|'.join(own)})/)")
    return "|".join(branches) or "(?!x)x"


def check_models(config: dict[str, Any]) -> None:
    """Fail at start-up, not in a job, on a model name that is neither built in nor configured,
    on a bad user dataset, or on a model that cannot get its inputs on a task (structure models
    on the composition mirror, mlip-embed on a composition task)."""
    for m in models(config):
        model_kind(config, m)
    try:
        check_structure_inputs(config)
    except ConfigError as exc:
        raise ConfigError(f"config matbench: {exc}") from None


def check_model_params(config: dict[str, Any]) -> None:
    """``model_params`` of a model that is not configured would be ignored: refuse them."""
    from crucible.models.registry import builtin_models

    mb = matbench_section(config)
    known = set(builtin_models()) | set(mb["custom_models"]) | set(mb["prediction_files"])
    for name in sorted(mb["model_params"]):
        if name not in known:
            raise ConfigError(
                f"config error at matbench.model_params.{name}: no model of that name "
                f"(known: {', '.join(sorted(known))}); its parameters would be ignored"
            )


def check(config: dict[str, Any]) -> None:
    """The start-up checks of a Matbench section: something to run, known model names (and
    parameters), inputs every model can get on every task."""
    mb = matbench_section(config)
    if "matbench" in config and not mb["tasks"] and not mb["user_datasets"]:
        raise ConfigError(
            "config matbench.tasks: [] should be non-empty (or name a dataset in matbench.user_datasets);"
            " matbench: {enabled: false} switches Matbench off"
        )
    check_model_params(config)
    check_models(config)
    check_params_taken(config)


def check_params_taken(config: dict[str, Any]) -> None:
    """Each configured model's params (``model_params``, a custom entry's ``params``) against the
    names its estimator takes on the task types this config runs, before any job."""
    from crucible.matbench.tasks import task_type_of
    from crucible.models.registry import check_params

    mb = matbench_section(config)
    kinds = {task_type_of(t) for t in mb["tasks"]} | {d["task_type"] for d in mb["user_datasets"].values()}
    for m in models(config):
        if model_kind(config, m) == "files":
            continue
        own = (mb["custom_models"].get(m) or {}).get("params") or {}
        for where, params in (
            (f"matbench.custom_models.{m}.params", own),
            (f"matbench.model_params.{m}", mb["model_params"].get(m) or {}),
        ):
            if params:
                check_params(model_spec(config, m), params, where, kinds)


SCM_KIND, EMBED_KIND = "scm-magpie", "mlip-embedding"


def user_datasets(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``matbench.user_datasets``, each entry checked (name, keys), in name order."""
    from crucible.matbench.user_datasets import check_spec

    return {name: check_spec(name, spec) for name, spec in sorted(matbench_section(config)["user_datasets"].items())}


def user_dataset_spec(config: dict[str, Any], name: str) -> str:
    """One user dataset's entry as sorted JSON (a ``params:`` value: editing it reruns)."""
    return json.dumps(user_datasets(config)[name], sort_keys=True)


def task_input_type(config: dict[str, Any], task: str) -> str:
    """'composition' or 'structure': what the task (or user dataset) is defined on."""
    from crucible.matbench.tasks import COMPOSITION_TASKS

    if task in TASKS:
        return "composition" if task in COMPOSITION_TASKS else "structure"
    return user_datasets(config)[task]["input"]


def structures_available(config: dict[str, Any], task: str) -> bool:
    """Whether the clean table will hold structures (the composition mirror has formulas only)."""
    from crucible.matbench.tasks import COMPOSITION_TASKS

    if task in TASKS:
        return task not in COMPOSITION_TASKS and matbench_section(config)["source"] == "matminer"
    return user_datasets(config)[task]["input"] == "structure"


def fitted_models(config: dict[str, Any]) -> list[str]:
    """Configured models that crucible runs itself (not imported prediction files)."""
    mb = matbench_section(config)
    return [m for m in mb["models"] if m not in mb["prediction_files"]]


def check_structure_inputs(config: dict[str, Any]) -> None:
    """Stop before anything runs if a model cannot get the inputs it needs on a task or dataset."""
    from crucible.matbench.structure_inputs import check_inputs

    names = tasks(config) + list(user_datasets(config))
    for model in fitted_models(config):
        spec = model_spec(config, model)
        for task in names:
            check_inputs(spec, task, task_input_type(config, task), structures_available(config, task))


def structure_feature_kind(config: dict[str, Any], model: str, task: str) -> str | None:
    """Which per-structure cache the model reads on this task: SCM_KIND, EMBED_KIND or None."""
    kind = model_spec(config, model).input_kind
    if kind == EMBED_KIND:
        return EMBED_KIND
    if kind == SCM_KIND and task_input_type(config, task) == "structure" and structures_available(config, task):
        return SCM_KIND
    return None


def structure_tasks(config: dict[str, Any]) -> list[str]:
    """Tasks and user datasets whose clean tables carry structures."""
    return [t for t in tasks(config) + list(user_datasets(config)) if structures_available(config, t)]


def model_param_keys(sec: dict[str, Any]) -> set[str]:
    """What matbench.model_params may be keyed by: a registered model, a user's class, outside predictions."""
    from crucible.models.registry import builtin_models

    return set(builtin_models()) | set(sec.get("custom_models") or {}) | set(sec.get("prediction_files") or {})
