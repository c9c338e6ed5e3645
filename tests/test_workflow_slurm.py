"""profiles/slurm on a real SLURM scheduler (single-node cluster started by tests/slurm/cluster.sh).

The work is in tests/slurm/check.py (also runnable by hand); this test runs it and reports its
result. Where the scheduler cannot be installed or started (no root, no apt, daemons refuse to
start) the test is skipped with the script's reason, never passed.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import REPO

# network: the check installs Debian's slurm-wlm with apt (and the DAG fetches wheels from PyPI)
pytestmark = [pytest.mark.slow, pytest.mark.network]

SKIP = 77


def test_slurm_profile_on_a_real_scheduler(venv_env):
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests/slurm/check.py")], env=venv_env, capture_output=True, text=True, timeout=2400
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == SKIP:
        pytest.skip(lines[-1] if lines else "the SLURM test cluster could not be started")
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-4000:]
    assert "PASS:" in proc.stdout
