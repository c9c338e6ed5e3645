"""Many structures in, energies, forces (and stresses) out: :func:`evaluate`, the one way a job
evaluates a set of structures with a potential.

A potential whose model has a batched forward pass (``PotentialSpec.batched``: CHGNet's
``predict_structure`` on a list, SevenNet's collated graphs) evaluates ``batch_size`` structures
per pass; every other calculator (EMT, a user's ``potentials:`` entry, the hub models) goes one
structure at a time through its ASE calculator. Both give the ASE calculator's quantities and
units: total energy in eV, forces (natoms, 3) in eV/Å, stress as ASE's Voigt 6-vector
(xx, yy, zz, yz, xz, xy) in eV/Å³ with ASE's sign. A batched path agrees with its own calculator
to float32 noise (tests/test_potentials_batch.py states the tolerances).

Failures: a structure whose energy, forces or stress are not finite gets a :class:`Evaluation`
with its ``reason`` (the values as they came, never passed on silently); one that the batched
path reports as non-finite is redone alone through the calculator first, so a batch neighbour
cannot be blamed. A batch whose forward pass raises is redone one structure at a time, so the
exception is that of the structure that caused it: ``errors="raise"`` lets it propagate (with
the structure's index in a note), ``errors="record"`` keeps it as that structure's reason.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from crucible.potentials.spec import (
    Potential,
    PotentialOutputError,
    as_potential,
    non_finite_reason,
    read_energy,
    read_forces,
    read_stress,
    real_array,
    real_energy,
)

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

# Structures per forward pass when the caller does not say. CHGNet holds ~0.6 GB per 64-atom
# cell of a batch in its CPU forward+backward: 8 keeps a batch of phonon supercells in ~5 GB.
DEFAULT_BATCH_SIZE = 8
ERRORS = ("raise", "record")


@dataclass(frozen=True, eq=False)  # arrays inside: no elementwise == of two results
class Evaluation:
    """One structure's prediction: ``energy`` (eV, total), ``forces`` ((natoms, 3) eV/Å, None
    when not asked), ``stress`` (Voigt 6, eV/Å³, None when not asked or the calculator has
    none); ``reason`` says why the values are unusable (None: they are finite and usable)."""

    energy: float
    forces: np.ndarray | None = None
    stress: np.ndarray | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None


def _error_reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def _checked(name: str, n_atoms: int, raw: Mapping[str, Any], forces: bool, stress: bool) -> Evaluation:
    """``raw`` as an :class:`Evaluation`: real numbers of the expected shapes (else
    :class:`PotentialOutputError` naming the potential), non-finite values kept with a reason."""
    import numpy as np  # here: command declarations import the potentials package for its names

    energy = real_energy(raw["energy"], name)
    f = s = None
    if forces:
        f = real_array(raw["forces"], name, "forces").astype(np.float64, copy=False)
        if f.shape != (n_atoms, 3):
            raise PotentialOutputError(
                f"potential {name!r} returned forces of shape {f.shape}, expected ({n_atoms}, 3)"
            )
    if stress and raw.get("stress") is not None:
        s = real_array(raw["stress"], name, "stress").astype(np.float64, copy=False)
        if s.shape == (3, 3):
            from ase.stress import full_3x3_to_voigt_6_stress

            s = full_3x3_to_voigt_6_stress(s)
        if s.shape != (6,):
            raise PotentialOutputError(f"potential {name!r} returned a stress of shape {s.shape}, expected (6,)")
    return Evaluation(energy, f, s, non_finite_reason(energy, f, s))


def one(potential: Potential, atoms, *, forces: bool = True, stress: bool = False) -> Evaluation:
    """``atoms`` through the potential's ASE calculator (a copy: the input keeps its own
    calculator); raises what the calculator raises."""
    from ase.calculators.calculator import PropertyNotImplementedError

    work = atoms.copy()
    work.calc = potential.calculator  # some calculators (SevenNet) reject unknown elements right here
    raw: dict[str, Any] = {"energy": read_energy(work, potential.name)}
    if forces:
        raw["forces"] = read_forces(work, potential.name)
    if stress:
        try:
            raw["stress"] = read_stress(work, potential.name)
        except PropertyNotImplementedError:  # "stress if available": EMT on a molecule, many toys
            raw["stress"] = None
    return _checked(potential.name, len(atoms), raw, forces, stress)


def _one_or_reason(potential: Potential, atoms, index: int, forces: bool, stress: bool, errors: str) -> Evaluation:
    try:
        return one(potential, atoms, forces=forces, stress=stress)
    except Exception as exc:
        if errors == "raise":
            exc.add_note(f"{potential.name}: structure {index} of the batch ({atoms.get_chemical_formula()})")
            raise
        # a potential's own bad output already names it and what came back
        return Evaluation(
            math.nan, None, None, str(exc) if isinstance(exc, PotentialOutputError) else _error_reason(exc)
        )


def resolve(potential, *, device: str | None = None, threads: int | None = None, custom=None) -> Potential:
    """A :class:`Potential` from a registered or custom name (loaded on ``device``), a loaded
    potential, or a bare ASE calculator (one by one)."""
    if isinstance(potential, str):
        from crucible.potentials.registry import load_potential

        return load_potential(potential, device=device, threads=threads, custom=custom)
    return as_potential(potential)


def evaluate(
    potential,
    atoms_list: Sequence,
    *,
    device: str | None = None,
    batch_size: int | None = None,
    forces: bool = True,
    stress: bool = False,
    errors: str = "raise",
    threads: int | None = None,
    custom: Mapping[str, Any] | None = None,
) -> list[Evaluation]:
    """Energies (eV), forces (eV/Å) and, with ``stress=True``, stresses (eV/Å³, Voigt) of
    ``atoms_list``, in order, one :class:`Evaluation` per structure.

    ``potential``: a registered name (``chgnet-0.3.0``) or a user's (given in ``custom``, config
    ``potentials:``), loaded on ``device`` with ``threads`` torch threads; or a loaded
    :class:`~crucible.potentials.spec.Potential`, or a bare ASE calculator. ``batch_size``:
    structures per forward pass of a batched path (default :data:`DEFAULT_BATCH_SIZE`; the
    one-by-one path ignores it). ``forces=False`` asks for energies alone (a batched path then
    skips its backward pass). ``errors``: see the module's docstring.
    """
    if errors not in ERRORS:
        raise ValueError(f"errors={errors!r}: one of {ERRORS}")
    size = DEFAULT_BATCH_SIZE if batch_size is None else int(batch_size)
    if size < 1:
        raise ValueError(f"batch_size={batch_size}: at least 1")
    pot = resolve(potential, device=device, threads=threads, custom=custom)
    atoms_list = list(atoms_list)
    if pot.batched is None or len(atoms_list) < 2:
        return [_one_or_reason(pot, a, i, forces, stress, errors) for i, a in enumerate(atoms_list)]
    out: list[Evaluation] = []
    for start in range(0, len(atoms_list), size):
        chunk = atoms_list[start : start + size]
        try:
            raw = pot.batched(chunk, forces, stress)
            if len(raw) != len(chunk):
                raise PotentialOutputError(f"potential {pot.name!r}: {len(raw)} results for {len(chunk)} structures")
            done = [_checked(pot.name, len(a), r, forces, stress) for a, r in zip(chunk, raw)]
        except Exception as exc:  # pinned down below, structure by structure
            # said: the one-by-one path is the slow one, and a batched path that always fails is a bug
            log.warning("%s: batched pass failed (%s); one by one", pot.name, _error_reason(exc))
            done = [None] * len(chunk)
        for k, (atoms, ev) in enumerate(zip(chunk, done)):
            if ev is None or not ev.ok:
                ev = _one_or_reason(pot, atoms, start + k, forces, stress, errors)
            out.append(ev)
    return out
