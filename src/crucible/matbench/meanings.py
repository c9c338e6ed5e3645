"""What each name of a Matbench run means, for the identity of its jobs (crucible.identity.records).

A model name stands for its class (registered, a user's class, a variant of either, or
predictions made elsewhere) and its params; its code is its registry entry or the user's class,
so that an edit of one model's code reruns that model's jobs alone. The settings and every user
dataset are names too.
"""

from __future__ import annotations

import json
from typing import Any

from crucible.dag.config import section
from crucible.identity.name_book import Meaning, registered, settings

# The rules of a run that summarize every model it uses (crucible.identity.name_book.Meaning.summarized_by).
SUMMARIES = ("build_matbench_leaderboard", "tabulate_user_dataset")


def _section(config: dict[str, Any]) -> dict[str, Any]:
    return section(config, "matbench")


def model_meaning(config: dict[str, Any], model: str) -> dict[str, Any]:
    """What a model name stands for: its class (registered, a user's class or a variant, or
    predictions made elsewhere) and its params."""
    mb = _section(config)
    if model in mb["prediction_files"]:
        made = {"prediction_files": mb["prediction_files"][model]}
    elif model in mb["custom_models"]:
        made = {"custom": mb["custom_models"][model]}
    else:
        made = registered(model)
    return {**made, "params": mb["model_params"].get(model, {})}


MODEL_REGISTRY = "crucible.models.registry"


def model_code(config: dict[str, Any], model: str) -> tuple[Any, ...]:
    """The code a model name runs beyond the predict command: its registry entry (a variant's, its
    base model's), or the user's class (crucible.identity.job_code roots); none for imported files."""
    from crucible.identity.job_code import class_root, entry_root

    mb = _section(config)
    if model in mb["prediction_files"]:
        return ()
    entry = mb["custom_models"].get(model)
    if entry is None:
        return (entry_root(MODEL_REGISTRY, model),)
    if "model" in entry:
        return (entry_root(MODEL_REGISTRY, entry["model"]),)
    return (class_root(entry["class"]),)


def names(config: dict[str, Any]) -> dict[str, Meaning]:
    """Every name a Matbench run is made of, with its meaning (see crucible.identity.name_book.NameBook)."""
    if "matbench" not in config:
        return {}
    mb = _section(config)
    out = {
        "matbench/settings": Meaning(
            settings(
                mb,
                exclude=("run_name", "model_params", "custom_models", "prediction_files", "user_datasets", "published"),
            ),
            "matbench",
            "run other settings in another --directory (a results folder holds one set of Matbench settings)",
        )
    }
    for model in mb["models"]:
        out[f"matbench/model/{model}"] = Meaning(
            model_meaning(config, model),
            f"matbench.models ({model})",
            rename_advice(config, model),
            code=model_code(config, model),
            summarized_by=SUMMARIES,
            declared=tuple(mb["custom_models"].get(model, {}).get("files", [])),
        )
    from crucible.matbench.user_datasets import check_spec

    for name, spec in sorted(mb["user_datasets"].items()):
        out[f"matbench/dataset/{name}"] = Meaning(
            check_spec(name, spec),
            f"matbench.user_datasets.{name}",
            "give the dataset a name of its own under matbench.user_datasets",
        )
    return out


def rename_advice(config: dict[str, Any], model: str) -> str:
    """How to run other params of ``model`` beside it, as a config entry that is accepted: a
    variant of a registered model or of a variant's base (``model:``), the same class under a new
    name for a user's class (``class:``), another name for imported predictions."""
    mb = _section(config)
    entry = mb["custom_models"].get(model)
    if model in mb["prediction_files"]:
        return f"give the other predictions a name of their own under matbench.prediction_files (not {model!r})"
    if entry is None or "model" in entry:
        base = model if entry is None else entry["model"]
        made = f"{{model: {base}, params: {{...}}}}"
    else:
        kept = {k: v for k, v in sorted(entry.items()) if k != "params"}
        made = "{" + ", ".join(f"{k}: {json.dumps(v)}" for k, v in kept.items()) + ", params: {...}}"
    return f"give it a name of its own: matbench.custom_models: {{{model}-2: {made}}}, and list {model}-2 in matbench.models"
