"""What the Matbench part of the DAG builds, as pure functions of the config dict.

The Matbench rule files call these for paths, file lists and ``params:`` strings,
:mod:`crucible.matbench.selection` for what the config selects (tasks, models, user datasets) and
:mod:`crucible.matbench.raw_files` for the raw files and their pins; they hold no logic of their own. Every function takes the whole config (its
``matbench`` section is read here, with the schema's defaults filled in:
:func:`crucible.dag.config.section`) and returns paths relative to the working directory, strings for
``params:``, or raises :class:`~crucible.core.errors.ConfigError` naming the config key. :data:`FAMILY`
declares the family to :mod:`crucible.dag.families`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from crucible.dag.families import Family
from crucible.dag.rules import alternation
from crucible.matbench.meanings import names
from crucible.matbench.selection import (
    EMBED_KIND,
    SCM_KIND,
    check,
    fitted_models,
    matbench_section,
    model_param_keys,
    model_spec,
    models,
    structure_feature_kind,
    structure_tasks,
    tasks,
    user_datasets,
)
from crucible.matbench.tasks import N_FOLDS, TASKS

FOLDS = tuple(range(N_FOLDS))


def wildcard_constraints(config: dict[str, Any]) -> dict[str, str]:
    """Global: every Matbench rule (the matminer download too) names them so."""
    return {"task": alternation(TASKS), "fold": f"[0-{N_FOLDS - 1}]"}


def data_file(task: str) -> str:
    return f"results/matbench/data/{task}.parquet"


def card_file(task: str) -> str:
    return f"results/matbench/data/{task}.json"


def folds_file(task: str) -> str:
    return f"results/matbench/folds/{task}.parquet"


def prediction_file(model: str, task: str, fold: int | str) -> str:
    return f"results/matbench/predictions/{model}/{task}/fold_{fold}.parquet"


def prediction_info_file(model: str, task: str, fold: int | str) -> str:
    """The sidecar JSON (timings, params) the predict command writes beside each prediction file."""
    return f"results/matbench/predictions/{model}/{task}/fold_{fold}.json"


def clean_data_files(config: dict[str, Any]) -> list[str]:
    return [data_file(t) for t in tasks(config)]


def task_cards(config: dict[str, Any]) -> list[str]:
    return [card_file(t) for t in tasks(config)]


def fold_files(config: dict[str, Any]) -> list[str]:
    return [folds_file(t) for t in tasks(config)]


def feature_tables(config: dict[str, Any]) -> list[str]:
    """The names of the tables features are built from: each official task, then ``user/<name>``
    for each user dataset. Each table gets its own feature files (``magpie_features``), built
    from it alone, so that a task's features never change when other tasks join or leave."""
    return tasks(config) + [f"user/{d}" for d in user_datasets(config)]


def feature_table_pattern(config: dict[str, Any]) -> str:
    """The ``{table}`` wildcard constraint of the feature rules."""
    return alternation(feature_tables(config))


def feature_source(config: dict[str, Any], table: str) -> str:
    """The clean table a feature table name stands for (``user/<name>``: a user dataset's)."""
    if table.startswith("user/"):
        return user_data_file(table.removeprefix("user/"))
    return data_file(table)


def _feature_table(task: str) -> str:
    """A task's or user dataset's name as a feature table name."""
    return task if task in TASKS else f"user/{task}"


def magpie_features(table: str) -> str:
    """``results/features/magpie-<version>/<table>.parquet``: the table's own Magpie features.

    The directory carries the featurizer version (matminer, element tables, our code), so a
    change there makes new files rather than reusing stale numbers.
    """
    from crucible.features.cache import features_path

    return str(features_path(table))


def model_features(config: dict[str, Any], model: str, task: str) -> str | list[str]:
    """The Magpie feature file of the task (or user dataset) for models that take Magpie features
    (rf-scm-magpie too), else nothing."""
    if model_spec(config, model).input_kind in ("magpie", SCM_KIND):
        return magpie_features(_feature_table(task))
    return []


def model_params(config: dict[str, Any], model: str) -> str:
    """The model's hyperparameter overrides as sorted JSON (a ``params:`` value: editing it reruns)."""
    return json.dumps(matbench_section(config)["model_params"].get(model, {}), sort_keys=True)


