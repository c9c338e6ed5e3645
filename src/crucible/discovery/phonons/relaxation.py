"""The benchmark's two-stage relaxation: FIRE on a Frechet cell filter, first with the crystal's
symmetry held (ASE's FixSymmetry), then free; a second stage that lowers the symmetry is undone
(the first stage's structure is kept), as the benchmark does. Non-convergence, a lowered space
group or a non-finite force is a failure with its reason."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from crucible.discovery.phonons.protocol import NO_TILT_MASK, PROTOCOL
from crucible.potentials.spec import read_energy, read_forces, read_stress


def space_group(atoms: Any, symprec: float = PROTOCOL["symprec"]) -> int | None:
    import spglib

    data = spglib.get_symmetry_dataset(
        (np.asarray(atoms.cell), atoms.get_scaled_positions(), atoms.numbers), symprec=symprec
    )
    return None if data is None else int(data.number)


def _stage(atoms: Any, max_steps: int, fmax: float) -> tuple[int, bool, str | None]:
    """(steps, converged, non-finite reason) of one FIRE run on the cell filter."""
    from ase.filters import FrechetCellFilter
    from ase.optimize import FIRE

    opt = FIRE(FrechetCellFilter(atoms, mask=list(NO_TILT_MASK)), logfile=None)
    converged = False
    for step_converged in opt.irun(fmax=fmax, steps=max_steps):
        converged = step_converged
        forces = read_forces(atoms, "potential")
        stress = read_stress(atoms, "potential")
        if not (np.isfinite(forces).all() and np.isfinite(stress).all()):
            return (
                int(opt.get_number_of_steps()),
                False,
                f"non-finite force or stress at step {opt.get_number_of_steps()}",
            )
    return int(opt.get_number_of_steps()), bool(converged), None


def relax(atoms: Any, calculator: Any, max_steps: int = PROTOCOL["max_steps"], fmax: float = PROTOCOL["fmax"]) -> dict:
    """The relaxed structure and the record of how it got there (a dict for the relaxation file)."""
    from ase.constraints import FixSymmetry

    symprec = PROTOCOL["symprec"]
    work = atoms.copy()
    work.info = {}
    work.calc = calculator
    initial = space_group(work, symprec)
    record: dict[str, Any] = {"initial_spacegroup": initial, "failure": None}
    work.set_constraint(FixSymmetry(work, symprec=symprec))
    steps1, conv1, bad = _stage(work, max_steps, fmax)
    record.update(stage1_steps=steps1, stage1_converged=conv1)
    stage1 = work.copy()
    stage1_spg = space_group(work, symprec)
    steps2, conv2 = 0, False
    if bad is None:
        work.set_constraint()
        steps2, conv2, bad = _stage(work, max_steps, fmax)
    final = work
    redirected = False
    if bad is None:
        final_spg = space_group(work, symprec)
        if final_spg != stage1_spg:
            final, final_spg, redirected = stage1, stage1_spg, True
    else:
        final_spg = None
    energy = float("nan")
    if bad is None:
        final.calc = calculator
        energy = read_energy(final, "potential")
        if not math.isfinite(energy):
            bad = "non-finite energy of the relaxed structure"
    record.update(
        stage2_steps=steps2,
        stage2_converged=conv2,
        redirected_to_stage1=redirected,
        final_spacegroup=final_spg,
        energy=energy if math.isfinite(energy) else None,
        max_force=float(np.abs(read_forces(final, "potential")).max()) if bad is None else None,
    )
    if bad is not None:
        record["failure"] = f"relaxation: {bad}"
    elif not (conv1 and (conv2 or redirected)):
        record["failure"] = (
            f"relaxation not converged to {fmax} eV/Å in {max_steps} steps "
            f"(stage 1: {steps1} steps{'' if conv1 else ', not converged'}; stage 2: {steps2} steps"
            f"{'' if conv2 else ', not converged'})"
        )
    elif final_spg != initial:
        record["failure"] = f"symmetry broken: space group {initial} -> {final_spg}"
    record["structure"] = {
        "numbers": [int(z) for z in final.numbers],
        "cell": np.asarray(final.cell, dtype=float).tolist(),
        "positions": np.asarray(final.positions, dtype=float).tolist(),
    }
    return record


def atoms_of(record: dict) -> Any:
    from ase import Atoms

    s = record["structure"]
    return Atoms(numbers=s["numbers"], cell=s["cell"], positions=s["positions"], pbc=True)
