"""Time per LBFGS relaxation step of each potential on the catalysis demo (CPU, 1 thread).

    python benchmarks/bench_catalysis_step.py --models emt chgnet-0.3.0 --steps 20

Prints wall-clock and process-CPU seconds per step (the CPU time is the fairer number on a
shared machine), relaxing every adslab of the EMT demo set up to ``--steps`` steps.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    import torch
    from ase.optimize import LBFGS

    from crucible.catalysis import demo
    from crucible.catalysis.catbench_files import read_catbench_json
    from crucible.potentials.registry import get_calculator

    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=["emt", "chgnet-0.3.0"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--reactions", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        path = demo.write_catbench_json(demo.build_reactions(), Path(tmp) / "demo.json")
        reactions = read_catbench_json(path)[: args.reactions]
    for model in args.models:
        calc = get_calculator(model, device="cpu")
        warm = reactions[0].by_role("adslab")[0].atoms.copy()
        warm.calc = calc
        warm.get_potential_energy()  # first call pays one-off set-up
        steps = 0
        wall0, cpu0 = time.perf_counter(), time.process_time()
        for r in reactions:
            atoms = r.by_role("adslab")[0].atoms.copy()
            atoms.calc = calc
            opt = LBFGS(atoms, logfile=None)
            opt.run(fmax=0.0, steps=args.steps)  # fmax 0: always the full step count
            steps += opt.get_number_of_steps()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        print(f"{model}: {steps} steps, {1000 * wall / steps:.1f} ms wall/step, {1000 * cpu / steps:.1f} ms CPU/step")


if __name__ == "__main__":
    main()