def custom_model_arg(config: dict[str, Any], model: str) -> str:
    """``{model: entry}`` of a user's model (or variant) as sorted JSON, ``{}`` for a registered
    one: only the job's own entry, so that another entry, used or not, reruns nothing."""
    custom = matbench_section(config)["custom_models"]
    return json.dumps({model: custom[model]} if model in custom else {}, sort_keys=True)


def element_table(config: dict[str, Any], model: str) -> str:
    """The element embedding table of a composition network: a pinned table by its name
    (the job checks it against its pin), or the user's own CSV."""
    from crucible.models.element_tables import DEFAULT_TABLE, table_file

    return table_file(matbench_section(config)["model_params"].get(model, {}).get("element_table", DEFAULT_TABLE))


def user_prediction_file(config: dict[str, Any], model: str, task: str, fold: int | str) -> str:
    """A prediction file made outside crucible (``matbench.prediction_files``)."""
    root = matbench_section(config)["prediction_files"][model]["dir"]
    return str(Path(root) / task / f"fold_{fold}.parquet")


def fold_predictions(model: str, task: str) -> list[str]:
    """The five fold prediction files of one model on one task, in fold order."""
    return [prediction_file(model, task, k) for k in FOLDS]


def fold_prediction_infos(model: str, task: str) -> list[str]:
    """Their sidecar JSONs, in the same order."""
    return [prediction_info_file(model, task, k) for k in FOLDS]


def fold_numbers() -> str:
    """The folds a per-task job fits, as its ``--fold`` arguments (same order as its ``--out``)."""
    return " ".join(str(k) for k in FOLDS)


def model_predictions(config: dict[str, Any], model: str) -> list[str]:
    """Every fold prediction file of one model, task by task in Matbench order."""
    return [p for t in tasks(config) for p in fold_predictions(model, t)]


def published_table(config: dict[str, Any], repo: str | Path) -> str:
    path = Path(matbench_section(config)["published"])
    return str(path if path.is_absolute() else Path(repo) / path)


# --- the run's aggregates: what depends on the configured set of tasks and models -------------
#
# Everything per (model, task) -- features, predictions, scores, per-model figures -- sits at one
# path whatever else is configured, so it is reused by every run that needs it. What summarizes
# the configured set (task table, leaderboard, fold table, scaled-error figure, results files,
# user-dataset tables) sits in the run's directory: results/ for the run named `default`,
# results/runs/<run_name>/ otherwise, so a subset run under its own name leaves the full run's
# tables as they were, and one under the same name replaces them (cheap: no fit reruns).

DEFAULT_RUN = "default"


def run_name(config: dict[str, Any]) -> str:
    return matbench_section(config)["run_name"]


