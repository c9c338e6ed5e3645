"""What the Matbench part of the DAG builds, as pure functions of the config dict.

The Matbench rule files call these (and :mod:`crucible.matbench.raw_files` for the raw files and
their pins); they hold no logic of their own. Every function takes the whole config (its
``matbench`` section is read here, with the schema's defaults filled in:
:func:`crucible.dag.config.section`) and returns paths relative to the working directory, strings for
``params:``, or raises :class:`~crucible.core.errors.ConfigError` naming the config key. :data:`FAMILY`
declares the family to :mod:`crucible.dag.families`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from crucible.core.errors import ConfigError
from crucible.dag.config import section
from crucible.dag.families import Family
from crucible.dag.workflow import PRIORITY, alternation
from crucible.matbench.meanings import names
from crucible.matbench.tasks import N_FOLDS, TASKS

FOLDS = tuple(range(N_FOLDS))
# cpu: the CPU rules (one job per fold, or per task where job_granularity says so); gpu: the GPU
# rule; files: import of predictions made elsewhere.
MODEL_KINDS = ("cpu", "gpu", "files")
GRANULARITIES = ("fold", "task")


def _section(config: dict[str, Any]) -> dict[str, Any]:
    return section(config, "matbench")


def tasks(config: dict[str, Any]) -> list[str]:
    """The configured tasks in Matbench's order (by dataset size), whatever the config's order."""
    wanted = _section(config)["tasks"]
    return [t for t in TASKS if t in wanted]


def models(config: dict[str, Any]) -> list[str]:
    return list(_section(config)["models"])


def model_kind(config: dict[str, Any], name: str) -> str:
    """Which rules make the model's predictions: one of :data:`MODEL_KINDS`.

    'files' for user-supplied predictions, else the registered model's device, gpu or cpu.
    """
    mb = _section(config)
    if name in mb["prediction_files"]:
        return "files"
    return _spec(config, name).device


def _spec(config: dict[str, Any], name: str):
    """The model's registry entry; an unknown name is a ConfigError naming the config key."""
    from crucible.models.registry import get_spec

    try:
        return get_spec(name, _section(config)["custom_models"])
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
    return _spec(config, model).granularity(N_SAMPLES[task])


def predict_priority(config: dict[str, Any], model: str) -> int:
    """A model cheap on every task (one job per task everywhere: dummy) fits before the others, so
    that its scores, figures and results file do not wait for the run's tail."""
    cheap = model_kind(config, model) == "cpu" and _spec(config, model).task_jobs_up_to == float("inf")
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

    mb = _section(config)
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
    mb = _section(config)
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

    mb = _section(config)
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
                check_params(_spec(config, m), params, where, kinds)


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
    if _spec(config, model).input_kind in ("magpie", SCM_KIND):
        return magpie_features(_feature_table(task))
    return []


def model_params(config: dict[str, Any], model: str) -> str:
    """The model's hyperparameter overrides as sorted JSON (a ``params:`` value: editing it reruns)."""
    return json.dumps(_section(config)["model_params"].get(model, {}), sort_keys=True)


def custom_model_arg(config: dict[str, Any], model: str) -> str:
    """``{model: entry}`` of a user's model (or variant) as sorted JSON, ``{}`` for a registered
    one: only the job's own entry, so that another entry, used or not, reruns nothing."""
    custom = _section(config)["custom_models"]
    return json.dumps({model: custom[model]} if model in custom else {}, sort_keys=True)


def element_table(config: dict[str, Any], model: str) -> str:
    """The element embedding table of a composition network: a pinned table by its name
    (the job checks it against its pin), or the user's own CSV."""
    from crucible.models.element_tables import DEFAULT_TABLE, table_file

    return table_file(_section(config)["model_params"].get(model, {}).get("element_table", DEFAULT_TABLE))


def user_prediction_file(config: dict[str, Any], model: str, task: str, fold: int | str) -> str:
    """A prediction file made outside crucible (``matbench.prediction_files``)."""
    root = _section(config)["prediction_files"][model]["dir"]
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
    path = Path(_section(config)["published"])
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
    return _section(config)["run_name"]


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

SCM_KIND, EMBED_KIND = "scm-magpie", "mlip-embedding"


def user_datasets(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``matbench.user_datasets``, each entry checked (name, keys), in name order."""
    from crucible.matbench.user_datasets import check_spec

    return {name: check_spec(name, spec) for name, spec in sorted(_section(config)["user_datasets"].items())}


def user_dataset_spec(config: dict[str, Any], name: str) -> str:
    """One user dataset's entry as sorted JSON (a ``params:`` value: editing it reruns)."""
    return json.dumps(user_datasets(config)[name], sort_keys=True)


def user_data_file(name: str) -> str:
    return f"results/matbench/user/{name}/data.parquet"


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
        return task not in COMPOSITION_TASKS and _section(config)["source"] == "matminer"
    return user_datasets(config)[task]["input"] == "structure"


def fitted_models(config: dict[str, Any]) -> list[str]:
    """Configured models that crucible runs itself (not imported prediction files)."""
    mb = _section(config)
    return [m for m in mb["models"] if m not in mb["prediction_files"]]


def check_structure_inputs(config: dict[str, Any]) -> None:
    """Stop before anything runs if a model cannot get the inputs it needs on a task or dataset."""
    from crucible.matbench.structure_inputs import check_inputs

    names = tasks(config) + list(user_datasets(config))
    for model in fitted_models(config):
        spec = _spec(config, model)
        for task in names:
            check_inputs(spec, task, task_input_type(config, task), structures_available(config, task))


def structure_feature_kind(config: dict[str, Any], model: str, task: str) -> str | None:
    """Which per-structure cache the model reads on this task: SCM_KIND, EMBED_KIND or None."""
    kind = _spec(config, model).input_kind
    if kind == EMBED_KIND:
        return EMBED_KIND
    if kind == SCM_KIND and task_input_type(config, task) == "structure" and structures_available(config, task):
        return SCM_KIND
    return None


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


def structure_tasks(config: dict[str, Any]) -> list[str]:
    """Tasks and user datasets whose clean tables carry structures."""
    return [t for t in tasks(config) + list(user_datasets(config)) if structures_available(config, t)]


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


def _model_names(sec: dict[str, Any]) -> set[str]:
    """What matbench.model_params may be keyed by: a registered model, a user's class, outside predictions."""
    from crucible.models.registry import builtin_models

    return set(builtin_models()) | set(sec.get("custom_models") or {}) | set(sec.get("prediction_files") or {})


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
    keyed_by_name={"model_params": ("model", lambda sec: _model_names(sec))},
    defined_names=(("custom_models",), ("prediction_files",), ("user_datasets",)),
    listed_names=(("models",), ("tasks",)),
    single_names=(("run_name",),),
)
