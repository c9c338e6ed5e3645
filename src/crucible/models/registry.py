"""Names used in ``config.yaml`` (``matbench: models:``) mapped to estimator factories.

Every model follows scikit-learn's estimator protocol: ``fit(X, y)``, ``predict(X)``,
``predict_proba(X)`` for classifiers, ``get_params()``. What ``X`` is depends on the model's
``input_kind``:

- ``"magpie"``: a DataFrame of the 132 Magpie features (from the shared feature cache);
- ``"composition"``: a pandas Series of formula strings;
- ``"scm-magpie"``: the Magpie features plus, on structure tasks, a column of each row's Sine
  Coulomb matrix eigenvalues (from the per-structure cache);
- ``"mlip-embedding"``: a pretrained potential's per-structure embedding (from its cache).

The registry is a :class:`crucible.core.registry.Registry` of :class:`ModelSpec`: ``device``
(``"gpu"``: the GPU rule), ``inputs``, the job granularity, and ``runs_torch`` for networks.

``inputs`` says what a model reads: ``("formula",)`` formulas only; ``("formula", "structure")``
the structure where the task gives one, the formula on composition tasks; ``("structure",)``
structures only (see :mod:`crucible.matbench.structure_inputs`).

A model that early-stops declares ``uses_validation=True`` and receives the fold's inner
validation rows as ``fit(X, y, X_val=..., y_val=...)``. A model whose estimator has
``save(directory)`` gets its trained state written under ``results/`` after fitting.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from dataclasses import dataclass, field
from typing import Any

from crucible.core.errors import ConfigError
from crucible.core.registry import Registry, Spec

TASK_TYPES = ("regression", "classification")
INPUT_KINDS = ("magpie", "composition", "scm-magpie", "mlip-embedding")


@dataclass(frozen=True, kw_only=True)
class ModelSpec(Spec):
    """A Matbench model. ``factory(task_type, random_state, **params)`` -> unfitted estimator."""

    input_kind: str
    defaults: dict[str, Any] = field(default_factory=dict)
    uses_validation: bool = False
    inputs: tuple[str, ...] = ("formula",)
    job_unit: str = "fold"
    # Job granularity. One job per fold, except on tasks of at most ``task_jobs_up_to`` rows: there
    # one job fits the five folds in turn, because each fit costs about as much as a job's ~1.5 s
    # of interpreter and import start-up. 0: per fold everywhere; math.inf: per task everywhere.
    task_jobs_up_to: float = 0
    # A network: building it first asks torch for deterministic kernels (crucible.core.torch_setup).
    runs_torch: bool = False

    def granularity(self, n_rows: float | None = None) -> str:
        """'task' (one job for the five folds) or 'fold' (one job each) on a task of n_rows."""
        return "task" if n_rows is not None and n_rows <= self.task_jobs_up_to else self.job_unit

    def build(self, task_type: str, random_state: int, params: dict[str, Any] | None = None) -> Any:
        if task_type not in TASK_TYPES:
            raise ConfigError(f"model {self.name!r}: unknown task type {task_type!r}")
        if self.runs_torch:
            from crucible.core import torch_setup

            # Threads come from OMP_NUM_THREADS, which the predict command sets before torch loads.
            torch_setup.configure_torch()
        merged = {**self.defaults, **(params or {})}
        return self.factory(task_type, random_state, **merged)


# Where each built-in model registers itself. Only the module of the model asked for is
# imported: a Dummy job must not pay for importing torch (every fold is its own process).
_BUILTINS = {
    "dummy": "crucible.models.baselines",
    "rf-magpie": "crucible.models.trees",
    "gbm-magpie": "crucible.models.trees",
    "comp-transformer": "crucible.models.networks",  # torch only when a job builds it
    "rf-scm-magpie": "crucible.models.structure_models",
    "mlip-embed": "crucible.models.structure_models",
}
MODELS: Registry[ModelSpec] = Registry("model", lazy=_BUILTINS)


def builtin_models() -> list[str]:
    return MODELS.names()


def register(spec: ModelSpec) -> ModelSpec:
    if spec.input_kind not in INPUT_KINDS:
        raise ValueError(f"model {spec.name!r}: input_kind must be one of {', '.join(INPUT_KINDS)}")
    return MODELS.register(spec)


def variant_spec(name: str, entry: dict[str, Any]) -> ModelSpec:
    """A registered model under a name of its own with other default params
    (``custom_models: {gbm-quick: {model: gbm-magpie, params: {max_iter: 3}}}``): its results
    live under its own name, beside the registered model's."""
    base_name = entry["model"]
    if base_name not in MODELS:
        raise MODELS.unknown(base_name, [])
    base = MODELS[base_name]
    return dataclasses.replace(
        base,
        name=name,
        description=f"{base_name} with {entry.get('params', {})}",
        defaults={**base.defaults, **entry.get("params", {})},
    )


def custom_spec(name: str, entry: dict[str, Any]) -> ModelSpec:
    """A user's estimator given by class path ``"package.module:Class"`` in config, or a variant
    of a registered model (``model: <name>``, see :func:`variant_spec`)."""
    if ("class" in entry) == ("model" in entry):
        raise ConfigError(f"custom model {name!r}: give either class (a user's estimator) or model (a registered one)")
    if "model" in entry:
        return variant_spec(name, entry)
    module_name, _, class_name = entry["class"].partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"custom model {name!r}: cannot import {entry['class']!r}: {exc}") from exc

    # Positional-only, so that a user's params may themselves hold a random_state.
    def factory(task_type: str, random_state: int, /, **params: Any) -> Any:
        from crucible.models.seeds import seed_estimator

        # Unseeded estimators would give different numbers on every run: fix the seed unless
        # the config's params set random_state themselves.
        return seed_estimator(cls(**params), random_state)

    return ModelSpec(
        name=name,
        factory=factory,
        input_kind=entry.get("input", "composition"),
        description=f"user model {entry['class']}",
        defaults=dict(entry.get("params", {})),
        # A user's network gets deterministic kernels like ours: its module brought torch in.
        runs_torch="torch" in sys.modules,
    )


def get_spec(name: str, custom_models: dict[str, Any] | None = None) -> ModelSpec:
    custom_models = custom_models or {}
    if name in custom_models:
        return custom_spec(name, custom_models[name])
    if name not in MODELS:
        raise MODELS.unknown(name, sorted(custom_models))
    return MODELS[name]
