"""What a potential is: the :class:`PotentialSpec` a registry entry or a user's entry is, the
loaded :class:`Potential`, and the errors a potential raises.

The registered specs are in :mod:`crucible.potentials.registry`, a user's are built by
:mod:`crucible.potentials.custom`; both import this module and nothing of each other's but the
one lookup (:func:`crucible.potentials.registry.potential_spec`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from crucible.core.errors import ConfigError, CrucibleError
from crucible.core.registry import Spec


class WeightsUnavailableError(ConfigError):
    """A registered potential whose weights are not on this machine (and we do not download)."""


class NonFiniteError(CrucibleError):
    """A potential returned a NaN or infinite energy, force or stress."""


def non_finite_reason(energy: float, forces=None, stress=None) -> str | None:
    """Why a prediction is unusable (``"non-finite energy (nan)"``, ...), or None when it is finite."""
    if not math.isfinite(energy):
        return f"non-finite energy ({energy})"
    import numpy as np  # here: command declarations import this module for its names

    for name, values in (("forces", forces), ("stress", stress)):
        if values is not None:
            bad = ~np.isfinite(np.asarray(values, dtype=float))
            if bad.any():
                return f"non-finite {name} ({int(bad.sum())} of {bad.size} components)"
    return None


@dataclass(frozen=True, kw_only=True)
class PotentialSpec(Spec):
    """A registered potential: ``factory(device)`` -> ASE calculator, and its batched path if it has one."""

    kind: str  # "builtin" | "shipped" | "hub" | "custom"
    # a user's potential (config potentials:): its "pkg.mod:factory" and params, as configured
    class_path: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    # batch(calculator) -> (list of atoms -> total energies in eV)
    batch: Callable[[object], Callable[[list], list[float]]] | None = None
    inputs: tuple[str, ...] = ("structure",)
    # one job runs one potential over one input set: the Delta set (EOS), a frames file (s2ef),
    # a chunk of reactions (catalysis), a generator's items (crystal mlip-search)
    job_unit: str = "dataset"
    # elements(calculator) -> the element symbols the loaded model has parameters for; None when
    # the model does not say (every element is then tried, and an error there counts as a failure)
    elements: Callable[[object], Sequence[str]] | None = None
    # weights() -> the local file or folder the factory loads by path (a hub model's), found the
    # way the factory finds it, without importing its package: hashed into its jobs' identity
    weights: Callable[[], object] | None = None


@dataclass(frozen=True)
class Potential:
    """A loaded potential: the ASE calculator and what ran it."""

    name: str
    device: str
    calculator: object
    batch_energies: Callable[[list], list[float]] | None = None
    # the element symbols the model has parameters for; None when it does not say
    elements: frozenset[str] | None = field(default=None, compare=False)
    # what ran (:func:`provenance`): recorded beside every result the potential produced
    provenance: Mapping[str, Any] = field(default_factory=dict, compare=False)


def as_potential(calc: object) -> Potential:
    """A :class:`Potential` as is; a bare ASE calculator wrapped (named after its class, CPU)."""
    if isinstance(calc, Potential):
        return calc
    return Potential(name=type(calc).__name__, device="cpu", calculator=calc)


def resolve_device(device: str | None = None) -> str:
    """``device`` if given, else ``"cuda"`` when torch sees a GPU, else ``"cpu"``."""
    if device:
        return device
    try:
        import torch
    except ImportError:  # emt needs no torch
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"
