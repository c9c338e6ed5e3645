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


class PotentialOutputError(CrucibleError):
    """A potential returned a quantity that is no real number (array): a string, a list, None, a bool."""


# Accepted as a number: a Python int or float, a numpy or torch scalar (or one-element array) of a
# real dtype; never a bool, a string ("1.0" went through float() as a number) or a container.
_REAL_KINDS = "iuf"


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _as_numpy(value: object):
    import numpy as np  # here: command declarations import this module for its names

    if type(value).__module__.split(".")[0] == "torch" and hasattr(value, "detach"):
        value = value.detach().cpu().numpy()  # a tensor on a GPU has no __array__ to the host
    if isinstance(value, (np.ndarray, np.generic)):
        return value
    if isinstance(value, (list, tuple)):
        try:
            return np.asarray(value)
        except (ValueError, TypeError):  # ragged: no array
            return None
    return None


def real_energy(value: object, potential: str, quantity: str = "energy") -> float:
    """``value`` as a float when it is a real number; else :class:`PotentialOutputError` naming
    ``potential`` and what came back. A NaN or inf passes: :func:`non_finite_reason` judges it."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    array = _as_numpy(value) if not isinstance(value, (list, tuple)) else None
    if array is not None and array.size == 1 and array.dtype.kind in _REAL_KINDS:
        return float(array.reshape(()))
    raise PotentialOutputError(
        f"potential {potential!r} returned its {quantity} as {type(value).__name__} {_shown(value)}, "
        "not a real number (int, float, numpy or torch scalar)"
    )


def real_array(value: object, potential: str, quantity: str):
    """``value`` as a float array when it is an array of real numbers (numpy, torch, nested
    lists); else :class:`PotentialOutputError` naming ``potential``."""
    array = _as_numpy(value)
    if array is None or array.dtype.kind not in _REAL_KINDS:
        kind = type(value).__name__ if array is None else f"{type(value).__name__} of {array.dtype}"
        raise PotentialOutputError(
            f"potential {potential!r} returned its {quantity} as {kind} {_shown(value)}, not an array of real numbers"
        )
    return array.astype(float, copy=False)


def read_energy(atoms, potential: str) -> float:
    """The potential energy (eV) of ``atoms`` from its calculator, checked by :func:`real_energy`:
    the one place the potentials package reads a potential's energy."""
    return real_energy(atoms.get_potential_energy(), potential)


def read_forces(atoms, potential: str):
    """The forces (eV/Å) of ``atoms``, checked by :func:`real_array`."""
    return real_array(atoms.get_forces(), potential, "forces")


def read_stress(atoms, potential: str):
    """The stress of ``atoms``, checked by :func:`real_array`."""
    return real_array(atoms.get_stress(), potential, "stress")


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


# Physical bounds of one prediction (docs/potentials.md): beyond them a number is a potential's
# defect, not a measurement. Binding energies stay under ~10 eV/atom and forces near equilibrium
# under ~1e2 eV/Å, so neither bound is near a real value; the scores keep such numbers (the
# leaderboards' code would) and the tables count them beside.
MAX_ABS_ENERGY_PER_ATOM = 1e3  # eV/atom
MAX_ABS_FORCE = 1e4  # eV/Å, any Cartesian component
COULOMB_EV_A = 14.399645  # e²/(4πε₀) in eV·Å


def implausible_reason(
    energy: float,
    forces=None,
    n_atoms: int = 1,
    energy_bound: float = MAX_ABS_ENERGY_PER_ATOM,
    force_bound: float = MAX_ABS_FORCE,
) -> str | None:
    """Why a finite prediction is physically implausible (``"implausible energy (|E| 5e+16
    eV/atom > 1000)"``, ...): |energy| / ``n_atoms`` over ``energy_bound`` (eV/atom) or a force
    component over ``force_bound`` (eV/Å); None when within them. Non-finite values are
    :func:`non_finite_reason`'s to judge and give None here."""
    import numpy as np

    per_atom = abs(energy) / max(int(n_atoms), 1)
    if math.isfinite(per_atom) and per_atom > energy_bound:
        return f"implausible energy (|E| {per_atom:.3g} eV/atom > {energy_bound:.3g})"
    if forces is not None:
        f = np.abs(np.asarray(forces, dtype=float))
        f = f[np.isfinite(f)]
        if f.size and float(f.max()) > force_bound:
            return f"implausible force (|F| {float(f.max()):.3g} eV/Å > {force_bound:.3g})"
    return None


def dimer_bounds(z: int, distance: float) -> tuple[float, float]:
    """(energy per atom in eV, force in eV/Å) bounds of a homonuclear dimer of atomic number
    ``z`` at ``distance`` Å: the general bounds, or the bare nuclei's Coulomb repulsion where it
    is larger (at 0.1 Å no electron screening can make a real curve exceed it), so that a steep
    but physical wall is not flagged."""
    e_pair = z * z * COULOMB_EV_A / distance
    return max(MAX_ABS_ENERGY_PER_ATOM, e_pair / 2), max(MAX_ABS_FORCE, e_pair / distance)


@dataclass(frozen=True, kw_only=True)
class PotentialSpec(Spec):
    """A registered potential: ``factory(device)`` -> ASE calculator, and its batched path if it has one."""

    kind: str  # "builtin" | "shipped" | "hub" | "custom"
    # a user's potential (config potentials:): its "pkg.mod:factory" and params, as configured
    class_path: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    # batched(calculator) -> the model's own batched forward pass, a
    # crucible.potentials.model_batches.BatchedPath; None: one structure at a time through the calculator
    batched: Callable[[object], Callable[..., list]] | None = None
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
    # the model's batched pass (crucible.potentials.batch.evaluate uses it), None when it has none
    batched: Callable[..., list] | None = None
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
