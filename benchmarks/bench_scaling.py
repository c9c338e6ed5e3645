"""How each stage's cost grows: time and peak memory at a few sizes, fitted exponent, extrapolation.

    .venv/bin/python benchmarks/bench_scaling.py --resources DIR [--quick]

DIR holds the composition mirror's CSVs where the fetch stage extracts them (any crucible working
directory after a fetch; ``crucible.sources.pinned_files.resource_path`` of role ``matbench/mirror/<task>``). Each point runs in its own process (one thread), so peak memory is that process's
maximum RSS (interpreter and imports included). Time is the process's CPU time of the stage's
work (imports and data loading excluded), with its wall time beside it: with one thread the two
agree on an idle core, and CPU time stays meaningful on a shared machine, where wall time does not. Rows are drawn
(seeded) from mp_e_form, the largest task.

Stages: Magpie featurizer (formulas), dummy / gbm-magpie / rf-magpie fit+predict of one fold
(training rows; test = a quarter of that), EOS with EMT (elements). The exponent b of
time = a * size^b is a least-squares fit in log-log space; the last column extrapolates to the
paper configuration (config/paper.yaml: 13 tasks x 5 folds, measured row counts) as job-seconds
and as wall time on a 64-core SLURM allocation (one thread per fold job: wall = max(sum / 64,
largest job)).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from crucible.matbench.tasks import N_SAMPLES

REPO = Path(__file__).resolve().parents[1]

DISTINCT_FORMULAS = 126_308  # over all 13 tasks (the cache)
EOS_ELEMENTS = 71

SIZES = {
    "featurize": [1_000, 10_000, 100_000],
    "dummy": [1_000, 10_000, 100_000],
    "gbm-magpie": [4_000, 16_000, 64_000],  # below ~4k rows the 300 iterations cost a fixed ~3 s
    "rf-magpie": [500, 1_000, 2_000],
    "eos-emt": [1, 2, 4],
}
QUICK = {
    "gbm-magpie": [4_000, 16_000, 32_000],
    "rf-magpie": [250, 500, 1_000],
    "featurize": [1_000, 10_000, 30_000],
    "dummy": [1_000, 10_000, 30_000],
    "eos-emt": [1, 2, 3],
}


def measure(stage: str, size: int, resources: Path) -> dict[str, float]:
    """Runs in a child process: one point."""
    import numpy as np
    import pandas as pd

    if stage == "eos-emt":
        from ase.calculators.emt import EMT

        from crucible.mlip.eos import run_eos

        elements = ["Cu", "Al", "Ni", "Ag", "Au", "Pd", "Pt"][:size]
        t0, w0 = time.process_time(), time.perf_counter()
        run_eos(EMT(), elements, 7, (0.94, 1.06), model="emt", progress=False)
        return {"seconds": time.process_time() - t0, "wall_seconds": time.perf_counter() - w0}
    from crucible.matbench.tasks import mirror_role
    from crucible.sources.pinned_files import resource_path

    df = pd.read_csv(resources / resource_path(mirror_role("matbench_mp_e_form")))
    rng = np.random.default_rng(0)
    from crucible.features import magpie_features

    if stage == "featurize":
        formulas = df["formula"].drop_duplicates().sample(n=size, random_state=0).tolist()
        t0, w0 = time.process_time(), time.perf_counter()
        magpie_features(formulas)
        return {"seconds": time.process_time() - t0, "wall_seconds": time.perf_counter() - w0}
    n_test = size // 4
    take = rng.choice(len(df), size=size + n_test, replace=False)
    X = magpie_features(df["formula"].iloc[take].tolist()).to_numpy()
    y = df["target"].to_numpy()[take]
    from crucible.models.registry import get_spec

    est = get_spec(stage, {}).build("regression", 0, {"n_jobs": 1} if stage == "rf-magpie" else {})
    t0, w0 = time.process_time(), time.perf_counter()
    est.fit(X[:size], y[:size])
    est.predict(X[size:])
    return {"seconds": time.process_time() - t0, "wall_seconds": time.perf_counter() - w0}


def run_point(stage: str, size: int, resources: Path) -> dict[str, float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, __file__, "--point", stage, str(size), "--resources", str(resources)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"{stage} at {size}: failed (rc {proc.returncode})")
    return json.loads(out.strip().splitlines()[-1])


def fit_exponent(sizes: list[float], seconds: list[float]) -> tuple[float, float]:
    import numpy as np

    b, log_a = np.polyfit(np.log(sizes), np.log(seconds), 1)
    return float(np.exp(log_a)), float(b)


def paper_cost(stage: str, a: float, b: float) -> tuple[float, float]:
    """(job-seconds, largest job seconds) of the paper configuration for this stage."""
    if stage == "featurize":
        t = a * DISTINCT_FORMULAS**b
        return t, t
    if stage == "eos-emt":
        t = a * EOS_ELEMENTS**b
        return t, t
    jobs = [
        a * (0.8 * n) ** b
        for n in N_SAMPLES.values()  # a fold trains on 4/5 of a task's rows
        for _ in range(5)
    ]
    return sum(jobs), max(jobs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resources", type=Path, required=True, help="a crucible working directory after a fetch")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a minute on a quiet laptop)")
    parser.add_argument("--stages", nargs="+", default=list(SIZES))
    parser.add_argument("--point", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.point:
        import resource

        result = measure(args.point[0], int(args.point[1]), args.resources)
        result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(result))
        return 0

    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows = []
    for stage in args.stages:
        sizes = (QUICK if args.quick else SIZES)[stage]
        points = [run_point(stage, n, args.resources) for n in sizes]
        a, b = fit_exponent(sizes, [p["seconds"] for p in points])
        total, largest = paper_cost(stage, a, b)
        rows.append(
            {
                "stage": stage,
                "sizes": sizes,
                "seconds": [p["seconds"] for p in points],
                "wall_seconds": [p["wall_seconds"] for p in points],
                "peak_rss_mb": [p["peak_rss_mb"] for p in points],
                "exponent": b,
                "paper_job_seconds": total,
                "paper_wall_64_cores": max(total / 64, largest),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    unit = {
        "featurize": "formulas",
        "dummy": "training rows",
        "gbm-magpie": "training rows",
        "rf-magpie": "training rows",
        "eos-emt": "elements",
    }
    print()
    print(
        "| stage | size (unit) | CPU time (s) | wall time (s) | peak RSS (MB) | exponent b (CPU) "
        "| paper config: job-seconds | wall on 64 cores |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['stage']} | {' / '.join(f'{s:,}' for s in r['sizes'])} ({unit[r['stage']]}) | "
            f"{' / '.join(f'{s:.3g}' for s in r['seconds'])} | {' / '.join(f'{s:.3g}' for s in r['wall_seconds'])} | "
            f"{' / '.join(f'{m:.0f}' for m in r['peak_rss_mb'])} | "
            f"{r['exponent']:.2f} | {r['paper_job_seconds']:.0f} | {r['paper_wall_64_cores']:.0f} s |"
        )
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
