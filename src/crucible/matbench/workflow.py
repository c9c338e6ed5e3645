"""What the Matbench part of the DAG builds, as pure functions of the config dict.

``workflow/rules/common.smk`` and ``workflow/rules/matbench.smk`` call these; they hold no
logic of their own. Every function takes the whole validated config (``config["matbench"]`` is
read here) and returns paths relative to the working directory, strings for ``params:``, or
raises :class:`~crucible.errors.ConfigError` naming the config key.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from crucible.errors import ConfigError
from crucible.matbench.tasks import N_FOLDS, TASKS
from crucible.workflow import member_pin

MATBENCH_METADATA = "resources/extracted/matbench-0.6/matbench_v0.1_dataset_metadata.json"
MATBENCH_VALIDATION = "resources/extracted/matbench-0.6/matbench_v0.1_validation.json"
CRABNET_DIR = "resources/extracted/crabnet-2.0.8"
FOLDS = tuple(range(N_FOLDS))
MODEL_KINDS = ("cpu", "gpu", "files")


def tasks(config: dict[str, Any]) -> list[str]:
    """The configured tasks in Matbench's order (by dataset size), whatever the config's order."""
    wanted = config["matbench"]["tasks"]
    return [t for t in TASKS if t in wanted]


def models(config: dict[str, Any]) -> list[str]:
    return list(config["matbench"]["models"])


def model_kind(config: dict[str, Any], name: str) -> str:
    """'files' for user-supplied predictions, else the registered model's device, cpu or gpu."""
    from crucible.models.registry import get_spec

    mb = config["matbench"]
    if name in mb["prediction_files"]:
        return "files"
    try:
        return get_spec(name, mb["custom_models"]).device
    except ConfigError as exc:
        raise ConfigError(f"config matbench.models: {exc}") from None


def models_of_kind(config: dict[str, Any], kind: str) -> list[str]:
    """The configured models routed to the CPU rule, the GPU rule, or the import rule."""
    if kind not in MODEL_KINDS:
        raise ValueError(f"kind must be one of {MODEL_KINDS}, not {kind!r}")
    return [m for m in models(config) if model_kind(config, m) == kind]


def check_models(config: dict[str, Any]) -> None:
    """Fail at start-up, not in a job, on a model name that is neither built in nor configured."""
    for m in models(config):
        model_kind(config, m)


def raw_task_file(config: dict[str, Any], task: str) -> str:
    if config["matbench"]["source"] == "matminer":
        return f"resources/downloads/{task}.json.gz"
    return f"{CRABNET_DIR}/{task}.csv"


def raw_provenance(config: dict[str, Any], sources: dict[str, Any], task: str) -> str:
    """``filename=sha256`` of the artifact the task's raw file came from, for its task card."""
    mb = config["matbench"]
    if mb["source"] == "matminer":
        from crucible.sources import matminer_artifact

        mirror = mb.get("matminer", {})
        spec = matminer_artifact(task, mirror.get("url_prefix"), mirror.get("sha256", {}).get(task))
    else:
        spec = sources["artifacts"]["crabnet-2.0.8"]
    return f"{spec['filename']}={spec['sha256']}"


def raw_pin(config: dict[str, Any], sources: dict[str, Any], task: str) -> str:
    """The pinned SHA-256 of the task's raw file: checked where it is read, and the task card must record it."""
    if config["matbench"]["source"] == "matminer":
        return raw_provenance(config, sources, task).rsplit("=", 1)[1]
    return member_pin(sources, "crabnet-2.0.8", f"{task}.csv")


def matminer_fetch_args(config: dict[str, Any], task: str) -> str:
    mirror = config["matbench"].get("matminer", {})
    args = []
    if mirror.get("url_prefix"):
        args += ["--url-prefix", mirror["url_prefix"]]
    pinned = mirror.get("sha256", {}).get(task)
    if pinned:
        args += ["--sha256", pinned]
    return " ".join(shlex.quote(a) for a in args)


def data_file(task: str) -> str:
    return f"results/matbench/data/{task}.parquet"


def card_file(task: str) -> str:
    return f"results/matbench/data/{task}.json"


def folds_file(task: str) -> str:
    return f"results/matbench/folds/{task}.parquet"


