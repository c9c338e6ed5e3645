"""What Snakemake's own process costs: planning time and its share of a run's CPU (issue 32).

    .venv/bin/python benchmarks/bench_scheduler.py --plan                     # snakemake -n, default and paper configs
    .venv/bin/python benchmarks/bench_scheduler.py --run --workdir DIR [--target matbench]

Snakemake runs in a child Python whose exit hook writes its own ``getrusage`` (RUSAGE_SELF: the
scheduler, DAG building, every thread of it) and its children's (RUSAGE_CHILDREN: the jobs), so
the two are told apart without sampling:

* ``--plan``: a dry run (``-n``) of the default config and of the default + paper configs in a
  fresh working directory: wall seconds and Snakemake's CPU seconds, once each;
* ``--run``: one real run in ``--workdir`` (downloads already there make it a run without them):
  wall, Snakemake's CPU, the jobs' CPU, and Snakemake's share of the whole.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from crucible.core.cpu_log import CPU_LOG_VAR, RUN_LOG

REPO = Path(__file__).resolve().parents[1]

# Run as the child: Snakemake's own CLI, with an exit hook that records where the CPU went.
_WRAPPER = """
import atexit, json, resource, sys
def _record(path=sys.argv.pop(1)):
    own, jobs = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(path, "w") as f:
        json.dump({"own": own.ru_utime + own.ru_stime, "jobs": jobs.ru_utime + jobs.ru_stime}, f)
atexit.register(_record)
from snakemake.cli import main
sys.argv[0] = "snakemake"
main()
"""


def snakemake(args: list[str], workdir: Path, log: Path) -> dict[str, float]:
    """Run Snakemake with ``args`` in ``workdir``: its return code, wall seconds and CPU split."""
    usage = workdir / ".bench_scheduler_usage.json"
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # each job's own CPU seconds (bench_cli_startup.py --runs WORKDIR sums them per command)
    env[CPU_LOG_VAR] = str((workdir / RUN_LOG).resolve())
    cmd = [sys.executable, "-c", _WRAPPER, str(usage), "--snakefile", str(REPO / "Snakefile")]
    cmd += ["--directory", str(workdir), "--workflow-profile", str(REPO / "profiles/default"), *args]
    start = time.perf_counter()
    with open(log, "w") as out:
        rc = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - start
    split = json.loads(usage.read_text()) if usage.exists() else {"own": float("nan"), "jobs": float("nan")}
    return {"rc": rc, "wall": wall, **split}


def plan() -> None:
    configs = {
        "default": ["config/config.yaml"],
        "default + paper": ["config/config.yaml", "config/paper.yaml"],
    }
    print("| config | jobs planned | wall (s) | Snakemake CPU (s) |")
    print("|---|---|---|---|")
    for name, files in configs.items():
        with tempfile.TemporaryDirectory(prefix="crucible-plan-") as tmp:
            workdir = Path(tmp)
            log = workdir / "plan.log"
            r = snakemake(["-n", "--configfile", *[str(REPO / f) for f in files]], workdir, log)
            jobs = next((ln.split()[-1] for ln in log.read_text().splitlines() if ln.startswith("total")), "?")
            print(f"| {name} | {jobs} | {r['wall']:.1f} | {r['own']:.1f} |")


def run(workdir: Path, target: str, cores: str, configfiles: list[str]) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    args = ["--cores", cores, target, "--configfile", *configfiles]
    r = snakemake(args, workdir, workdir / "bench_scheduler.log")
    total = r["own"] + r["jobs"]
    print(f"run {target} in {workdir} ({cores} cores): rc={r['rc']} wall={r['wall']:.1f} s")
    print(f"  Snakemake's own CPU: {r['own']:.1f} s; the jobs' CPU: {r['jobs']:.1f} s")
    print(f"  Snakemake's share of the run's CPU: {100 * r['own'] / total:.1f} %")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", action="store_true", help="dry runs of the default and paper configs")
    parser.add_argument("--run", action="store_true", help="one real run in --workdir")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--target", default="all")
    parser.add_argument("--cores", default="2")
    parser.add_argument("--configfile", nargs="+", default=[str(REPO / "config/config.yaml")])
    args = parser.parse_args()
    if args.plan:
        plan()
    if args.run:
        if args.workdir is None:
            parser.error("--run needs --workdir")
        run(args.workdir, args.target, args.cores, args.configfile)
    if not (args.plan or args.run):
        parser.print_help()
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
