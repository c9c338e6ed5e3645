"""Single points and batches of energies with a loaded potential (or a bare ASE calculator).

A non-finite energy or force is never passed on as a number: :func:`single_energy` and
:func:`single_point` raise :class:`~crucible.potentials.spec.NonFiniteError` (its message says
which quantity), and one that is no number at all (a string, a list, None)
:class:`~crucible.potentials.spec.PotentialOutputError` naming the potential.
:func:`evaluate_energies` goes through :func:`crucible.potentials.batch.evaluate` (energies,
forces and stresses of many structures; a potential's batched path where it has one).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from crucible.potentials.spec import (
    NonFiniteError,
    as_potential,
    non_finite_reason,
    read_energy,
    read_forces,
)


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
    """``(energy_eV, None)`` or ``(nan, reason)`` for each structure, in order: energies alone
    through :func:`crucible.potentials.batch.evaluate` (the model's batched pass where it has one;
    a failing batch is redone structure by structure, so each failure gets its own reason)."""
    from crucible.potentials.batch import evaluate

    out = evaluate(as_potential(potential), atoms_list, forces=False, errors="record")
    return [(e.energy, None) if e.ok else (math.nan, e.reason) for e in out]