def prediction_file(model: str, task: str, fold: int | str) -> str:
    return f"results/matbench/predictions/{model}/{task}/fold_{fold}.parquet"


def clean_data_files(config: dict[str, Any]) -> list[str]:
    return [data_file(t) for t in tasks(config)]


def task_cards(config: dict[str, Any]) -> list[str]:
    return [card_file(t) for t in tasks(config)]


def fold_files(config: dict[str, Any]) -> list[str]:
    return [folds_file(t) for t in tasks(config)]


def magpie_cache() -> str:
    from crucible.features.magpie import MAGPIE_VERSION

    return f"results/features/magpie-{MAGPIE_VERSION}.parquet"


def model_features(config: dict[str, Any], model: str) -> str | list[str]:
    """The shared feature cache for models that take Magpie features, else nothing."""
    from crucible.models.registry import get_spec

    if get_spec(model, config["matbench"]["custom_models"]).input_kind == "magpie":
        return magpie_cache()
    return []


def model_params(config: dict[str, Any], model: str) -> str:
    """The model's hyperparameter overrides as sorted JSON (a ``params:`` value: editing it reruns)."""
    return json.dumps(config["matbench"]["model_params"].get(model, {}), sort_keys=True)


def custom_models(config: dict[str, Any]) -> str:
    return json.dumps(config["matbench"]["custom_models"], sort_keys=True)


def element_table(config: dict[str, Any], model: str) -> str:
    """The element embedding table of a composition network, as a hash-checked input."""
    table = config["matbench"]["model_params"].get(model, {}).get("element_table", "mat2vec")
    if table in ("mat2vec", "magpie"):
        return f"{CRABNET_DIR}/{table}.csv"
    return table


def element_table_pin(config: dict[str, Any], sources: dict[str, Any], model: str) -> str:
    """``--element-table-sha256 <pin>`` for the fetched tables; a user's own table has no pin."""
    table = config["matbench"]["model_params"].get(model, {}).get("element_table", "mat2vec")
    if table in ("mat2vec", "magpie"):
        return f"--element-table-sha256 {member_pin(sources, 'crabnet-2.0.8', f'{table}.csv')}"
    return ""


def user_prediction_file(config: dict[str, Any], model: str, task: str, fold: int | str) -> str:
    """A prediction file made outside crucible (``matbench.prediction_files``)."""
    root = config["matbench"]["prediction_files"][model]["dir"]
    return str(Path(root) / task / f"fold_{fold}.parquet")


def fold_predictions(model: str, task: str) -> list[str]:
    """The five fold prediction files of one model on one task, in fold order."""
    return [prediction_file(model, task, k) for k in FOLDS]


def model_predictions(config: dict[str, Any], model: str) -> list[str]:
    """Every fold prediction file of one model, task by task in Matbench order."""
    return [p for t in tasks(config) for p in fold_predictions(model, t)]


def published_table(config: dict[str, Any], repo: str | Path) -> str:
    path = Path(config["matbench"]["published"])
    return str(path if path.is_absolute() else Path(repo) / path)


def score_files(config: dict[str, Any]) -> list[str]:
    return [f"results/matbench/scores/{m}/{t}.json" for m in models(config) for t in tasks(config)]


def data_outputs(config: dict[str, Any]) -> list[str]:
    """What ``snakemake matbench_data`` builds: folds of every task and the task table."""
    return fold_files(config) + ["results/tables/matbench_tasks.csv"]


def final_outputs(config: dict[str, Any]) -> list[str]:
    """Every Matbench target of ``rule all``."""
    ts, ms = tasks(config), models(config)
    out = [
        "results/tables/matbench_tasks.csv",
        "results/tables/matbench_tasks.md",
        "results/tables/matbench_task_overlap.csv",
    ]
    out += fold_files(config)
    if ms:
        out += score_files(config)
        out += [f"results/matbench/{m}/results.json.gz" for m in ms]
        out += [f"results/matbench/{m}/info.json" for m in ms]
        out += [f"results/tables/matbench_leaderboard.{ext}" for ext in ("csv", "md", "tex")]
        out += ["results/tables/matbench_folds.csv"]
        out += [f"results/figures/matbench_scaled_error.{ext}" for ext in ("png", "pdf")]
        out += [f"results/figures/matbench/{m}/{t}.png" for m in ms for t in ts]
    return out