def run_set(config: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """What this run's aggregates summarize: its tasks, models and user datasets (crucible.dag.runs)."""
    return tasks(config), models(config), sorted(matbench_section(config)["user_datasets"])


def run_dir(config: dict[str, Any]) -> str:
    """``results`` for the default run, ``results/runs/<run_name>`` for any other."""
    name = run_name(config)
    return "results" if name == DEFAULT_RUN else f"results/runs/{name}"


def run_file(config: dict[str, Any], relative: str) -> str:
    """A run aggregate's path, e.g. ``run_file(config, "tables/matbench_leaderboard.csv")``."""
    return f"{run_dir(config)}/{relative}"


def results_file(config: dict[str, Any], model: str) -> str:
    """The model's Matbench results file for this run's tasks (``{model}`` keeps a wildcard)."""
    return run_file(config, f"matbench/{model}/results.json.gz")


def results_info_file(config: dict[str, Any], model: str) -> str:
    return run_file(config, f"matbench/{model}/info.json")


def user_table_file(config: dict[str, Any], dataset: str, ext: str) -> str:
    return run_file(config, f"tables/matbench_user_{dataset}.{ext}")


def score_files(config: dict[str, Any]) -> list[str]:
    return [f"results/matbench/scores/{m}/{t}.json" for m in models(config) for t in tasks(config)]


def data_outputs(config: dict[str, Any]) -> list[str]:
    """What ``snakemake matbench_data`` builds: folds of every task and the task table."""
    return fold_files(config) + [run_file(config, "tables/matbench_tasks.csv")]


def final_outputs(config: dict[str, Any]) -> list[str]:
    """Every Matbench target of ``rule all``: the official tasks' (none when ``tasks: []``, a
    config of user datasets only), then the user datasets'."""
    return official_outputs(config) + user_outputs(config)


def official_outputs(config: dict[str, Any]) -> list[str]:
    ts, ms = tasks(config), models(config)
    if not ts:
        return []
    out = [run_file(config, f"tables/{name}") for name in ("matbench_tasks.csv", "matbench_tasks.md")]
    out += [run_file(config, "tables/matbench_task_overlap.csv")]
    out += fold_files(config)
    if ms:
        out += score_files(config)
        out += [results_file(config, m) for m in ms]
        out += [results_info_file(config, m) for m in ms]
        out += [run_file(config, f"tables/matbench_leaderboard.{ext}") for ext in ("csv", "md", "tex")]
        out += [run_file(config, "tables/matbench_folds.csv")]
        out += [run_file(config, f"figures/matbench_scaled_error.{ext}") for ext in ("png", "pdf")]
        out += [f"results/figures/matbench/{m}/{t}.png" for m in ms for t in ts]
    return out


# --- structure features, structure models and user datasets (issue 16) ------------------------


def user_data_file(name: str) -> str:
    return f"results/matbench/user/{name}/data.parquet"


def scm_features(table: str) -> str:
    """``results/features/scm-<version>/<table>.parquet``: the table's Sine Coulomb eigenvalues."""
    from crucible.features.structure_cache import scm_cache_dirname

    return f"results/features/{scm_cache_dirname()}/{table}.parquet"


def embedding_features(table: str) -> str:
    """``results/features/mlip-embed-<model>-<version>/<table>.parquet``: its CHGNet embeddings."""
    from crucible.features.mlip_embed import embed_cache_dirname

    return f"results/features/{embed_cache_dirname()}/{table}.parquet"


def model_structure_features(config: dict[str, Any], model: str, task: str) -> str | list[str]:
    """The per-structure feature file a structure model reads on this task or user dataset, else nothing."""
    kind = structure_feature_kind(config, model, task)
    files = {SCM_KIND: scm_features, EMBED_KIND: embedding_features}
    return files[kind](_feature_table(task)) if kind else []


def structure_table_pattern(config: dict[str, Any]) -> str:
    """The ``{table}`` constraint of the structure feature rules: tables that carry structures."""
    return alternation([_feature_table(t) for t in structure_tasks(config)])


def user_score_files(config: dict[str, Any], name: str) -> list[str]:
    return [f"results/matbench/user/{name}/scores/{m}.json" for m in fitted_models(config)]


def user_outputs(config: dict[str, Any]) -> list[str]:
    out = []
    for name in user_datasets(config):
        out += [f"results/matbench/user/{name}/folds.parquet"]
        if fitted_models(config):
            out += user_score_files(config, name)
            out += [user_table_file(config, name, ext) for ext in ("csv", "md", "tex")]
    return out


def built(config: dict[str, Any]) -> dict[str, list[str]]:
    """The report front page's summary: tasks, user datasets, models, and a named run's name."""
    out = {"tasks": tasks(config), "user datasets": list(user_datasets(config)), "models": models(config)}
    return out | ({"run name": [run_name(config)]} if run_name(config) != DEFAULT_RUN else {})


FAMILY = Family(
    name="matbench",
    package="crucible.matbench",
    final_outputs=final_outputs,
    check=check,
    rule_files=("matbench.smk", "features.smk", "report.smk", "matbench_user.smk"),
    envs=("matbench.yaml", "torch.yaml", "mlip.yaml", "fetch.yaml"),
    captions=(
        "tasks.rst",
        "task_overlap.rst",
        "leaderboard.rst",
        "folds.rst",
        "scaled_error.rst",
        "model_figure.rst",
        "user_dataset.rst",
    ),
    wildcard_constraints=wildcard_constraints,
    extra_targets={"matbench_data": data_outputs},
    built=built,
    names=names,
    run_name=run_name,
    run_set=run_set,
    keyed_by_name={"model_params": ("model", lambda sec: model_param_keys(sec))},
    defined_names=(("custom_models",), ("prediction_files",), ("user_datasets",)),
    listed_names=(("models",), ("tasks",)),
    single_names=(("run_name",),),
)
