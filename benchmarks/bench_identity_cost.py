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
    What it cannot hold is the audit hook's own cost, spread over every audit event of the job
    (a Python call each, some 70,000 in a fit's imports): ``jobs`` measures that.

    CRUCIBLE_CPU_LOG=$PWD/logs/job_cpu.jsonl snakemake --cores 2 matbench --forceall
    python benchmarks/bench_identity_cost.py runlog logs/job_cpu.jsonl

``jobs WORKDIR [--configfile F] [--rules R,R] [--repeats N] [--runlog LOG]``
    the audit hook's real cost per job: in ``WORKDIR``, a finished run, one job of each rule (of
    ``--rules``, or every rule the run has) is run again from its own shell line, as Snakemake runs
    it, through a ``crucible`` of this benchmark's own first on the PATH (no switch of the product
    turns the hook off): once counting the job's audit events and opens, whose count times the
    hook's cost per event and per open (measured in a loop, the minimum of five) is the hook's
    cost in that job; and ``--repeats`` times each with the hook and without it (that ``crucible``
    makes :func:`crucible.identity.job_reads.watch` do nothing), whose CPU seconds are printed
    too, though on a loaded machine they move more than the hook costs. Beside it, the job's
    identity parts from ``CRUCIBLE_CPU_LOG`` (checking its inputs; collecting what it read and
    writing its records) and the share of the job all three take. With ``--runlog`` (a run's
    ``logs/job_cpu.jsonl``), the share of that run's job CPU identity takes once the hook is
    counted: its recorded identity plus its job count times the mean hook cost per job measured
    here. Rerunning a job rewrites its outputs (the same bytes) and records: use a run of its
    own, never one you keep.

    python benchmarks/bench_identity_cost.py jobs /tmp/run --runlog logs/job_cpu.jsonl
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


_NO_HOOK = """#!{python}
import sys

import crucible.identity.job_reads as job_reads

job_reads.watch = lambda: None  # the audit hook never installed: what the job costs without it
from crucible.cli import main

sys.exit(main())
"""
_COUNT = """#!{python}
import atexit
import collections
import json
import os
import sys

events = collections.Counter()
sys.addaudithook(lambda event, args: events.update((event,)))


@atexit.register
def _write():
    with open(os.environ["BENCH_EVENTS"], "w", encoding="utf-8") as fh:
        json.dump({{"events": sum(events.values()), "open": events["open"]}}, fh)


from crucible.cli import main

sys.exit(main())
"""
_PER_EVENT = """
import os, sys, time
from crucible.identity import job_reads

x = object()


def loop(n=500_000):
    started = time.process_time()
    for _ in range(n):
        id(x)  # one audit event (builtins.id), the commonest of a job's
    return (time.process_time() - started) / n


def opens(n=100_000):
    args = (os.path.join(os.getcwd(), "some", "file.csv"), "r", 524288)
    started = time.process_time()
    for _ in range(n):
        job_reads._hook("open", args)
    return (time.process_time() - started) / n


plain = min(loop() for _ in range(5))
job_reads.watch()
hooked = min(loop() for _ in range(5))
print(hooked - plain, min(opens() for _ in range(5)))
"""
_HOOK = """#!{python}
import sys

from crucible.cli import main

sys.exit(main())
"""


def _shell_lines(workdir: str, configfile: str | None) -> dict[str, list[str]]:
    """``{rule: [shell line, ...]}`` of every job of the finished run in ``workdir``, as
    ``snakemake -n --forceall --printshellcmds`` with this checkout's Snakefile prints them."""
    snakefile = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "Snakefile")
    cmd = [sys.executable, "-m", "snakemake", "-n", "--forceall", "--printshellcmds", "--cores", "1"]
    cmd += ["--snakefile", snakefile, *(["--configfile", configfile] if configfile else [])]
    cmd += ["--directory", workdir]  # after the config files: it ends their list
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir)
    if proc.returncode != 0:
        raise SystemExit(f"snakemake -n failed in {workdir}: {proc.stderr[-2000:]}")
    rules: dict[str, list[str]] = {}
    rule = None
    for line in (proc.stdout + proc.stderr).splitlines():
        if line.startswith(("rule ", "localrule ")) and line.rstrip().endswith(":"):
            rule = line.split()[1].rstrip(":")
        elif rule and line.lstrip().removeprefix("Shell command:").lstrip().startswith("CRUCIBLE_JOB="):
            rules.setdefault(rule, []).append(line.lstrip().removeprefix("Shell command:").strip())
            rule = None
    return rules


