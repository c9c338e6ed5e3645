"""Shared fixtures. The plain helpers and constants they wrap live in tests/helpers.py (import
them from there, not from this file); a few names are re-exported here for older imports.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from helpers import (  # noqa: F401  (re-exported)
    PUBLISHED_DUMMY_MAE,
    REPO,
    SOURCES_FILE,
    TEST_FOLD_SIZES,
    cache_root,
    clean_task,
    matbench_members,
)
from helpers import official_validation as _validation
from helpers import task_formulas as _task_formulas

# Fixtures that fetch real wheels (matbench, crabnet, fairchem-core) from PyPI unless the test
# cache has them: every test using one is marked `network`, so `pytest -m "not network"` runs offline.
NETWORK_FIXTURES = frozenset({"members", "official_validation", "crabnet_wheel", "task_formulas", "peer"})


def pytest_collection_modifyitems(items):
    for item in items:
        if NETWORK_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.network)


@pytest.fixture(scope="session")
def members() -> dict[str, Path]:
    return matbench_members()


@pytest.fixture(scope="session")
def official_validation():
    return _validation()


@pytest.fixture(scope="session")
def crabnet_wheel() -> Path:
    """The crabnet 2.0.8 wheel, fetched and hash-checked by crucible's own fetch stage."""
    return matbench_members()["crabnet-2.0.8"]


@pytest.fixture(scope="session")
def task_formulas() -> dict[str, list[str]]:
    """{task: formulas in file order}, straight from the crabnet wheel."""
    return _task_formulas()


@pytest.fixture(scope="session")
def venv_env() -> dict[str, str]:
    """Environment for subprocesses: this interpreter's scripts (crucible, snakemake) on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env
