"""Batched against one-by-one force evaluation on MgO's third-order phonon supercells, CHGNet.

    nice -n 10 python benchmarks/batched_forces.py [--limit N] [--batch-size 8] [--threads 2] [--breakdown]

The structures: rock-salt MgO (a = 4.21 Å), its 2×2×2 conventional supercell (64 atoms) and
phono3py's third-order displacements of 0.03 Å (146 supercells), or, where phono3py is not
installed, 146 copies with ASE random displacements of 0.03 Å (seeded). ``--limit`` runs the
first N of them on both sides (a quick look; the figure to report is the whole set).

In one run, with the same loaded potential (chgnet-0.3.0 on the CPU, ``--threads`` torch
threads): one by one through CHGNet's ASE calculator (what a phonon script does: energy, forces,
stress and magnetic moments per call), then :func:`crucible.potentials.batch.evaluate` (forces,
``--batch-size`` structures per pass). ``--breakdown`` adds the batched path with one structure
per pass (forces only): what batching alone brings, apart from skipping the stress. Prints wall
and CPU seconds per structure and the ratios (one-by-one / batched), and the largest force
difference between the two. The machine's load average is printed before and after: on a shared
machine the wall ratio moves with it; the CPU ratio moves less.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np


def supercells(limit: int | None = None):
    """The displaced 64-atom supercells and how they were made."""
    from ase import Atoms
    from ase.build import bulk

    unit = bulk("MgO", "rocksalt", a=4.21, cubic=True)
    try:
        import phono3py
        from phonopy.structure.atoms import PhonopyAtoms
    except ImportError:
        rng = np.random.default_rng(0)
        base = unit.repeat((2, 2, 2))
        cells = []
        for _ in range(146):
            atoms = base.copy()
            vec = rng.normal(size=atoms.positions.shape)
            atoms.positions += 0.03 * vec / np.linalg.norm(vec, axis=1, keepdims=True)
            cells.append(atoms)
        how = "ASE random displacements of 0.03 Å (phono3py not installed)"
    else:
        cell = PhonopyAtoms(
            symbols=unit.get_chemical_symbols(), cell=unit.cell[:], scaled_positions=unit.get_scaled_positions()
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ph3 = phono3py.Phono3py(cell, supercell_matrix=np.diag([2, 2, 2]), primitive_matrix="auto")
        ph3.generate_displacements(distance=0.03)
        cells = [
            Atoms(c.symbols, cell=c.cell, scaled_positions=c.scaled_positions, pbc=True)
            for c in ph3.supercells_with_displacements
            if c is not None
        ]
        how = f"phono3py {phono3py.__version__} third-order displacements of 0.03 Å"
    return cells[:limit] if limit else cells, how


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="first N supercells only")
    parser.add_argument("--batch-size", type=int, default=None, help="structures per pass (default: evaluate's)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--breakdown", action="store_true", help="also the batched path one structure per pass")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")

    from crucible.potentials.batch import DEFAULT_BATCH_SIZE, evaluate
    from crucible.potentials.registry import load_potential

    cells, how = supercells(args.limit)
    size = args.batch_size or DEFAULT_BATCH_SIZE
    print(f"{len(cells)} supercells of {len(cells[0])} atoms: {how}")
    print(f"load average before: {os.getloadavg()}; {os.cpu_count()} CPUs; torch threads {args.threads}")
    potential = load_potential("chgnet-0.3.0", device="cpu", threads=args.threads)
    evaluate(potential, cells[:2], batch_size=2)  # warm-up: first-call allocations on neither side's clock

    def one_by_one():
        forces = []
        for atoms in cells:
            work = atoms.copy()
            work.calc = potential.calculator
            forces.append(work.get_forces())
        return forces

    rows = []
    single, wall_1, cpu_1 = timed(one_by_one)
    rows.append(("ASE calculator, one by one", wall_1, cpu_1))
    if args.breakdown:
        _, wall, cpu = timed(lambda: evaluate(potential, cells, batch_size=1))
        rows.append(("batched path, 1 per pass", wall, cpu))
    batched, wall_b, cpu_b = timed(lambda: evaluate(potential, cells, batch_size=size))
    rows.append((f"batched path, {size} per pass", wall_b, cpu_b))
    n = len(cells)
    for label, wall, cpu in rows:
        print(
            f"{label:30s} wall {wall / n:6.3f} s/cell  CPU {cpu / n:6.3f} s/cell  ratio wall {wall_1 / wall:5.2f}×  CPU {cpu_1 / cpu:5.2f}×"
        )
    assert all(b.ok for b in batched)
    diff = max(float(np.abs(b.forces - f).max()) for b, f in zip(batched, single))
    print(f"largest force difference, batched vs one by one: {diff:.2e} eV/Å")
    print(f"load average after: {os.getloadavg()}")
    print(f"RATIO one-by-one / batched (wall): {wall_1 / wall_b:.2f}×  (CPU): {cpu_1 / cpu_b:.2f}×")


if __name__ == "__main__":
    main()
