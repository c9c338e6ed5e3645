"""One task's truth and official test ids.

:class:`TaskData` reads the clean stage's data file and the folds stage's folds file: the test
ids of fold k are the rows of the data file (in its row order, the official order) whose
``fold`` is k in the folds file. Beside it: :func:`card_values` (task type and MAD, or fraction
of True, from a task card), :func:`check_fold_paths`, and what inputs the fold jobs were given
(:func:`structures_used`, :func:`input_kind_of`). The ``score`` command reads them in
:mod:`crucible.matbench.scoring`, the ``results-file`` command in :mod:`crucible.matbench.submission`.

Heavy imports (pandas, pyarrow) happen inside the functions: one process runs per DAG job.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from crucible.core.errors import DataValidationError, PredictionFileError
from crucible.matbench.tasks import (
    CLASSIFICATION,
    COMPOSITION_ONLY,
    N_FOLDS,
    REGRESSION,
    STRUCTURE,
    check_task,
    task_type_of,
)

_FOLD_RE = re.compile(r"fold_(\d+)\.parquet$")


class TaskData:
    """One task's truth and official test ids, read from the data and folds stage outputs."""

    def __init__(self, task: str, data_path: str | os.PathLike, folds_path: str | os.PathLike) -> None:
        import pandas as pd

        from crucible.core.io import read_parquet

        self.task = check_task(task)
        for p in (data_path, folds_path):
            if not Path(p).is_file():
                raise DataValidationError(f"{p}: file not found (task {task})")
        data = read_parquet(data_path, columns=["mbid", "structure", "target"])
        folds = read_parquet(folds_path, columns=["mbid", "fold"])
        if data["mbid"].duplicated().any():
            raise DataValidationError(f"{data_path}: duplicated mbids")
        self.task_type = CLASSIFICATION if data["target"].dtype == bool else REGRESSION
        if self.task_type != task_type_of(task):
            raise DataValidationError(
                f"{data_path}: column 'target' has dtype {data['target'].dtype}, but {task} is {task_type_of(task)}"
            )
        self.has_structures = bool(data["structure"].notna().any())
        fold_of = folds.set_index("mbid")["fold"]
        unknown = sorted(set(data["mbid"]) - set(fold_of.index))
        if unknown or len(fold_of) != len(data):
            raise DataValidationError(
                f"{folds_path}: rows do not match {data_path} ({len(fold_of)} vs {len(data)} rows; "
                f"{len(unknown)} data ids without a fold, e.g. {unknown[:5]})"
            )
        fold_col = fold_of.loc[data["mbid"]].to_numpy()
        self.test_ids: list[list[str]] = [data["mbid"][fold_col == k].tolist() for k in range(N_FOLDS)]
        empty = [k for k, ids in enumerate(self.test_ids) if not ids]
        if empty:
            raise DataValidationError(f"{folds_path}: fold(s) {empty} have no test rows")
        self.truth = pd.Series(data["target"].to_numpy(), index=data["mbid"].to_numpy())

    @property
    def inputs_given(self) -> str:
        """What a model of this task was given: formulas only, or structures too."""
        return STRUCTURE if self.has_structures else COMPOSITION_ONLY


def check_fold_paths(paths: Sequence[str | os.PathLike]) -> list[str]:
    """The five fold files in fold order; a file named ``fold_j`` given as fold k is refused."""
    paths = [str(p) for p in paths]
    if len(paths) != N_FOLDS:
        raise PredictionFileError(f"--predictions needs {N_FOLDS} files (fold_0 .. fold_4 in order), got {len(paths)}")
    for k, p in enumerate(paths):
        m = _FOLD_RE.search(os.path.basename(p))
        if m and int(m.group(1)) != k:
            raise PredictionFileError(f"{p}: given as fold {k}'s predictions but named fold_{m.group(1)}")
    return paths


def card_values(card: Mapping[str, Any], task: str, card_path: str | os.PathLike = "task card") -> tuple[str, float]:
    """(task type, official MAD for regression or fraction of True for classification)."""
    if card.get("task") != task:
        raise DataValidationError(f"{card_path}: task card of {card.get('task')!r}, not {task!r}")
    mad = card["mad"] if card["task_type"] == REGRESSION else card["frac_true"]
    return card["task_type"], mad


def structures_used(prediction_paths: Sequence[str | os.PathLike]) -> bool | None:
    """Whether the model read crystal structures, from the fold jobs' sidecars (None: unknown).

    Structures in the data do not mean a model used them: gbm-magpie on the upstream files
    still sees formulas only.
    """
    from crucible.core.io import read_json

    flags = []
    for path in prediction_paths:
        sidecar = Path(path).with_suffix(".json")
        info = read_json(sidecar) if sidecar.is_file() else {}
        if "structures_used" not in info:
            return None
        flags.append(bool(info["structures_used"]))
    return all(flags)


def input_kind_of(td: TaskData, used: bool | None) -> str:
    """What the model was given: from its sidecars when they say, else from the data."""
    if used is None:
        return td.inputs_given
    return STRUCTURE if used else COMPOSITION_ONLY
