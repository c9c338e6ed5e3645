"""The 13 Matbench v0.1 tasks: names, types, official metadata, and Matbench ids (mbids).

The one home of Matbench's fixed facts: task names and types, the number of folds, the split
seed and the matbench release whose scoring and file format crucible reproduces.
"""

from __future__ import annotations

import math
import os
from typing import Any

from crucible.core.errors import ConfigError, DataValidationError
from crucible.core.io import read_json

# Ordered by dataset size, as the paper's tables are.
TASKS: tuple[str, ...] = (
    "matbench_steels",
    "matbench_jdft2d",
    "matbench_phonons",
    "matbench_expt_gap",
    "matbench_dielectric",
    "matbench_expt_is_metal",
    "matbench_glass",
    "matbench_log_gvrh",
    "matbench_log_kvrh",
    "matbench_perovskites",
    "matbench_mp_gap",
    "matbench_mp_is_metal",
    "matbench_mp_e_form",
)

# From the official dataset metadata (role matbench/metadata), fixed for v0.1.
CLASSIFICATION_TASKS = frozenset({"matbench_expt_is_metal", "matbench_glass", "matbench_mp_is_metal"})
# Rows per task (n_samples of the official metadata): what a fold job's fit cost grows with.
N_SAMPLES: dict[str, int] = {
    "matbench_steels": 312,
    "matbench_jdft2d": 636,
    "matbench_phonons": 1265,
    "matbench_expt_gap": 4604,
    "matbench_dielectric": 4764,
    "matbench_expt_is_metal": 4921,
    "matbench_glass": 5680,
    "matbench_log_gvrh": 10987,
    "matbench_log_kvrh": 10987,
    "matbench_perovskites": 18928,
    "matbench_mp_gap": 106113,
    "matbench_mp_is_metal": 106113,
    "matbench_mp_e_form": 132752,
}
COMPOSITION_TASKS = frozenset({"matbench_steels", "matbench_expt_gap", "matbench_expt_is_metal", "matbench_glass"})

REGRESSION = "regression"
CLASSIFICATION = "classification"
TASK_TYPES: tuple[str, ...] = (REGRESSION, CLASSIFICATION)

BENCHMARK_NAME = "matbench_v0.1"
SPLIT_SEED = 18012019
N_FOLDS = 5
# The matbench release (PyPI matbench==0.6) whose scorer and results-file format we follow.
MATBENCH_VERSION = "0.6"

# What a model was given, as recorded in scores and results files: the composition mirror has
# formulas only; the matminer source also has structures.
COMPOSITION_ONLY = "composition-only (formulas, no structures)"
STRUCTURE = "structure"

# Roles of the pinned inputs in config/sources.yaml (crucible.sources.pinned_files.pinned): the official
# metadata and validation splits, and the composition mirror's table of each task.
METADATA_ROLE = "matbench/metadata"
VALIDATION_ROLE = "matbench/validation"


def mirror_role(task: str) -> str:
    return f"matbench/mirror/{check_task(task)}"


def check_task(task: str) -> str:
    if task not in TASKS:
        raise ConfigError(f"unknown Matbench task {task!r}; known tasks: {', '.join(TASKS)}")
    return task


def task_argument(text: str) -> str:
    """argparse type of a ``--task``: a Matbench task's name."""
    import argparse

    try:
        return check_task(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def task_type_of(task: str) -> str:
    return CLASSIFICATION if task in CLASSIFICATION_TASKS else REGRESSION


def mbid_prefix(task: str) -> str:
    return check_task(task).replace("matbench", "mb").replace("_", "-")


def make_mbids(task: str, n: int) -> list[str]:
    """``mb-<task>-<i+1>`` zero-padded to the number of digits of ``n`` (matbench's data_ops.load)."""
    width = int(math.floor(math.log10(n))) + 1
    prefix = mbid_prefix(task)
    return [f"{prefix}-{i + 1:0{width}d}" for i in range(n)]


def load_metadata(path: str | os.PathLike | None = None, sources: Any = None) -> dict[str, dict[str, Any]]:
    """The official dataset metadata, checked against its pin (default: where the fetch stage
    puts it). ``sources``: another sources file or document (tests)."""
    from crucible.sources.pinned_files import pinned

    path = pinned(METADATA_ROLE, path, sources=sources)
    meta = read_json(path)
    missing = [t for t in TASKS if t not in meta]
    if missing:
        raise DataValidationError(f"{path}: metadata lacks task(s) {', '.join(missing)}")
    return meta


def task_metadata(metadata: dict[str, dict[str, Any]], task: str) -> dict[str, Any]:
    return metadata[check_task(task)]
