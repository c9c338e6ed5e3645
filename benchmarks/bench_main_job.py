"""Time the main job the way a user meets it, and where its time and memory go.

    .venv/bin/python benchmarks/bench_main_job.py [--workdir DIR] [--configfile FILE] [--target all]

1. a cold run in an empty working directory (fetch included, pip install excluded): wall time
   and the peak resident memory of the whole process tree (Snakemake and its jobs, sampled);
2. per stage: Snakemake's ``benchmark:`` files aggregated into ``results/tables/runtime.csv``
   (one row per job) and ``results/tables/runtime_by_rule.csv``, with a figure
   ``results/figures/runtime.{png,pdf}``;
3. a no-op re-run of the same DAG (nothing to do): its wall time.

Targets (issue 4): main job ≤ 10 min wall and ≤ 4 GB peak memory on 2 cores; no-op ≤ 10 s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import psutil

from crucible.core.cpu_log import CPU_LOG_VAR, RUN_LOG

REPO = Path(__file__).resolve().parents[1]


def tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_measured(cmd: list[str], env: dict[str, str], log_path: Path) -> tuple[float, int, int]:
    peak = 0
    start = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        handle = psutil.Process(proc.pid)
        done = threading.Event()

        def sample():
            nonlocal peak
            while not done.is_set():
                try:
                    peak = max(peak, tree_rss(handle))
                except psutil.Error:
                    pass
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        rc = proc.wait()
        done.set()
        sampler.join()
    return time.perf_counter() - start, peak, rc


def stage_of(rel: Path) -> str:
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def aggregate(workdir: Path) -> pd.DataFrame:
    rows = []
    root = workdir / "benchmarks" / "runs"
    for tsv in sorted(root.rglob("*.tsv")):
        rel = tsv.relative_to(root)
        frame = pd.read_csv(tsv, sep="\t")
        rows.append(
            {
                "job": str(rel.with_suffix("")),
                "rule_group": "/".join(rel.parts[:2]) if len(rel.parts) > 2 else rel.parts[0],
                "seconds": float(frame["s"].iloc[-1]),
                "max_rss_mb": float(frame["max_rss"].iloc[-1])
                if str(frame["max_rss"].iloc[-1]) != "-"
                else float("nan"),
            }
        )
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, help="default: a new temporary directory (cold cache)")
    parser.add_argument("--configfile", default=str(REPO / "config" / "config.yaml"))
    parser.add_argument("--target", default="all")
    parser.add_argument("--cores", default="2")
    args = parser.parse_args()

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="crucible-main-job-"))
    workdir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # each job's own CPU seconds (bench_cli_startup.py --runs WORKDIR sums them per command)
    env[CPU_LOG_VAR] = str((workdir / RUN_LOG).resolve())
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        args.configfile,
        "--cores",
        args.cores,
        "--workflow-profile",
        str(REPO / "profiles/default"),
        args.target,
    ]

    wall, peak, rc = run_measured(cmd, env, workdir / "bench_main_job.log")
    print(
        f"main job ({args.target}, cold, {args.cores} cores): rc={rc} wall={wall:.1f} s "
        f"({wall / 60:.2f} min), peak RSS of the process tree={peak / 2**30:.2f} GiB"
    )
    if rc != 0:
        print(f"failed: see {workdir / 'bench_main_job.log'}")
        return rc

    jobs = aggregate(workdir)
    by_rule = (
        jobs.groupby("rule_group")
        .agg(
            jobs=("job", "count"),
            seconds=("seconds", "sum"),
            max_seconds=("seconds", "max"),
            max_rss_mb=("max_rss_mb", "max"),
        )
        .sort_values("seconds", ascending=False)
        .reset_index()
    )
    import matplotlib.pyplot as plt

    from crucible.report.figures import save_figure
    from crucible.report.tables import write_table

    write_table(jobs, csv=workdir / "results/tables/runtime.csv")
    write_table(by_rule, csv=workdir / "results/tables/runtime_by_rule.csv")
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 0.35 * len(by_rule) + 1.5))
    a.barh(by_rule["rule_group"], by_rule["seconds"])
    a.set_xlabel("job seconds, summed (wall of the run: %.0f s)" % wall)
    a.invert_yaxis()
    b.barh(by_rule["rule_group"], by_rule["max_rss_mb"])
    b.set_xlabel("largest job max RSS (MB)")
    b.invert_yaxis()
    b.set_yticklabels([])
    fig.suptitle("crucible main job: where time and memory go (Snakemake benchmark: files)")
    save_figure(fig, workdir / "results/figures/runtime.png", workdir / "results/figures/runtime.pdf")
    print(by_rule.to_string(index=False))
    print(f"sum of job seconds: {jobs['seconds'].sum():.1f} s over {len(jobs)} jobs")

    noop = [*cmd, "--quiet"]
    start = time.perf_counter()
    rc = subprocess.run(noop, env=env, capture_output=True, text=True).returncode
    print(f"no-op re-run of the full DAG: rc={rc} wall={time.perf_counter() - start:.2f} s")
    print(f"tables: {workdir / 'results/tables/runtime.csv'}, figure: {workdir / 'results/figures/runtime.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
