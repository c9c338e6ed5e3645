"""Snakemake's job reasons in the console: cut to one line (crucible.dag.console), whole in the
run's log under .snakemake/log/. Through a real Snakemake run of a small Snakefile whose final
job waits on 400 files (the default config's `all` job printed a reason of 20,156 characters)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from crucible.dag.console import REASON_LIMIT, short_reason

N_FILES = 400
# As the Snakefile does without --printshellcmds: one message line per job (crucible.dag.rules.job_message)
SNAKEFILE = f"""
from crucible.dag.console import shorten_reasons
shorten_reasons()
rule all:
    input: [f"out/file_{{i:04d}}.txt" for i in range({N_FILES})]
rule make:
    output: "out/file_{{i}}.txt"
    shell: "echo {{wildcards.i}} > {{output}}"
if not workflow.output_settings.printshellcmds:
    for _rule in workflow.rules:
        _rule.message = _rule.name
"""


def test_a_short_reason_is_kept_and_a_long_one_cut_after_a_whole_item():
    assert short_reason("Missing output files: a.txt") == "Missing output files: a.txt"
    files = [f"results/x/file_{i:04d}.json" for i in range(1000)]
    reason = "Input files updated by another job: " + ", ".join(files)
    short = short_reason(reason, where=".snakemake/log/run.log")
    head = short.partition(", …")[0]
    assert len(head) <= REASON_LIMIT and reason.startswith(head)
    shown = head.count(", ") + 1
    assert short.endswith(f"… ({1000 - shown:,} more; in full in .snakemake/log/run.log)"), short
    # no comma list: cut at the limit, counting characters
    assert short_reason("x" * 500, limit=100).endswith("x … (400 more characters; in full in .snakemake/log/)")
    # the parts of a reason: cut between them too, never inside a path
    two = "Missing output files: a.json, b.json; Input files updated by another job: " + ", ".join(files)
    short = short_reason(two)
    assert short.startswith("Missing output files: a.json, b.json; Input files updated by another job: results/")
    assert short.partition(", …")[0].endswith(".json")


@pytest.mark.parametrize("printshellcmds", [False, True], ids=["one-line messages", "printshellcmds"])
def test_the_console_cuts_long_reasons_and_the_log_keeps_them(tmp_path, venv_env, printshellcmds):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--quiet", "progress"]
    if printshellcmds:
        cmd.append("--printshellcmds")
    proc = subprocess.run(cmd, cwd=tmp_path, env=venv_env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    console = (proc.stdout + proc.stderr).splitlines()
    reasons = [line for line in console if "reason: " in line.lower()]
    assert len(reasons) == N_FILES + 1, len(reasons)
    longest = max(reasons, key=len)
    assert len(longest) < REASON_LIMIT + 120, longest
    if not printshellcmds:  # --printshellcmds also lists each job's inputs, in full, as asked
        assert max(len(line) for line in console) == len(longest)
    (logfile,) = (tmp_path / ".snakemake/log").glob("*.snakemake.log")
    log = logfile.read_text()
    full = [line for line in log.splitlines() if "Input files updated by another job: " in line]
    assert len(full) == 1 and all(f"out/file_{i:04d}.txt" in full[0] for i in range(N_FILES)), full
    cut = next(line for line in reasons if "Input files updated by another job" in line)
    assert f"more; in full in .snakemake/log/{logfile.name})" in cut, cut
