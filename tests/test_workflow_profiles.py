"""Where each rule goes under each profile, on a stub workflow: profiles/slurm sends the rules that
ask for a GPU to the GPU partition with the rule's own memory, and everything else to the CPU
partition; profiles/default runs GPU rules on a machine without one. (The real workflow's rules
under profiles/slurm: test_workflow_contract.py.)"""

from __future__ import annotations

import re
import shutil

from helpers import REPO, run_snakemake

STUB = """
rule all:
    input: expand("out/{r}.txt", r=["pm", "pmg", "eos", "s2ef", "feat"])
rule featurize:
    output: "out/feat.txt"
    shell: "touch {output}"
rule predict_matbench:
    output: "out/pm.txt"
    threads: 2
    resources: mem_mb=lambda wc, attempt: 4000 * attempt
    shell: "touch {output}"
rule predict_matbench_neural:
    output: "out/pmg.txt"
    threads: 4
    resources: gpu=1, mem_mb=lambda wc, attempt: 16000 * attempt, runtime=lambda wc, attempt: 120 * attempt
    shell: "touch {output}"
rule run_eos_neural:
    output: "out/eos.txt"
    resources: gpu=1
    shell: "touch {output}"
rule predict_s2ef_neural:
    output: "out/s2ef.txt"
    resources: gpu=1
    shell: "touch {output}"
"""
GPU_RULES = {"predict_matbench_neural", "run_eos_neural", "predict_s2ef_neural"}


def partitions(stdout: str) -> dict[str, tuple[str | None, int]]:
    """{rule: (slurm_partition, gpu)} of every job a dry run prints (indented in a group job's block)."""
    found = {}
    for block in re.split(r"\n(?=(?: {4})?(?:local)?rule )", stdout):
        m = re.match(r" *(?:local)?rule (\w+):", block)
        r = re.search(r"resources: .*", block)
        if m and r:
            part = re.search(r"slurm_partition=(\w+)", r.group(0))
            gpu = re.search(r"\bgpu=(\d+)", r.group(0))
            found.setdefault(m.group(1), set()).add((part.group(1) if part else None, int(gpu.group(1)) if gpu else 0))
    return {rule: places.pop() if len(places) == 1 else tuple(sorted(places)) for rule, places in found.items()}


def _stub(tmp_path):
    (tmp_path / "Snakefile").write_text(STUB)
    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    return tmp_path / "Snakefile"


def test_slurm_profile_dry_run_puts_only_gpu_rules_on_gpu_partition(tmp_path, venv_env):
    snakefile = _stub(tmp_path)
    proc = run_snakemake(
        tmp_path, None, "--dry-run", "--profile", str(tmp_path / "profiles/slurm"), env=venv_env, snakefile=snakefile
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (tmp_path / "out").exists()
    parts = partitions(proc.stdout)
    assert set(parts) == GPU_RULES | {"predict_matbench", "featurize", "all"}
    for rule, (partition, gpu) in parts.items():
        if rule in GPU_RULES:
            assert (partition, gpu) == ("gpu", 1), rule
        else:
            assert partition == "cpu" and gpu == 0, rule
    # memory of the GPU rule comes from the rule (attempt 1), not the profile's fallback
    assert "mem_mb=16000" in proc.stdout


def test_local_profile_runs_gpu_rules_without_gpu(tmp_path, venv_env):
    snakefile = _stub(tmp_path)
    proc = run_snakemake(
        tmp_path,
        None,
        "--profile",
        str(tmp_path / "profiles/default"),
        "--cores",
        "1",
        env=venv_env,
        snakefile=snakefile,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(list((tmp_path / "out").iterdir())) == 5
