"""CPU cost of starting every ``crucible`` CLI command, the per-job overhead that every job pays.

Two numbers per command, each the least CPU time (user + system, of the child process) over
``--repeats`` runs, so that other load on the machine inflates them as little as possible:

* ``help``: ``crucible <group> <command> --help``: the interpreter, the CLI and the group's module;
* ``imports``: the same plus the imports written in the command's own function body (what the
  command imports once its arguments are parsed). A lower bound of a real job's start-up: imports
  that the called library functions make inside themselves are not followed;

and the three most expensive third-party packages in ``python -X importtime`` of the ``imports`` path.
The whole cost of real jobs, start-up and work: run the workflow with
``CRUCIBLE_CPU_LOG=DIR/logs/job_cpu.jsonl`` (every ``crucible`` process appends its CPU seconds),
then ``--runs DIR`` sums them per command.

    python benchmarks/bench_cli_startup.py                 # the working tree's src/
    python benchmarks/bench_cli_startup.py --rev 910c2c8   # src/ of a git revision (git archive)
    python benchmarks/bench_cli_startup.py --only reactions matbench
    python benchmarks/bench_cli_startup.py --runs WORKDIR  # CPU-s per job of a finished run, by command

Goal (issue 32): a tiny job (score, table, card) costs at most 0.4 CPU-seconds before its work.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import textwrap
from pathlib import Path

from crucible.core.cpu_log import CPU_LOG_VAR, RUN_LOG

ROOT = Path(__file__).resolve().parents[1]
TINY_JOB_CPU_S = 0.4  # issue 32: a score, table or card job

# Run inside the child: list every command with the imports of its function body, as JSON.
_LIST = textwrap.dedent(
    """
    import argparse, ast, importlib, inspect, json, textwrap
    try:
        from crucible.stages.groups import GROUPS
    except ImportError:  # a revision before the commands were declared (crucible.stages.declaration)
        from crucible.cli import GROUPS

    def body_imports(func):
        stmts = []
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
        mod = inspect.getmodule(func).__name__
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                stmts += [f"import {a.name}" for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(mod.split(".")[: -node.level] + ([base] if base else []))
                stmts += [f"from {base} import {a.name}" for a in node.names]
        return stmts

    out = []
    for group, module in GROUPS.items():
        module = module if isinstance(module, str) else module[0]  # (module, help) before issue 45
        declared = importlib.import_module(module)
        if hasattr(declared, "STAGES"):  # the function's own module, then its body's imports
            try:  # relative ``run`` paths (".module:function") made whole
                from crucible.stages.declaration import stages_of
                stages = stages_of(group)
            except ImportError:
                stages = declared.STAGES
            for st in stages:
                mod, name = st.run.split(":")
                func = getattr(importlib.import_module(mod), name)
                out.append({"group": group, "command": st.verb, "imports": [f"from {mod} import {name}", *body_imports(func)]})
            continue
        parser = argparse.ArgumentParser()
        declared.configure_parser(parser)
        for action in parser._actions:
            if not isinstance(action, argparse._SubParsersAction):
                continue
            for name, sub in sorted(action.choices.items()):
                func = sub.get_default("func")
                out.append({"group": group, "command": name, "imports": body_imports(func) if func else []})
    print(json.dumps(out))
    """
)


def _cpu_of(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 2):
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, proc.stderr


def _job_code(group: str, command: str, imports: list[str]) -> str:
    # The CLI's own start-up path (parser of the group), then the command body's imports.
    return (
        "import sys\nfrom crucible import cli\n"
        f"try:\n    cli.main([{group!r}, {command!r}, '--help'])\nexcept SystemExit:\n    pass\n"
        + "".join(f"{s}\n" for s in imports)
    )


def _top_packages(importtime: str, n: int = 3) -> str:
    """The ``n`` third-party top-level packages with the largest cumulative import time."""
    stdlib = set(sys.stdlib_module_names)
    totals = []
    for line in importtime.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (part.strip() for part in line[len("import time:") :].split("|"))
        if not cumulative.isdigit():
            continue
        # a package's own line (no dot), at whatever depth it was first imported
        skip = ("crucible", "encodings", "site", "sitecustomize", "_distutils_hack")
        if "." not in name and name not in stdlib and name not in skip and int(cumulative) >= 10_000:
            totals.append((int(cumulative) / 1e6, name))
    totals.sort(reverse=True)
    return ", ".join(f"{name} {sec:.2f}" for sec, name in totals[:n]) or "-"


def _source_tree(rev: str | None, tmp: Path) -> Path:
    if rev is None:
        return ROOT / "src"
    archive = tmp / "src.tar"
    with archive.open("wb") as fh:
        # config/ too: some commands read the pinned sources file beside src/ at start-up.
        subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src", "config"], stdout=fh, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data")
    return tmp / "src"


def _per_command_cpu(workdir: Path) -> int:
    """Jobs, mean, largest and total CPU seconds per command of a run made in ``workdir`` with
    ``CRUCIBLE_CPU_LOG=<workdir>/logs/job_cpu.jsonl`` (each ``crucible`` process appends its own
    ``getrusage``; see ``crucible.core.cpu_log``). Not Snakemake's ``benchmark:`` files: their
    ``cpu_time`` is sampled every 0.5 s for 15 s and every 30 s after, so it reads 0 for a job
    under 0.5 s and about 15 s for a 40-s fit."""
    import statistics

    log = workdir / RUN_LOG
    if not log.exists():
        raise SystemExit(f"{log}: no such file; run the workflow with {CPU_LOG_VAR}={log.resolve()}")
    per_command: dict[str, list[float]] = {}
    for n, line in enumerate(log.read_text().splitlines(), 1):
        record = json.loads(line)
        if record["returncode"] != 0:
            raise SystemExit(f"{log}, line {n}: a failed command ({' '.join(record['argv'])}); measure a clean run")
        per_command.setdefault(record["command"], []).append(record["cpu_s"])
    print(f"{'command':<32} {'jobs':>5} {'CPU-s/job':>9} {'largest':>8} {'CPU-s':>8}")
    for command, cpu in sorted(per_command.items(), key=lambda kv: statistics.mean(kv[1])):
        print(f"{command:<32} {len(cpu):>5} {statistics.mean(cpu):>9.2f} {max(cpu):>8.2f} {sum(cpu):>8.1f}")
    jobs = [c for v in per_command.values() for c in v]
    print(f"{'all':<32} {len(jobs):>5} {'':>9} {max(jobs):>8.2f} {sum(jobs):>8.1f}")
    print(f"jobs at most {TINY_JOB_CPU_S} CPU-s: {sum(c <= TINY_JOB_CPU_S for c in jobs)} of {len(jobs)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", help="measure src/ of this git revision instead of the working tree")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement; the least CPU is kept")
    parser.add_argument("--only", nargs="*", metavar="GROUP", help="only these CLI groups")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parser.add_argument("--runs", type=Path, metavar="WORKDIR", help=f"only sum {RUN_LOG} of a finished run")
    args = parser.parse_args(argv)
    if args.runs:
        return _per_command_cpu(args.runs)

    with tempfile.TemporaryDirectory() as tmp_name:
        src = _source_tree(args.rev, Path(tmp_name))
        env = {**os.environ, "PYTHONPATH": str(src), "PYTHONDONTWRITEBYTECODE": "1"}
        # Byte-compile once, so that the first repeat does not pay for compiling (a job never does).
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], env={**env, "PYTHONDONTWRITEBYTECODE": ""})
        env.pop("PYTHONDONTWRITEBYTECODE")
        listing = subprocess.run([sys.executable, "-c", _LIST], env=env, capture_output=True, text=True)
        if listing.returncode:
            raise SystemExit(f"listing the commands of {args.rev or 'the working tree'} failed:\n{listing.stderr}")
        commands = json.loads(listing.stdout)
        if args.only:
            commands = [c for c in commands if c["group"] in args.only]
        bare = min(_cpu_of([sys.executable, "-c", "pass"], env)[0] for _ in range(args.repeats))
        rows = []
        print(f"source: {args.rev or 'working tree'} ({src}); python alone: {bare:.2f} CPU-s")
        print(f"{'command':<34} {'help':>6} {'imports':>7}  largest imports of the job path (s, -X importtime)")
        for c in commands:
            help_cmd = [sys.executable, "-m", "crucible", c["group"], c["command"], "--help"]
            job_cmd = [sys.executable, "-c", _job_code(c["group"], c["command"], c["imports"])]
            help_cpu = min(_cpu_of(help_cmd, env)[0] for _ in range(args.repeats))
            job_cpu = min(_cpu_of(job_cmd, env)[0] for _ in range(args.repeats))
            _, importtime = _cpu_of([sys.executable, "-X", "importtime", *job_cmd[1:]], env)
            top = _top_packages(importtime)
            name = f"{c['group']} {c['command']}"
            print(f"{name:<34} {help_cpu:>6.2f} {job_cpu:>7.2f}  {top}", flush=True)
            rows.append({"command": name, "help_cpu_s": help_cpu, "job_cpu_s": job_cpu, "top_imports": top})
    if args.json:
        args.json.write_text(json.dumps({"rev": args.rev, "python_cpu_s": bare, "commands": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
