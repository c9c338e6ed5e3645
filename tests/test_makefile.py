"""The Makefile's entry points pass a user's config on: `make run CONFIG=my.yaml` runs Snakemake
with it, `make report CONFIG=my.yaml` builds the report of that run (the same config: the report
otherwise describes config/config.yaml's). Read with `make -n` (prints, runs nothing), with the
install step taken as done so that only the Snakemake line is printed."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from helpers import REPO

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")


def _snakemake_line(target: str, *assignments: str) -> str:
    # -o: the install stamp counts as up to date, whatever this checkout's venv holds
    proc = subprocess.run(
        ["make", "-n", "-C", str(REPO), "-o", ".venv/.installed", target, *assignments],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = [line for line in proc.stdout.splitlines() if "bin/snakemake" in line]
    assert len(lines) == 1, proc.stdout
    return lines[0]


def test_make_run_passes_the_users_config():
    line = _snakemake_line("run", "CONFIG=my.yaml")
    assert line.split().count("--configfile") == 1 and line.rstrip().endswith("--configfile my.yaml"), line
    assert "--configfile" not in _snakemake_line("run")


def test_make_report_builds_the_report_of_the_runs_config():
    line = _snakemake_line("report", "CONFIG=my.yaml")
    assert "--report results/report.zip" in line and line.rstrip().endswith("--configfile my.yaml"), line
    plain = _snakemake_line("report")
    assert "--report results/report.zip" in plain and "--configfile" not in plain