def jobs(workdir: str, configfile: str | None, only: list[str] | None, repeats: int, log: str | None) -> None:
    import shlex
    import tempfile

    print(_load())
    workdir = os.path.abspath(workdir)
    found = _shell_lines(workdir, configfile)
    chosen = {rule: lines[0] for rule, lines in sorted(found.items()) if not only or rule in only}
    if not chosen:
        raise SystemExit(f"no job of {only or 'any rule'} in {workdir} (rules: {', '.join(sorted(found))})")
    shims = tempfile.mkdtemp(prefix="bench-hook-")
    for kind, text in (("hook", _HOOK), ("nohook", _NO_HOOK), ("count", _COUNT)):
        os.makedirs(os.path.join(shims, kind))
        script = os.path.join(shims, kind, "crucible")
        with open(script, "w", encoding="utf-8") as fh:
            fh.write(text.format(python=sys.executable))
        os.chmod(script, 0o755)
    calibration = subprocess.run([sys.executable, "-c", _PER_EVENT], capture_output=True, text=True, check=True)
    per_event, per_open = (float(x) for x in calibration.stdout.split())
    print(
        f"the hook costs {per_event * 1e9:.0f} ns per audit event (a Python call), "
        f"{per_open * 1e9:.0f} ns more per open it files (min of 5 loops)"
    )
    rows = []
    for rule, line in chosen.items():
        cpu: dict[str, list[float]] = {"hook": [], "nohook": []}
        parts: list[dict[str, float]] = []
        for run in range(repeats + 1):
            for kind in ("nohook", "hook") if run < repeats else ("count",):
                cpu_log = os.path.join(shims, f"{kind}.jsonl")
                env = {
                    **os.environ,
                    "PATH": os.pathsep.join([os.path.join(shims, kind), os.environ.get("PATH", "")]),
                    "CRUCIBLE_CPU_LOG": cpu_log,
                    "BENCH_EVENTS": os.path.join(shims, "events.json"),
                }
                before = os.times()
                proc = subprocess.run(["bash", "-c", line], cwd=workdir, env=env, capture_output=True, text=True)
                after = os.times()
                if proc.returncode != 0:
                    raise SystemExit(f"{rule}: {shlex.split(line)[1:4]} failed (rc {proc.returncode})")
                if kind == "count":
                    continue
                cpu[kind].append(
                    (after.children_user - before.children_user) + (after.children_system - before.children_system)
                )
                if kind == "hook":
                    with open(cpu_log, encoding="utf-8") as fh:
                        parts.append(json.loads(fh.read().splitlines()[-1]))
        with open(os.path.join(shims, "events.json"), encoding="utf-8") as fh:
            counted = json.load(fh)
        plain, hooked = statistics.median(cpu["nohook"]), statistics.median(cpu["hook"])
        verify = statistics.median(p.get("verify_cpu_s", 0.0) for p in parts)
        record = statistics.median(p.get("record_cpu_s", 0.0) for p in parts)
        estimate = counted["events"] * per_event + counted["open"] * per_open
        rows.append((rule, plain, estimate, verify, record))
        print(
            f"{rule}: {plain:.3f} CPU-s without the hook, {hooked:.3f} with it ({hooked - plain:+.3f}, medians of "
            f"{repeats}); {counted['events']} audit events ({counted['open']} opens): the hook {estimate:.4f} CPU-s; "
            f"verify {verify:.4f}, collect + records {record:.4f}; identity "
            f"{100 * (estimate + verify + record) / plain:.2f} % of the job"
        )
    hook_mean = statistics.mean(e for _, _, e, _, _ in rows)
    print(f"the hook: {hook_mean:.4f} CPU-s per job (audit events x their cost), mean over {len(rows)} rules")
    if log:
        lines = [json.loads(x) for x in open(log, encoding="utf-8") if x.strip()]
        total = sum(x["cpu_s"] for x in lines)
        recorded = sum(x.get("verify_cpu_s", 0.0) + x.get("record_cpu_s", 0.0) for x in lines)
        hook_total = hook_mean * len(lines)
        print(
            f"{log}: {len(lines)} jobs, {total:.1f} CPU-s; identity recorded {recorded:.2f} CPU-s "
            f"({100 * recorded / total:.2f} %) + the hook {len(lines)} x {hook_mean:.3f} = {hook_total:.2f} CPU-s: "
            f"{100 * (recorded + hook_total) / total:.2f} % of the run's job CPU"
        )
    print(_load())


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
    j = sub.add_parser("jobs")
    j.add_argument("workdir")
    j.add_argument("--configfile")
    j.add_argument("--rules", help="comma-separated rule names (default: one job of every rule of the run)")
    j.add_argument("--repeats", type=int, default=3)
    j.add_argument("--runlog", help="a run's CRUCIBLE_CPU_LOG, to estimate that run's share")
    args = parser.parse_args(argv)
    if args.what == "plan":
        plan(args.snakefiles, args.workdir, args.configfile, args.repeats)
    elif args.what == "hook":
        hook(args.repeats)
    elif args.what == "jobs":
        rules = args.rules.split(",") if args.rules else None
        jobs(args.workdir, args.configfile, rules, args.repeats, args.runlog)
    else:
        runlog(args.log)


if __name__ == "__main__":
    main()
