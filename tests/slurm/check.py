"""Run a small crucible config through profiles/slurm on a real single-node SLURM cluster.

    python tests/slurm/check.py [--keep DIR]

1. installs slurm-wlm/munge/slurmdbd if missing and starts a cluster (tests/slurm/cluster.sh)
   with partitions "cpu" and "gpu" as named in profiles/slurm;
2. runs the config locally (profiles/default) and then through profiles/slurm with the real
   snakemake-executor-plugin-slurm (sbatch, sacct), plus a test-only rule whose first attempt
   asks for less memory than it uses;
3. checks from sacct that every job ran in the partition the profile gives its rule, that GPU
   rules were allocated gres/gpu, that the memory-hungry job was killed and resubmitted with the
   doubled request, and that every file under results/ equals the local run's byte for byte.

Exit 0: all checks passed; 1: a check failed; 77: the scheduler could not be installed or
started here (the reason is the last line printed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SKIP = 77

# Small on purpose (CI time): one task, a model of each CPU rule, the EMT potential's EOS and s2ef
# jobs (emt asks for no GPU: run_eos, predict_s2ef) and the same jobs of a user's potential that
# declares device: gpu (tests/custom_calculators.py, EMT's numbers; run_eos_neural, predict_s2ef_neural:
# the GPU partition and gres/gpu without torch). predict_matbench_neural is routed by the same
# set-resources mechanism; its dry-run placement is tested in tests/test_workflow_contract.py.
GPU_POTENTIAL = "emt-on-gpu"
CONFIG = {
    "matbench": {
        "tasks": ["matbench_steels"],
        # dummy: one job per task (predict_matbench_task); rf-magpie: one per fold (predict_matbench)
        "models": ["dummy", "rf-magpie"],
        "model_params": {"rf-magpie": {"n_estimators": 20}},
    },
    "potentials": {GPU_POTENTIAL: {"class": "custom_calculators:scaled_emt", "device": "gpu"}},
    "mlip": {
        "models": ["emt", GPU_POTENTIAL],
        "eos": {"elements": ["Cu"], "points": 7},
        "s2ef": {"datasets": {"vasp": "ase-vasp-testdata"}},
    },
}
# The two families' aggregate rules, not `all`: config/config.yaml's other families (crystal,
# reactions) are merged into this config and would make the CI run long.
TARGETS = ["matbench", "mlip", "results/slurm_test/overshoot_memory.txt"]
OVERSHOOT_RULE = "overshoot_memory"


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def expected_partitions() -> tuple[str, dict[str, str]]:
    """The CPU partition (default-resources) and {rule or group: partition} of the profile: the
    set-resources entries, and each job group with the partition of its rules."""
    profile = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())
    default = profile["default-resources"]["slurm_partition"]
    per_rule = {
        rule: res["slurm_partition"]
        for rule, res in profile.get("set-resources", {}).items()
        if "slurm_partition" in res
    }
    for rule, group in profile.get("groups", {}).items():
        per_rule.setdefault(group, per_rule.get(rule, default))
    return default, per_rule


def rule_of(comment: str) -> str:
    """The plugin's --comment is rule_<name> or rule_<name>_wildcards_<...>; a group job's name is
    <group>_<its rules, sorted, joined by _>, and the group is what this returns for it."""
    body = comment.removeprefix("rule_").split("_wildcards_", 1)[0]
    groups = set(yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text()).get("groups", {}).values())
    return next((g for g in sorted(groups, key=len, reverse=True) if body.startswith(f"{g}_")), body)


def rules_in(comment: str) -> str:
    """The rule names a job's comment carries (a group job's name lists up to five of them)."""
    return comment.removeprefix("rule_").split("_wildcards_", 1)[0]


def snakemake(workdir: Path, env: dict[str, str], *args: str, timeout: int, cores: str | None = None):
    """The test suite's one Snakemake runner (tests/helpers.py) on this check's stub Snakefile."""
    sys.path.insert(0, str(HERE.parent))
    from helpers import run_snakemake

    return run_snakemake(
        workdir,
        [workdir / "config.yaml"],
        *args,
        *TARGETS,
        env=env,
        timeout=timeout,
        snakefile=HERE / "Snakefile",
        cores=cores,
    )


# A fold job's sidecar JSON records how long its fit and predict took: the one field that is
# not a function of the inputs. It is compared without them; every other byte must be equal.
TIMING_KEYS = ("fit_seconds", "predict_seconds")


def _content(path: Path) -> bytes:
    if ".identity" in path.parts and "journal" in path.parts and "predictions" in path.parts:
        if path.name.endswith(".json.sha256"):
            # the journal holds the digest of such a sidecar's whole identity record, its sidecar's
            # SHA-256 (and so the timings) included: the record is compared without them below, and
            # its journal entry only for being there
            return b"journal entry of a record with timings"
    if path.suffix == ".json" and "predictions" in path.parts:
        record = json.loads(path.read_text())
        for key in TIMING_KEYS:
            record.pop(key, None)
        if ".identity" in path.parts and path.name.endswith(".json.json"):
            # the identity record of a sidecar with timings holds that sidecar's SHA-256
            record.pop("sha256", None)
        return json.dumps(record, sort_keys=True).encode()
    return path.read_bytes()


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(_content(p)).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def sacct_rows(env: dict[str, str], since: str) -> list[dict[str, str]]:
    fields = ["JobID", "Partition", "State", "ReqMem", "AllocTRES", "ExitCode", "Comment"]
    # sacct reads from slurmdbd, which the controller feeds asynchronously: wait until every job
    # the run submitted has a final state there.
    for _ in range(60):
        out = sh(["sacct", "-X", "-P", "-n", "-S", since, "-o", ",".join(fields)], env=env)
        rows = [dict(zip(fields, line.split("|", len(fields) - 1))) for line in out.stdout.splitlines() if line]
        if rows and all(r["State"] not in ("PENDING", "RUNNING", "COMPLETING") for r in rows):
            return rows
        time.sleep(1)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="work in DIR and leave it (default: a temp dir, removed)")
    parser.add_argument(
        "--reuse-local", action="store_true", help="with --keep: reuse DIR/local from an earlier run of the same code"
    )
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="crucible-slurm-"))
    base.mkdir(parents=True, exist_ok=True)
    cluster_dir, local_dir, slurm_dir = base / "cluster", base / "local", base / "slurm"

    if os.geteuid() != 0:
        print("SKIP: the test cluster needs root (slurmd runs as root here)")
        return SKIP
    cluster = str(HERE / "cluster.sh")
    proc = sh(["bash", cluster, "install"], timeout=1800)
    if proc.returncode != 0:
        print(proc.stdout[-2000:], proc.stderr[-2000:])
        print(f"SKIP: cannot install slurm-wlm/munge: {proc.stderr.strip().splitlines()[-1:] or proc.returncode}")
        return SKIP
    started = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 2))
    proc = sh(["bash", cluster, "start", str(cluster_dir)], timeout=300)
    try:
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:])
            print(f"SKIP: the SLURM test cluster did not start (rc {proc.returncode}); logs in {cluster_dir / 'log'}")
            return SKIP
        print(proc.stdout)
        return run_checks(cluster_dir, local_dir, slurm_dir, started, args.reuse_local)
    finally:
        sh(["bash", cluster, "stop", str(cluster_dir)], timeout=120)
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


def run_checks(cluster_dir: Path, local_dir: Path, slurm_dir: Path, started: str, reuse_local: bool = False) -> int:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["SOURCE_DATE_EPOCH"] = "1767225600"
    env["SLURM_CONF"] = str(cluster_dir / "slurm.conf")
    failures: list[str] = []

    shutil.rmtree(slurm_dir, ignore_errors=True)
    for d in (local_dir, slurm_dir):
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.yaml").write_text(yaml.safe_dump(CONFIG))
        shutil.copy(REPO / "tests" / "custom_calculators.py", d / "custom_calculators.py")
    t0 = time.perf_counter()
    if not (reuse_local and (local_dir / "results").is_dir()):
        proc = snakemake(local_dir, env, "--workflow-profile", str(REPO / "profiles/default"), timeout=1800, cores="2")
        print(f"local run: rc={proc.returncode} {time.perf_counter() - t0:.0f} s")
        if proc.returncode != 0:
            print(proc.stderr[-5000:])
            return 1
    # Downloads are verified by hash either way; reuse them so the SLURM run fetches nothing.
    shutil.copytree(local_dir / "resources", slurm_dir / "resources")

    t0 = time.perf_counter()
    proc = snakemake(
        slurm_dir,
        env,
        "--workflow-profile",
        str(REPO / "profiles/slurm"),
        "--slurm-init-seconds-before-status-checks",
        "2",
        timeout=1800,
    )
    print(f"slurm run: rc={proc.returncode} {time.perf_counter() - t0:.0f} s")
    (slurm_dir / "snakemake.log").write_text(proc.stderr)
    if proc.returncode != 0:
        print(proc.stderr[-6000:])
        failures.append(f"the SLURM run failed (rc {proc.returncode})")

    rows = sacct_rows(env, started)
    default_partition, per_rule = expected_partitions()
    print(f"{'JobID':>6} {'rule':<28} {'partition':<9} {'state':<14} {'ReqMem':>7} AllocTRES")
    for r in rows:
        rule = rule_of(r["Comment"])
        print(f"{r['JobID']:>6} {rule:<28} {r['Partition']:<9} {r['State']:<14} {r['ReqMem']:>7} {r['AllocTRES']}")
        want = per_rule.get(rule, default_partition)
        if r["Partition"] != want:
            failures.append(f"job {r['JobID']} of rule {rule} ran in {r['Partition']!r}, the profile says {want!r}")
        if want != default_partition and "gres/gpu=1" not in r["AllocTRES"]:
            failures.append(f"job {r['JobID']} of GPU rule {rule} was not allocated gres/gpu=1: {r['AllocTRES']}")
        if want == default_partition and "gres/gpu" in r["AllocTRES"]:
            failures.append(f"job {r['JobID']} of CPU rule {rule} holds a GPU: {r['AllocTRES']}")
    names = " ".join(f"_{rules_in(r['Comment'])}_" for r in rows)
    for gpu_rule in ("run_eos_neural", "predict_s2ef_neural"):
        if f"_{gpu_rule}_" not in names:
            failures.append(f"no job of GPU rule {gpu_rule} in sacct")
    # a GPU rule's job that ran elsewhere would pass the per-job checks above unseen
    if not any(r["Partition"] != default_partition and "gres/gpu=1" in r["AllocTRES"] for r in rows):
        failures.append("no job ran in the GPU partition with gres/gpu=1")
    for cpu_rule in ("predict_matbench", "predict_matbench_task", "run_eos", "predict_s2ef"):
        if f"_{cpu_rule}_" not in names:
            failures.append(f"no job of CPU rule {cpu_rule} in sacct")
    # Submissions (sbatch calls, one sacct allocation each) against the jobs the run planned: the
    # job groups of profiles/slurm must have merged jobs.
    planned = re.search(r"^total\s+(\d+)", proc.stderr, re.M)
    n_jobs = int(planned.group(1)) if planned else 0
    groups = set(yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text()).get("groups", {}).values())
    n_groups = sum(rule_of(r["Comment"]) in groups for r in rows)
    print(f"submissions: {len(rows)} sbatch calls ({n_groups} of them group jobs) for {n_jobs} jobs")
    if not rows or not n_jobs or len(rows) >= n_jobs:
        failures.append(f"job groups merged nothing: {len(rows)} submissions for {n_jobs} jobs")

    overshoot = [r for r in rows if rule_of(r["Comment"]) == OVERSHOOT_RULE]
    states = [(r["State"], r["ReqMem"]) for r in overshoot]
    if not (
        len(overshoot) == 2
        and overshoot[0]["State"] in ("OUT_OF_MEMORY", "FAILED", "CANCELLED")
        and overshoot[0]["ReqMem"] == "1000M"
        and overshoot[1]["State"] == "COMPLETED"
        and overshoot[1]["ReqMem"] == "2000M"
    ):
        failures.append(f"{OVERSHOOT_RULE}: expected killed at 1000M then COMPLETED at 2000M, sacct says {states}")

    local_files = tree_digest(local_dir / "results")
    slurm_files = tree_digest(slurm_dir / "results")
    if local_files.keys() != slurm_files.keys():
        failures.append(
            f"different result files: only local {sorted(local_files.keys() - slurm_files.keys())}, "
            f"only slurm {sorted(slurm_files.keys() - local_files.keys())}"
        )
    differing = sorted(k for k in local_files.keys() & slurm_files.keys() if local_files[k] != slurm_files[k])
    if differing:
        failures.append(f"{len(differing)} result files differ between local and SLURM runs: {differing[:10]}")
    print(f"compared {len(local_files)} result files: {len(differing)} differ")
    print(f"sacct: {len(rows)} jobs, {sum(r['Partition'] != default_partition for r in rows)} on GPU partition")

    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("PASS: partitions, GPU allocation, memory retry and byte-identical outputs")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
