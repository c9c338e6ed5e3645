"""Folds stage: the official 5-fold test sets, checked against a regeneration, plus inner
validation rows for models that early-stop.

Matbench v0.1's splits are ``KFold`` (regression) / ``StratifiedKFold`` on the target
(classification) with ``n_splits=5, shuffle=True, random_state=18012019`` over the upstream row
order. The official split file is taken as the truth; the regeneration guards against a mirror
whose row order drifted, which would silently leak rows between folds.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from sklearn.model_selection import KFold, StratifiedKFold, train_test_split

from crucible.core.errors import DataValidationError
from crucible.core.io import InFile, read_json, write_parquet
from crucible.matbench.tasks import N_FOLDS, SPLIT_SEED, check_task

FOLD_SCHEMA = pa.schema(
    [("mbid", pa.string()), ("fold", pa.int8())] + [(f"inner_val_{k}", pa.bool_()) for k in range(N_FOLDS)]
)


def official_test_ids(validation: dict[str, Any], task: str, source: str = "validation file") -> list[list[str]]:
    try:
        splits = validation["splits"][check_task(task)]
        return [list(splits[f"fold_{k}"]["test"]) for k in range(N_FOLDS)]
    except KeyError as exc:
        raise DataValidationError(f"{source}: no split {exc} for {task}") from None


def regenerate_test_ids(mbids: np.ndarray, target: np.ndarray, task_type: str) -> list[list[str]]:
    if task_type == "classification":
        splitter = StratifiedKFold(n_splits=N_FOLDS, shuffle=True, random_state=SPLIT_SEED)
        splits = splitter.split(mbids, target)
    else:
        splitter = KFold(n_splits=N_FOLDS, shuffle=True, random_state=SPLIT_SEED)
        splits = splitter.split(mbids)
    return [list(mbids[test]) for _, test in splits]


def _describe(ids: set[str], limit: int = 5) -> str:
    shown = ", ".join(sorted(ids)[:limit])
    return f"{len(ids)} id(s): {shown}{', ...' if len(ids) > limit else ''}"


def check_partition(test_ids: list[list[str]], mbids: list[str], task: str) -> None:
    """Test folds must be disjoint and cover every row exactly once."""
    seen: dict[str, int] = {}
    for k, fold in enumerate(test_ids):
        if len(set(fold)) != len(fold):
            raise DataValidationError(f"{task}: fold {k} lists a test id twice")
        for mbid in fold:
            if mbid in seen:
                raise DataValidationError(f"{task}: {mbid} is a test row of fold {seen[mbid]} and fold {k}")
            seen[mbid] = k
    missing = set(mbids) - seen.keys()
    extra = seen.keys() - set(mbids)
    if missing or extra:
        raise DataValidationError(
            f"{task}: test folds do not cover the data: missing {_describe(missing)}; unknown {_describe(extra)}"
        )


def compare_splits(official: list[list[str]], regenerated: list[list[str]], task: str) -> None:
    for k, (a, b) in enumerate(zip(official, regenerated)):
        if set(a) != set(b):
            only_official, only_ours = set(a) - set(b), set(b) - set(a)
            raise DataValidationError(
                f"{task} fold {k}: regenerated test ids differ from the official split file: "
                f"only official {_describe(only_official)}; only regenerated {_describe(only_ours)}"
            )


def build_folds(
    data: pd.DataFrame,
    task: str,
    task_type: str,
    validation: dict[str, Any],
    inner_fraction: float = 0.25,
    inner_seed: int = 7,
    validation_source: str = "validation file",
) -> pd.DataFrame:
    mbids = data["mbid"].to_numpy().astype(str)
    official = official_test_ids(validation, task, validation_source)
    check_partition(official, list(mbids), task)
    regenerated = regenerate_test_ids(mbids, data["target"].to_numpy(), task_type)
    compare_splits(official, regenerated, task)
    return folds_table(mbids, official, data["target"].to_numpy(), task_type, inner_fraction, inner_seed)


def folds_table(
    mbids: np.ndarray,
    test_ids: list[list[str]],
    target: np.ndarray,
    task_type: str,
    inner_fraction: float = 0.25,
    inner_seed: int = 7,
) -> pd.DataFrame:
    """The folds table for given test folds: each row's fold plus inner-validation flags."""
    position = {m: i for i, m in enumerate(mbids)}
    fold = np.full(len(mbids), -1, dtype=np.int8)
    for k, ids in enumerate(test_ids):
        fold[[position[m] for m in ids]] = k
    out = pd.DataFrame({"mbid": mbids, "fold": fold})
    for k in range(N_FOLDS):
        train_idx = np.flatnonzero(fold != k)
        stratify = target[train_idx] if task_type == "classification" else None
        _, val_idx = train_test_split(train_idx, test_size=inner_fraction, random_state=inner_seed, stratify=stratify)
        flag = np.zeros(len(mbids), dtype=bool)
        flag[val_idx] = True
        out[f"inner_val_{k}"] = flag
    return out


def write_folds(folds: pd.DataFrame, path: str | os.PathLike) -> None:
    write_parquet(folds, path, schema=FOLD_SCHEMA)


def split_rows(folds: pd.DataFrame, k: int) -> dict[str, np.ndarray]:
    """Row positions of fold ``k``'s train, inner-validation and test rows."""
    test = folds["fold"].to_numpy() == k
    val = folds[f"inner_val_{k}"].to_numpy() & ~test
    train = ~test & ~val
    return {"train": np.flatnonzero(train), "val": np.flatnonzero(val), "test": np.flatnonzero(test)}


def load_validation(path: str | os.PathLike | None = None, sources: Any = None) -> dict[str, Any]:
    """The official validation splits, checked against their pin (default: where the fetch
    stage puts them)."""
    from crucible.matbench.tasks import VALIDATION_ROLE
    from crucible.sources.pinned_files import pinned

    return read_json(pinned(VALIDATION_ROLE, path, sources=sources))


def write_task_folds(
    task: str,
    data: InFile,
    card: InFile,
    validation: InFile,
    out: str | os.PathLike,
    raw_sha256: str | None = None,
    inner_fraction: float = 0.25,
    inner_seed: int = 7,
) -> None:
    """The folds stage: the official folds of ``task`` (checked against a regeneration) and the
    inner validation rows; the card must record ``raw_sha256`` when it is given.

    Args:
        validation: the official validation splits (checked against their pin)
        out: the folds table to write: results/matbench/folds/{task}.parquet
        task: as in :func:`crucible.matbench.clean.write_clean_task`
        data: the clean task table: results/matbench/data/{task}.parquet
        card: the task card: results/matbench/data/{task}.json
        raw_sha256: pinned SHA-256 of the raw file: the card must record exactly this
        inner_fraction: fraction of each training fold held out as inner validation (default 0.25)
        inner_seed: seed of the inner validation split (default 7)
    """
    from crucible.core.io import read_parquet
    from crucible.sources.pinned_files import check_card_pin

    task_card = read_json(card)
    if raw_sha256:
        check_card_pin(task_card, card, raw_sha256)
    table = build_folds(
        read_parquet(data),
        task,
        task_card["task_type"],
        load_validation(validation),
        inner_fraction,
        inner_seed,
        validation_source=validation,
    )
    write_folds(table, out)
