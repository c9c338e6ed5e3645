"""Structure relaxation with an interatomic potential: the one loop that catalysis and crystal
``mlip-search`` use.

``relax(atoms, calculator, optimizer="LBFGS", fmax=0.05, steps=999, cell_filter=None,
fixed=())`` relaxes a copy of ``atoms`` with an ASE optimizer (``LBFGS``, ``FIRE``, ``BFGS``,
...), optionally with the cell as degrees of freedom (``cell_filter="frechet"``: ASE's
``FrechetCellFilter``; ``"exp"``, ``"unit"``), with ``fixed`` atom indices held by a
``FixAtoms`` on top of the structure's own constraints. It returns a :class:`RelaxResult`: the
relaxed atoms, energy, optimizer steps (ASE's count: the initial force evaluation is step 0),
wall time (optimizer set-up, the steps and the final energy) and whether it converged.

A potential that returns a NaN or infinite energy, force (or stress, with a cell filter) stops
the relaxation at that step with ``status == "non-finite"`` and the reason, and the energy is
NaN: such a result is a failure, never a number to average. Exceptions the calculator raises
(an element it does not know) propagate; callers record them as they record other failures. So
does :class:`~crucible.potentials.spec.PotentialOutputError`, for an energy, force or stress
that is no number (a string, a list, None: :func:`crucible.potentials.spec.read_energy`).

For a finite potential the trajectory is the one ``optimizer.run(fmax, steps)`` gives: the loop
only reads the energy and forces that the optimizer has already computed at each step.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any, Sequence

from crucible.potentials.spec import (
    PotentialOutputError,
    as_potential,
    non_finite_reason,
    read_energy,
    read_forces,
    read_stress,
)

OPTIMIZERS = ("LBFGS", "FIRE", "BFGS", "BFGSLineSearch", "LBFGSLineSearch", "GPMin", "MDMin")
CELL_FILTERS = {"frechet": "FrechetCellFilter", "exp": "ExpCellFilter", "unit": "UnitCellFilter"}
OK = "ok"
NON_FINITE = "non-finite"


@dataclass
class RelaxResult:
    """What one relaxation gave; ``energy`` is NaN unless ``status == "ok"``."""

    atoms: Any  # the relaxed copy, calculator attached
    energy: float  # eV
    steps: int
    time: float  # s
    converged: bool
    status: str = OK  # "ok" | "non-finite"
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == OK


def _optimizer_class(name: str):
    import ase.optimize

    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer {name!r}: one of {', '.join(OPTIMIZERS)}")
    return getattr(ase.optimize, name)


def _cell_filter(name: str | None, atoms):
    if name is None:
        return atoms
    if name not in CELL_FILTERS:
        raise ValueError(f"cell filter {name!r}: one of {', '.join(CELL_FILTERS)} or None")
    import ase.filters

    return getattr(ase.filters, CELL_FILTERS[name])(atoms)


def _with_fixed(atoms, fixed: Sequence[int]):
    from ase.constraints import FixAtoms

    work = atoms.copy()
    if len(fixed):
        work.set_constraint([*work.constraints, FixAtoms(indices=[int(i) for i in fixed])])
    return work


def _non_finite(atoms, with_stress: bool, potential: str) -> str | None:
    """The reason the current energy/forces (already computed, so cached) are unusable, if any;
    raises :class:`~crucible.potentials.spec.PotentialOutputError` for one that is no number."""
    energy = read_energy(atoms, potential)
    forces = read_forces(atoms, potential)
    stress = read_stress(atoms, potential) if with_stress else None
    return non_finite_reason(energy, forces, stress)


def relax(
    atoms,
    calculator,
    optimizer: str = "LBFGS",
    fmax: float = 0.05,
    steps: int = 999,
    cell_filter: str | None = None,
    fixed: Sequence[int] = (),
    quiet: bool = False,
) -> RelaxResult:
    """Relax a copy of ``atoms`` with ``calculator`` (an ASE calculator or a ``Potential``).

    ``quiet`` silences the warnings optimizers and filters print on hard structures (random
    crystals in ``mlip-search``).
    """
    potential = as_potential(calculator)
    work = _with_fixed(atoms, fixed)
    work.calc = potential.calculator
    opt_cls = _optimizer_class(optimizer)
    with warnings.catch_warnings():
        if quiet:
            warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        opt = opt_cls(_cell_filter(cell_filter, work), logfile=None)
        converged, reason = False, None
        try:
            for step_converged in opt.irun(fmax=fmax, steps=steps):
                converged = step_converged
                reason = _non_finite(work, cell_filter is not None, potential.name)
                if reason:
                    break
        except Exception as exc:
            # forces of strings fail inside the optimizer first: say it is the potential's output
            try:
                _non_finite(work, cell_filter is not None, potential.name)
            except PotentialOutputError as bad:
                raise bad from exc
            except Exception:  # noqa: BLE001 - the calculator's own error is the one to raise
                pass
            raise
        energy = read_energy(work, potential.name)
        elapsed = time.perf_counter() - t0
    n_steps = int(opt.get_number_of_steps())
    if reason:
        return RelaxResult(
            work, float("nan"), n_steps, elapsed, False, NON_FINITE, f"{reason} at optimizer step {n_steps}"
        )
    return RelaxResult(work, energy, n_steps, elapsed, bool(converged))
