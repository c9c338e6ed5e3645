"""crucible's main job against the loop a user writes without it, in one run on the same cores.

    .venv/bin/python benchmarks/bench_vs_hand_loop.py [--tasks matbench_steels ...] [--cores 2]

The peer (``hand_loop``): for each task, read the crabnet mirror CSV, build pymatgen
Compositions, featurize with matminer's Magpie ``ElementProperty`` (``n_jobs`` = cores), take the
official test ids of matbench 0.6's validation JSON, and fit fold by fold scikit-learn's
``DummyRegressor(mean)``/``DummyClassifier(prior)`` and the HistGradientBoosting settings of
``gbm-magpie`` (same seed), scoring at the end with MAE / matbench's label ROC AUC.

crucible: ``snakemake --cores N`` on the same tasks and models, downloads already present
(fetched once before any timing), results empty; its default target (scores, results files,
tables, figures).

Both run as subprocesses, one after the other, measured the same way (wall time and the peak
resident memory of the process tree, sampled every 0.2 s). Printed: wall, job-seconds (for
crucible the sum of its jobs' ``benchmark:`` seconds, for the loop its wall), peak memory, the
ratio, and whether every fold score is equal. Then crucible's no-op re-run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_main_job import aggregate, run_measured  # noqa: E402

from crucible.matbench.tasks import (  # noqa: E402
    CLASSIFICATION_TASKS,
    METADATA_ROLE,
    TASKS,
    VALIDATION_ROLE,
    mirror_role,
)
from crucible.sources.pinned_files import resource_path  # noqa: E402

# Task names and types are facts of Matbench, not of crucible's code: one home for them.
ALL_TASKS = list(TASKS)
CLASSIFICATION = CLASSIFICATION_TASKS
MODELS = ["dummy", "gbm-magpie"]
GBM = {"max_iter": 300, "learning_rate": 0.1, "max_leaf_nodes": 63, "min_samples_leaf": 10, "early_stopping": False}
# Where the fetch stage puts each file (config/sources.yaml, by role): a version bump there is
# what both sides read.
VALIDATION = str(resource_path(VALIDATION_ROLE))
METADATA = str(resource_path(METADATA_ROLE))


def mirror_csv(task: str) -> str:
    """The task's composition-mirror CSV, relative to a working directory."""
    return str(resource_path(mirror_role(task)))


def hand_loop(tasks: list[str], resources: Path, cores: int, out: Path) -> None:
    """What a competent user writes: matminer features, official folds, fit fold by fold."""
    import numpy as np
    import pandas as pd
    from matminer.featurizers.composition import ElementProperty
    from pymatgen.core import Composition
    from sklearn.dummy import DummyClassifier, DummyRegressor
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.metrics import mean_absolute_error, roc_auc_score

    validation = json.loads((resources / VALIDATION).read_text())
    featurizer = ElementProperty.from_preset("magpie", impute_nan=True)
    featurizer.set_n_jobs(cores)
    scores: dict[str, dict[str, list[float]]] = {}
    timings = {"featurize_s": 0.0, "fit_predict_s": 0.0}
    for task in tasks:
        df = pd.read_csv(resources / mirror_csv(task), keep_default_na=False, na_values=[""])
        width = len(str(len(df)))
        df.index = [f"mb-{task.removeprefix('matbench_').replace('_', '-')}-{i + 1:0{width}d}" for i in range(len(df))]
        t0 = time.perf_counter()
        df["composition"] = [Composition(f) for f in df["formula"]]
        df = featurizer.featurize_dataframe(df, "composition", pbar=False)
        timings["featurize_s"] += time.perf_counter() - t0
        X = df[featurizer.feature_labels()].to_numpy(dtype=np.float64)
        classification = task in CLASSIFICATION
        y = df["target"].astype(bool).to_numpy() if classification else df["target"].to_numpy(dtype=np.float64)
        position = {mbid: i for i, mbid in enumerate(df.index)}
        t0 = time.perf_counter()
        for model in MODELS:
            per_fold = []
            for k in range(5):
                test = np.array(sorted(position[m] for m in validation["splits"][task][f"fold_{k}"]["test"]))
                train = np.setdiff1d(np.arange(len(df)), test)
                if model == "dummy":
                    est = DummyClassifier(strategy="prior") if classification else DummyRegressor(strategy="mean")
                else:
                    cls = HistGradientBoostingClassifier if classification else HistGradientBoostingRegressor
                    est = cls(random_state=0, **GBM)
                est.fit(X[train], y[train])
                pred = est.predict(X[test])
                per_fold.append(
                    float(roc_auc_score(y[test], pred)) if classification else float(mean_absolute_error(y[test], pred))
                )
            scores.setdefault(model, {})[task] = per_fold
        timings["fit_predict_s"] += time.perf_counter() - t0
        print(f"{task}: featurize+fit done", flush=True)
    out.write_text(json.dumps({"scores": scores, "timings": timings}, indent=1, sort_keys=True))


