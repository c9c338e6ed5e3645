"""Batched against one-by-one force evaluation on MgO's third-order phonon supercells, CHGNet.

    nice -n 10 python benchmarks/batched_forces.py [--limit N] [--batch-size 8] [--threads 2] [--breakdown] [--per-pass]

The structures: rock-salt MgO (a = 4.21 Å), its 2×2×2 conventional supercell (64 atoms) and
phono3py's third-order displacements of 0.03 Å (146 supercells), or, where phono3py is not
installed, 146 copies with ASE random displacements of 0.03 Å (seeded). ``--limit`` runs the
first N of them on every side (a quick look; the figure to report is the whole set).

In one run, each side in a fresh process of its own (the model loaded before the clock starts,
``--threads`` torch threads, chgnet-0.3.0 on the CPU):

- ``script``: one by one through CHGNet's ASE calculator with torch as it comes (what a phonon
  script does: energy, forces, stress and magnetic moments per call);
- ``one by one``: the same loop after :func:`crucible.potentials.registry.load_potential`, under
  crucible's torch settings (deterministic kernels, subnormal floats flushed: see
  :func:`crucible.core.torch_setup.configure_torch`);
- ``batched``: :func:`crucible.potentials.batch.evaluate` (forces only; ``--batch-size``
  structures per call, which CHGNet's path splits into CPU passes of at most
  ``CHGNET_CPU_ATOMS_PER_PASS`` atoms).

``--breakdown`` adds the batched path with one structure per call. ``--per-pass`` adds the batched
path with 1, 2, 4, 8 and 16 of the 64-atom cells in each CPU forward pass (on the first 32 cells):
the per-structure cost that sets ``CHGNET_CPU_ATOMS_PER_PASS``. Prints wall and CPU seconds per
structure, the ratios against the script and against one by one under the same settings, and the
largest force difference between the sides. The machine's load average is printed before and
after: on a shared machine the wall ratio moves with it; the CPU ratio moves less.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

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


def run_side(side: str, limit: int | None, batch_size: int, threads: int, atoms_per_pass: int, out: Path) -> None:
    """One side, in this (fresh) process: its forces to ``out`` (.npy), its clocks to stdout (JSON)."""
    cells, _ = supercells(limit)
    if side == "script":
        import torch

        from crucible.potentials.registry import potential_spec

        torch.set_num_threads(threads)
        calc = potential_spec("chgnet-0.3.0").build("cpu")
    else:
        from crucible.core import torch_setup
        from crucible.potentials import model_batches
        from crucible.potentials.batch import evaluate
        from crucible.potentials.registry import load_potential

        torch_setup.allow_flush_denormal()  # as in a `crucible` command's process (a DAG job)
        model_batches.CHGNET_CPU_ATOMS_PER_PASS = atoms_per_pass
        potential = load_potential("chgnet-0.3.0", device="cpu", threads=threads)
        calc = potential.calculator

    def one_by_one():
        forces = []
        for atoms in cells:
            work = atoms.copy()
            work.calc = calc
            forces.append(work.get_forces())
        return forces

    # first-call allocations on nobody's clock
    if side in ("script", "one-by-one"):
        run = one_by_one
        warm = cells[0].copy()
        warm.calc = calc
        warm.get_forces()
    else:

        def run():
            done = evaluate(potential, cells, batch_size=batch_size)
            assert all(ev.ok for ev in done), [ev.reason for ev in done if not ev.ok][:3]
            return [ev.forces for ev in done]

        evaluate(potential, cells[:2], batch_size=2)
    forces, wall, cpu = timed(run)
    np.save(out, np.asarray(forces))
    print(json.dumps({"wall": wall, "cpu": cpu, "n": len(cells)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="first N supercells only")
    parser.add_argument(
        "--batch-size", type=int, default=None, help="structures per evaluate call (default: evaluate's)"
    )
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--breakdown", action="store_true", help="also the batched path one structure per call")
    parser.add_argument("--per-pass", action="store_true", help="also 1 to 16 cells per CPU forward pass")
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--atoms-per-pass", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")

    from crucible.potentials.batch import DEFAULT_BATCH_SIZE
    from crucible.potentials.model_batches import CHGNET_CPU_ATOMS_PER_PASS

    size = args.batch_size or DEFAULT_BATCH_SIZE
    if args.side:
        run_side(args.side, args.limit, size, args.threads, args.atoms_per_pass or CHGNET_CPU_ATOMS_PER_PASS, args.out)
        return

    cells, how = supercells(args.limit)
    n_atoms = len(cells[0])
    print(f"{len(cells)} supercells of {n_atoms} atoms: {how}")
    print(f"load average before: {os.getloadavg()}; {os.cpu_count()} CPUs; torch threads {args.threads}")
    sides = [
        ("script", "ASE calculator, torch as it comes", size, CHGNET_CPU_ATOMS_PER_PASS, args.limit),
        ("one-by-one", "ASE calculator, crucible's torch", size, CHGNET_CPU_ATOMS_PER_PASS, args.limit),
    ]
    if args.breakdown:
        sides.append(("batched", "evaluate, 1 per call", 1, CHGNET_CPU_ATOMS_PER_PASS, args.limit))
    per_pass_label = f"{max(1, CHGNET_CPU_ATOMS_PER_PASS // n_atoms)} per CPU pass"
    sides.append(
        ("batched", f"evaluate, {size} per call ({per_pass_label})", size, CHGNET_CPU_ATOMS_PER_PASS, args.limit)
    )
    if args.per_pass:
        sweep = min(args.limit or len(cells), 32)
        for k in (1, 2, 4, 8, 16):
            sides.append(("batched", f"evaluate, {k} per CPU pass, {sweep} cells", 16, k * n_atoms, sweep))

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, (side, label, batch, atoms_per_pass, limit) in enumerate(sides):
            out = Path(tmp) / f"{k}.npy"
            cmd = [sys.executable, __file__, "--side", side, "--batch-size", str(batch), "--threads", str(args.threads)]
            cmd += ["--atoms-per-pass", str(atoms_per_pass), "--out", str(out)]
            cmd += ["--limit", str(limit)] if limit else []
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise SystemExit(f"side {label!r} failed:\n{proc.stderr[-3000:]}")
            clock = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append((label, clock, np.load(out)))
    script, ours = rows[0], rows[1]
    for label, clock, _ in rows:
        n = clock["n"]
        same = [r for r in rows[:2] if r[1]["n"] == n]
        ratio = "  ".join(
            f"vs {name} wall {ref[1]['wall'] / clock['wall']:5.2f}× CPU {ref[1]['cpu'] / clock['cpu']:5.2f}×"
            for name, ref in zip(("script", "one by one"), same)
        )
        print(f"{label:48s} wall {clock['wall'] / n:6.3f} s/cell  CPU {clock['cpu'] / n:6.3f} s/cell  {ratio}")
    reference = script[2]
    diff = max(float(np.abs(f[: len(reference)] - reference[: len(f)]).max()) for _, _, f in rows[1:])
    print(f"largest force difference from the script's: {diff:.2e} eV/Å")
    print(f"load average after: {os.getloadavg()}")
    batched = next(r for r in rows if r[0].startswith(f"evaluate, {size} per call"))
    for name, ref in (("the script", script), ("one by one, crucible's torch", ours)):
        print(
            f"RATIO {name} / batched: wall {ref[1]['wall'] / batched[1]['wall']:.2f}×"
            f"  CPU {ref[1]['cpu'] / batched[1]['cpu']:.2f}×"
        )


if __name__ == "__main__":
    main()
