"""The content-addressed Magpie feature files.

The DAG writes one file per task table, ``results/features/magpie-<MAGPIE_VERSION>/<task>.parquet``
(user datasets: ``.../user/<name>.parquet``), built from that table alone: a ``formula`` column
(string, sorted, each distinct formula once) and the 132 Magpie columns (float64). A task's
features therefore never change when other tasks join or leave the run, and neither do its
predictions (a formula's features do not depend on the other formulas featurized beside it:
``tests/test_features.py`` checks it). Several tables in one file (``crucible features build
--data A B``) is the same format. The version is part of the directory (or file) name, so a new
matminer, new element tables or a change in our code give new files instead of silently
reusing old numbers; it is also stored in the file (as metadata of the ``formula`` field, which
survives :func:`crucible.core.io.write_parquet`), and :func:`load_features` refuses a file whose
stored version is not the running one.
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from crucible.core.errors import DataValidationError
from crucible.core.io import InFile, write_parquet
from crucible.core.progress import heartbeat
from crucible.features.formulas import FormulaError
from crucible.features.magpie import COLUMNS, MAGPIE_VERSION, magpie_features

if TYPE_CHECKING:  # pandas is imported where it is used: the Snakemake process imports this module
    import pandas as pd  # for features_path at start-up and must not pay for pandas there

log = logging.getLogger(__name__)

VERSION_KEY = b"crucible.magpie_version"
_CACHE_NAME_RE = re.compile(r"magpie-(.+?)(?:\.parquet)?")


class StaleCacheError(DataValidationError):
    """A feature cache written by another featurizer version (or not by crucible at all)."""


def cache_filename(version: str = MAGPIE_VERSION) -> str:
    return f"magpie-{version}.parquet"


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


def features_path(name: str, results_dir: str | os.PathLike = "results", version: str | None = None) -> Path:
    """``<results_dir>/features/magpie-<version>/<name>.parquet``: one task table's features
    (``version``: the running featurizer's by default)."""
    return Path(results_dir) / "features" / f"magpie-{version or MAGPIE_VERSION}" / f"{name}.parquet"


def _check_version_in_name(out_path: Path) -> None:
    """The version a file or its directory is named after must be the running featurizer's."""
    for part in (out_path.name, out_path.parent.name):
        m = _CACHE_NAME_RE.fullmatch(part)
        if m and m.group(1) != MAGPIE_VERSION:
            raise StaleCacheError(
                f"{out_path}: the file name says Magpie version {m.group(1)!r} but this featurizer is "
                f"{MAGPIE_VERSION!r}; the workflow and the installed packages disagree"
            )


def build_cache(data: Sequence[InFile], out: str | os.PathLike) -> None:
    """Featurize the distinct formulas of ``data`` and write them to ``out``.

    Args:
        out: results/features/magpie-<version>/{task}.parquet
        data: results/matbench/data/{task}.parquet files (the DAG: one task's)
    """
    import pandas as pd

    out = Path(out)
    _check_version_in_name(out)
    t0 = time.perf_counter()
    first = read_formulas(data)
    formulas = sorted(first)
    log.info("featurizing %d distinct formulas from %d files", len(formulas), len(data))
    try:
        with heartbeat(log, f"featurizing {len(formulas)} formulas"):
            features = magpie_features(formulas)
    except FormulaError as exc:
        path, row = first[exc.formula]
        raise DataValidationError(f"{path}: row {row}: field 'formula' {exc.formula!r}: {exc.reason}") from None
    table = pd.concat([pd.DataFrame({"formula": formulas}), features], axis=1)
    write_parquet(table, out, schema=cache_schema())
    log.info("wrote %s (%d rows) in %.2f s", out, len(table), time.perf_counter() - t0)


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
    :class:`~crucible.core.errors.DataValidationError` naming the formulas the cache lacks.
    """
    import pandas as pd

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
