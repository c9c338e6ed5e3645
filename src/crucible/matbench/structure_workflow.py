"""Pure functions of the config dict for structure features, structure models and user datasets.

``workflow/rules/common.smk`` and ``workflow/rules/matbench_user.smk`` call these; nothing here
touches files. ``spec_of(name)`` is the model registry lookup (``get_spec`` with the config's
custom models), passed in so that this module stays free of Snakemake.
"""

from __future__ import annotations

from typing import Any, Callable

from crucible.matbench.structure_inputs import check_inputs
from crucible.matbench.tasks import COMPOSITION_TASKS, TASKS
from crucible.matbench.user_datasets import check_spec

SCM_KIND, EMBED_KIND = "scm-magpie", "mlip-embedding"


def user_datasets(matbench: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: check_spec(name, spec) for name, spec in sorted(matbench.get("user_datasets", {}).items())}


def task_input_type(matbench: dict[str, Any], task: str) -> str:
    if task in TASKS:
        return "composition" if task in COMPOSITION_TASKS else "structure"
    return user_datasets(matbench)[task]["input"]


def structures_available(matbench: dict[str, Any], task: str) -> bool:
    if task in TASKS:
        return task not in COMPOSITION_TASKS and matbench.get("source") == "matminer"
    return user_datasets(matbench)[task]["input"] == "structure"


def model_names(matbench: dict[str, Any]) -> list[str]:
    """Configured models that crucible runs itself (not imported prediction files)."""
    return [m for m in matbench.get("models", []) if m not in matbench.get("prediction_files", {})]


def check_structure_inputs(matbench: dict[str, Any], spec_of: Callable[[str], Any]) -> None:
    """Stop before anything runs if a model cannot get the inputs it needs on a task or dataset."""
    tasks = [t for t in TASKS if t in matbench.get("tasks", [])] + list(user_datasets(matbench))
    for model in model_names(matbench):
        spec = spec_of(model)
        for task in tasks:
            check_inputs(spec, task, task_input_type(matbench, task), structures_available(matbench, task))


def structure_feature_kind(matbench: dict[str, Any], spec: Any, task: str) -> str | None:
    """Which per-structure cache the model reads on this task: SCM_KIND, EMBED_KIND or None."""
    if spec.input_kind == EMBED_KIND:
        return EMBED_KIND
    if spec.input_kind == SCM_KIND and task_input_type(matbench, task) == "structure" \
            and structures_available(matbench, task):
        return SCM_KIND
    return None


def structure_tasks(matbench: dict[str, Any]) -> list[str]:
    """Tasks and user datasets whose clean tables carry structures."""
    tasks = [t for t in TASKS if t in matbench.get("tasks", []) and structures_available(matbench, t)]
    return tasks + [d for d in user_datasets(matbench) if structures_available(matbench, d)]


def needs_kind(matbench: dict[str, Any], spec_of: Callable[[str], Any], kind: str) -> bool:
    return any(spec_of(m).input_kind == kind for m in model_names(matbench)) and bool(structure_tasks(matbench))


def user_outputs(matbench: dict[str, Any]) -> list[str]:
    out = []
    datasets = user_datasets(matbench)
    models = model_names(matbench)
    for name in datasets:
        out += [f"results/matbench/user/{name}/folds.parquet"]
        if models:
            out += [f"results/matbench/user/{name}/scores/{m}.json" for m in models]
            out += [f"results/tables/matbench_user_{name}.{ext}" for ext in ("csv", "md", "tex")]
    return out


def user_data_file(name: str) -> str:
    return f"results/matbench/user/{name}/data.parquet"