def children_cpu() -> float:
    """User + system CPU seconds of every finished child process so far (stable on a busy machine)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def write_config(path: Path, tasks: list[str]) -> None:
    import yaml

    path.write_text(yaml.safe_dump({"matbench": {"tasks": tasks, "models": MODELS}, "mlip": {"models": []}}))


def snakemake_cmd(workdir: Path, cores: int, *targets: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
        "--cores",
        str(cores),
        "--workflow-profile",
        str(REPO / "profiles/default"),
        *targets,
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=ALL_TASKS, choices=ALL_TASKS)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--workdir", type=Path, help="default: a new temporary directory")
    parser.add_argument("--hand-loop-only", type=Path, metavar="OUT", help=argparse.SUPPRESS)
    parser.add_argument("--resources", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    tasks = [t for t in ALL_TASKS if t in args.tasks]

    if args.hand_loop_only:
        hand_loop(tasks, args.resources, args.cores, args.hand_loop_only)
        return 0

    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="crucible-vs-loop-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    write_config(workdir / "config.yaml", tasks)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["SOURCE_DATE_EPOCH"] = "1767225600"

    # Warm downloads for both sides, untimed: the same verified files.
    inputs = [mirror_csv(t) for t in tasks] + [VALIDATION, METADATA]
    proc = subprocess.run(snakemake_cmd(workdir, args.cores, *inputs), env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr[-4000:])
        return 1
    load = os.getloadavg()
    print(
        f"{len(tasks)} tasks, {args.cores} cores, models {MODELS}; load average at start "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        flush=True,
    )

    hand_out = workdir / "hand_loop_scores.json"
    hand_cmd = [
        sys.executable,
        __file__,
        "--tasks",
        *tasks,
        "--cores",
        str(args.cores),
        "--resources",
        str(workdir),
        "--hand-loop-only",
        str(hand_out),
    ]
    cpu0 = children_cpu()
    hand_wall, hand_peak, rc = run_measured(hand_cmd, env, workdir / "hand_loop.log")
    hand_cpu = children_cpu() - cpu0
    if rc != 0:
        print(f"hand loop failed: {workdir / 'hand_loop.log'}")
        return 1
    hand = json.loads(hand_out.read_text())
    print(
        f"hand loop: {hand_wall:.1f} s wall, peak {hand_peak / 2**30:.2f} GiB "
        f"(featurize {hand['timings']['featurize_s']:.1f} s, fit+predict {hand['timings']['fit_predict_s']:.1f} s); "
        f"load {os.getloadavg()[0]:.2f}",
        flush=True,
    )

    cpu0 = children_cpu()
    cru_wall, cru_peak, rc = run_measured(snakemake_cmd(workdir, args.cores, "matbench"), env, workdir / "crucible.log")
    cru_cpu = children_cpu() - cpu0
    if rc != 0:
        print(f"crucible failed: {workdir / 'crucible.log'}")
        return 1
    jobs = aggregate(workdir)
    jobs = jobs[~jobs["job"].str.startswith(("fetch", "extract"))]
    gbm = jobs[jobs["job"].str.startswith("matbench/predict/gbm-magpie")]["seconds"].sum()
    print(
        f"crucible: {cru_wall:.1f} s wall, peak {cru_peak / 2**30:.2f} GiB, {len(jobs)} jobs, "
        f"{jobs['seconds'].sum():.1f} job-seconds (gbm-magpie predict jobs {gbm:.1f}); load {os.getloadavg()[0]:.2f}",
        flush=True,
    )

    start = time.perf_counter()
    noop = subprocess.run([*snakemake_cmd(workdir, args.cores, "matbench"), "--quiet"], env=env, capture_output=True)
    noop_wall = time.perf_counter() - start

    worst, compared = 0.0, 0
    for model in MODELS:
        for task in tasks:
            ours = json.loads((workdir / f"results/matbench/scores/{model}/{task}.json").read_text())
            metric = ours["leaderboard_metric"]
            for k, fold in enumerate(ours["folds"]):
                worst = max(worst, abs(fold["scores"][metric] - hand["scores"][model][task][k]))
                compared += 1
    report = [
        "| | wall (s) | job-seconds | CPU seconds (process tree) | peak memory (GiB) |",
        "|---|---|---|---|---|",
        f"| hand loop | {hand_wall:.1f} | {hand_wall:.1f} | {hand_cpu:.1f} | {hand_peak / 2**30:.2f} |",
        f"| crucible | {cru_wall:.1f} | {jobs['seconds'].sum():.1f} | {cru_cpu:.1f} | {cru_peak / 2**30:.2f} |",
        f"| ratio loop/crucible | {hand_wall / cru_wall:.2f}x | | {hand_cpu / cru_cpu:.2f}x | |",
        "",
        f"crucible no-op re-run: {noop_wall:.2f} s (rc {noop.returncode})",
        f"scores: {compared} fold scores compared, largest difference {worst:.3g} "
        f"({'EQUAL' if worst <= 1e-9 else 'DIFFERENT'})",
    ]
    print("\n" + "\n".join(report))
    (workdir / "vs_hand_loop.md").write_text("\n".join(report) + "\n")
    return 0 if worst <= 1e-9 else 1


if __name__ == "__main__":
    sys.exit(main())
