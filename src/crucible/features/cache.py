"""The shared, content-addressed Magpie feature cache.

Every distinct formula of every task is featurized once per run and stored in
``results/features/magpie-<MAGPIE_VERSION>.parquet``: a ``formula`` column (string, sorted) and
the 132 Magpie columns (float64). The version is part of the file name, so a new matminer,
new element tables or a change in our code give a new file instead of silently reusing old
numbers; it is also stored in the file (as metadata of the ``formula`` field, which survives
:func:`crucible.io.write_parquet`), and :func:`load_features` refuses a file whose stored
version is not the running one.
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from crucible.errors import DataValidationError
from crucible.features.magpie import COLUMNS, MAGPIE_VERSION, FormulaError, magpie_features
from crucible.io import write_parquet
from crucible.progress import heartbeat

log = logging.getLogger(__name__)

VERSION_KEY = b"crucible.magpie_version"
_CACHE_NAME_RE = re.compile(r"magpie-(.+)\.parquet")


class StaleCacheError(DataValidationError):
    """A feature cache written by another featurizer version (or not by crucible at all)."""


def cache_filename(version: str = MAGPIE_VERSION) -> str:
    return f"magpie-{version}.parquet"


def cache_path(results_dir: str | os.PathLike = "results", version: str = MAGPIE_VERSION) -> Path:
    """``<results_dir>/features/magpie-<version>.parquet``."""
    return Path(results_dir) / "features" / cache_filename(version)


def cache_schema(version: str = MAGPIE_VERSION) -> pa.Schema:
    fields = [pa.field("formula", pa.string(), nullable=False, metadata={VERSION_KEY: version.encode()})]
    fields += [pa.field(name, pa.float64()) for name in COLUMNS]
    return pa.schema(fields)


def read_formulas(data_paths: Iterable[str | os.PathLike]) -> dict[str, tuple[str, int]]:
    """Distinct formulas of the given task tables -> (file, row) of their first occurrence."""
    first: dict[str, tuple[str, int]] = {}
    for path in data_paths:
        path = str(path)
        try:
            column = pq.read_table(path, columns=["formula"]).column("formula")
        except (OSError, KeyError, pa.ArrowInvalid) as exc:
            raise DataValidationError(f"{path}: cannot read the 'formula' column: {exc}") from exc
        values = column.to_pylist()
        for row, formula in enumerate(values):
            if not isinstance(formula, str):
                raise DataValidationError(f"{path}: row {row}: field 'formula' is {formula!r}, not a string")
            first.setdefault(formula, (path, row))
    return first


def task_slice_path(cache: str | os.PathLike, task: str) -> Path:
    """``results/features/magpie-<version>/<task>.parquet`` beside ``magpie-<version>.parquet``."""
    cache = Path(cache)
    return cache.with_suffix("") / f"{task}.parquet"


def build_cache(
    data_paths: Sequence[str | os.PathLike],
    out_path: str | os.PathLike,
    slice_paths: Sequence[str | os.PathLike] | None = None,
) -> int:
    """Featurize the distinct formulas of ``data_paths`` and write the cache; returns its row count.

    ``slice_paths``: also write a task's own rows of the cache (its distinct formulas, sorted,
    same schema and version) to ``<dir>/<task>.parquet``, taken from the ``--data`` file of the
    same name (``.../<task>.parquet``), so that a fold job of a 300-row task reads a few kilobytes
    instead of the whole 126k-formula cache. Data files without a slice (user datasets) only feed
    the cache.
    """
    sources: dict[str, str | os.PathLike] = {}
    for slice_path in slice_paths or ():
        name = Path(slice_path).stem
        matches = [d for d in data_paths if Path(d).stem == name]
        if len(matches) != 1:
            raise ValueError(
                f"slice {slice_path}: needs exactly one --data file named {name}.parquet, found {len(matches)}"
            )
        sources[str(slice_path)] = matches[0]
    out_path = Path(out_path)
    m = _CACHE_NAME_RE.fullmatch(out_path.name)
    if m and m.group(1) != MAGPIE_VERSION:
        raise StaleCacheError(
            f"{out_path}: the file name says Magpie version {m.group(1)!r} but this featurizer is "
            f"{MAGPIE_VERSION!r}; the workflow and the installed packages disagree"
        )
    t0 = time.perf_counter()
    first = read_formulas(data_paths)
    formulas = sorted(first)
    log.info("featurizing %d distinct formulas from %d files", len(formulas), len(data_paths))
    try:
        with heartbeat(log, f"featurizing {len(formulas)} formulas"):
            features = magpie_features(formulas)
    except FormulaError as exc:
        path, row = first[exc.formula]
        raise DataValidationError(f"{path}: row {row}: field 'formula' {exc.formula!r}: {exc.reason}") from None
    table = pd.concat([pd.DataFrame({"formula": formulas}), features], axis=1)
    write_parquet(table, out_path, schema=cache_schema())
    log.info("wrote %s (%d rows) in %.2f s", out_path, len(table), time.perf_counter() - t0)
    if sources:
        index = pd.Index(formulas)
        for slice_path, data_path in sources.items():
            own = sorted(set(read_formulas([data_path])))
            rows = table.iloc[index.get_indexer(own)].reset_index(drop=True)
            write_parquet(rows, slice_path, schema=cache_schema())
        log.info("wrote %d per-task slices", len(sources))
    return len(table)


def cache_version(path: str | os.PathLike) -> str | None:
    """The featurizer version stored in a cache file, or None if it carries none."""
    schema = pq.read_schema(path)
    if "formula" not in schema.names:
        return None
    meta = schema.field("formula").metadata or {}
    value = meta.get(VERSION_KEY)
    return value.decode() if value is not None else None


def load_features(
    cache_path: str | os.PathLike,
    formulas: Sequence[str] | pd.Series,
    expected_version: str | None = None,
) -> pd.DataFrame:
    """The 132 Magpie columns for ``formulas`` (one row each, same order), from the cache.

    Raises :class:`StaleCacheError` if the file was written by another featurizer version
    (``expected_version`` defaults to the running :data:`MAGPIE_VERSION`), and
    :class:`~crucible.errors.DataValidationError` naming the formulas the cache lacks.
    """
    expected = MAGPIE_VERSION if expected_version is None else expected_version
    try:
        stored = cache_version(cache_path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise DataValidationError(f"{cache_path}: cannot read the feature cache: {exc}") from exc
    if stored != expected:
        raise StaleCacheError(
            f"{cache_path}: feature cache written by Magpie version {stored!r}, but this run needs "
            f"{expected!r}; rebuild it (crucible features build)"
        )
    table = pq.read_table(cache_path)
    missing_cols = [c for c in COLUMNS if c not in table.column_names]
    if missing_cols:
        raise DataValidationError(f"{cache_path}: feature cache lacks columns {missing_cols[:5]}")
    cached = pd.Index(table.column("formula").to_pylist())
    if not cached.is_unique:
        raise DataValidationError(f"{cache_path}: feature cache holds duplicate formulas")
    wanted = pd.Index(list(formulas), dtype=object)
    pos = cached.get_indexer(wanted)
    if (pos < 0).any():
        lacking = pd.unique(wanted[pos < 0])
        shown = ", ".join(repr(f) for f in lacking[:10])
        more = f" and {len(lacking) - 10} more" if len(lacking) > 10 else ""
        raise DataValidationError(f"{cache_path}: {len(lacking)} formulas are not in the feature cache: {shown}{more}")
    values = np.column_stack([table.column(c).to_numpy()[pos] for c in COLUMNS])
    return pd.DataFrame(values, columns=list(COLUMNS))
