"""Single points and batches of energies with a loaded potential (or a bare ASE calculator).

A non-finite energy or force is never passed on as a number: :func:`single_energy` and
:func:`single_point` raise :class:`~crucible.potentials.spec.NonFiniteError` (its message says
which quantity), and one that is no number at all (a string, a list, None)
:class:`~crucible.potentials.spec.PotentialOutputError` naming the potential. :func:`evaluate_energies` uses a potential's batched path when it has one and
falls back to one structure at a time when a batch fails, so that one bad structure is pinned
down instead of sinking the batch.
"""

from __future__ import annotations

import logging
import math
from typing import Sequence

import numpy as np

from crucible.potentials.spec import (
    NonFiniteError,
    PotentialOutputError,
    as_potential,
    non_finite_reason,
    read_energy,
    read_forces,
    real_energy,
)

log = logging.getLogger(__name__)


def _error_reason(exc: BaseException) -> str:
    text = str(exc).strip().replace("\n", " ")
    if len(text) > 300:
        text = text[:300] + "..."
    return f"{type(exc).__name__}: {text}"


def single_energy(calc, atoms) -> float:
    """Total energy (eV) of ``atoms`` with ``calc`` (a ``Potential`` or a bare ASE calculator);
    raises whatever the calculator raises, and :class:`NonFiniteError` for a NaN/inf energy."""
    potential = as_potential(calc)
    atoms = atoms.copy()
    atoms.calc = potential.calculator  # some calculators (SevenNet) reject unknown elements right here
    energy = read_energy(atoms, potential.name)
    reason = non_finite_reason(energy)
    if reason:
        raise NonFiniteError(reason)
    return energy


def single_point(calc, atoms) -> tuple[float, np.ndarray]:
    """Total energy (eV) and forces (eV/Å) of ``atoms``; raises like :func:`single_energy`, also
    for non-finite forces. Forces of a shape other than (natoms, 3) are returned as they are."""
    potential = as_potential(calc)
    atoms = atoms.copy()
    atoms.calc = potential.calculator
    energy = read_energy(atoms, potential.name)
    forces = read_forces(atoms, potential.name)
    reason = non_finite_reason(energy, forces if forces.shape == (len(atoms), 3) else None)
    if reason:
        raise NonFiniteError(reason)
    return energy, forces


def evaluate_energies(potential, atoms_list: Sequence) -> list[tuple[float, str | None]]:
    """``(energy_eV, None)`` or ``(nan, reason)`` for each structure, in order.

    Uses the calculator's batched path when it has one; if the batch raises or returns a
    non-finite value, every structure is redone alone so each failure gets its own reason.
    """
    potential = as_potential(potential)
    batch = potential.batch_energies
    if batch is not None and len(atoms_list) > 1:
        try:
            energies = [real_energy(e, potential.name) for e in batch(list(atoms_list))]
            if len(energies) == len(atoms_list) and all(math.isfinite(e) for e in energies):
                return [(e, None) for e in energies]
        except Exception as exc:  # pinpointed below, structure by structure
            log.debug("batched evaluation failed (%s); retrying one by one", _error_reason(exc))
    out: list[tuple[float, str | None]] = []
    for atoms in atoms_list:
        try:
            out.append((single_energy(potential, atoms), None))
        except (NonFiniteError, PotentialOutputError) as exc:
            out.append((math.nan, str(exc)))
        except Exception as exc:
            out.append((math.nan, _error_reason(exc)))
    return out
