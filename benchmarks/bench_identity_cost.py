"""What identity from what a job did costs (issue 54, item 5).

Three measures, each printed with the machine's load average (a shared machine's numbers move
with it):

``plan SNAKEFILE [SNAKEFILE ...] --workdir DIR [--configfile F] [--repeats N]``
    wall and CPU seconds of ``snakemake -n`` with each Snakefile (a checkout of main and one of
    the branch: run them in the same call, alternating, so both see the same load), in ``DIR``
    (an empty folder plans the default config; a finished run's folder also reads every record),
    each with its checkout's ``src/`` on ``PYTHONPATH``.
    The first planning of each is left out (it fills the code-digest cache).

``hook [--repeats N]``
    the per-job cost of watching a job: a fresh Python importing what a Matbench fit imports
    (pandas, scikit-learn, pymatgen, matminer), with and without the audit hook, and the CPU of
    :func:`crucible.identity.job_reads.collect` at its end.

``runlog LOG``
    from a run's ``CRUCIBLE_CPU_LOG`` (``logs/job_cpu.jsonl``): the CPU seconds of every job, and
    of its identity (checking its inputs, collecting what it read, writing its records), summed.

    CRUCIBLE_CPU_LOG=$PWD/logs/job_cpu.jsonl snakemake --cores 2 matbench --forceall
    python benchmarks/bench_identity_cost.py runlog logs/job_cpu.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

_FIT_IMPORTS = "import pandas, sklearn.ensemble, pymatgen.core, matminer.featurizers.composition"


def _load() -> str:
    return "load average %.2f %.2f %.2f on %d CPUs" % (*os.getloadavg(), os.cpu_count() or 0)


def _child_cpu(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int]:
    before = os.times()
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = os.times()
    return (
        wall,
        (after.children_user - before.children_user) + (after.children_system - before.children_system),
        proc.returncode,
    )


def _workdir(workdir: str, snakefile: str, i: int) -> str:
    """``workdir`` itself where it holds a run; else a folder of its own per checkout, with that
    checkout's ``config/`` linked in (the Snakefile reads config/config.yaml from where it runs)."""
    if os.path.isdir(os.path.join(workdir, "results")):
        return workdir
    where = os.path.join(workdir, f"checkout-{i}")
    os.makedirs(where, exist_ok=True)
    link = os.path.join(where, "config")
    if not os.path.lexists(link):
        os.symlink(os.path.join(os.path.dirname(os.path.abspath(snakefile)), "config"), link)
    return where


def plan(snakefiles: list[str], workdir: str, configfile: str | None, repeats: int) -> None:
    print(_load())
    times: dict[str, list[tuple[float, float]]] = {s: [] for s in snakefiles}
    for i in range(repeats + 1):
        for snakefile in snakefiles:
            where = _workdir(workdir, snakefile, snakefiles.index(snakefile))
            cmd = [sys.executable, "-m", "snakemake", "-n", "--snakefile", snakefile, "--cores", "2"]
            cmd += ["--directory", where]
            if configfile:
                cmd += ["--configfile", configfile]
            # each checkout's own library: its src/ first on the path
            src = os.path.join(os.path.dirname(os.path.abspath(snakefile)), "src")
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
            wall, cpu, rc = _child_cpu(cmd, env)
            if rc != 0:
                raise SystemExit(f"{snakefile}: snakemake -n failed (rc {rc})")
            if i:
                times[snakefile].append((wall, cpu))
    for snakefile, runs in times.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(
            f"{snakefile}: planning wall median {statistics.median(walls):.2f} s (min {min(walls):.2f}), "
            f"CPU median {statistics.median(cpus):.2f} s over {len(runs)} runs"
        )
    print(_load())


_WATCHED = """
import time, sys
start = time.process_time()
from crucible.identity import job_reads
{watch}
{imports}
mid = time.process_time()
ran = job_reads.collect([], []) if {watch_flag} else None
end = time.process_time()
print(mid - start, end - mid, len(ran["files"]) if ran else 0, len(ran["distributions"]) if ran else 0)
"""


def hook(repeats: int) -> None:
    print(_load())
    out: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    files = dists = 0
    for _ in range(repeats):
        for watched in (False, True):
            code = _WATCHED.format(
                watch="job_reads.watch()" if watched else "", imports=_FIT_IMPORTS, watch_flag=watched
            )
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            imports, collect, files, dists = proc.stdout.split()
            out[watched].append((float(imports), float(collect)))
            if watched:
                files, dists = int(files), int(dists)
    plain = statistics.median(i for i, _ in out[False])
    hooked = statistics.median(i for i, _ in out[True])
    collect = statistics.median(c for _, c in out[True])
    print(
        f"imports of a fit: {plain:.3f} CPU-s without the hook, {hooked:.3f} with it (+{hooked - plain:.3f}); "
        f"collect at the end {collect:.3f} CPU-s ({files} files, {dists} distributions recorded); "
        f"medians of {repeats}"
    )
    print(_load())


def runlog(path: str) -> None:
    lines = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    total = sum(line["cpu_s"] for line in lines)
    parts = {k: sum(line.get(k, 0.0) for line in lines) for k in ("verify_cpu_s", "record_cpu_s")}
    identity = sum(parts.values())
    print(
        f"{len(lines)} jobs, {total:.1f} CPU-s; identity {identity:.2f} CPU-s ({100 * identity / total:.2f} %): "
        + ", ".join(f"{k} {v:.2f}" for k, v in parts.items())
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("plan")
    p.add_argument("snakefiles", nargs="+")
    p.add_argument("--workdir", required=True)
    p.add_argument("--configfile")
    p.add_argument("--repeats", type=int, default=3)
    h = sub.add_parser("hook")
    h.add_argument("--repeats", type=int, default=5)
    r = sub.add_parser("runlog")
    r.add_argument("log")
    args = parser.parse_args(argv)
    if args.what == "plan":
        plan(args.snakefiles, args.workdir, args.configfile, args.repeats)
    elif args.what == "hook":
        hook(args.repeats)
    else:
        runlog(args.log)


if __name__ == "__main__":
    main()
