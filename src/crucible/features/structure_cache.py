"""Per-structure feature files in ``results/features/``, keyed by the canonical structure hash.

Like the Magpie files, the DAG writes one per task table (``<prefix>-<version>/<task>.parquet``,
built from that table alone, so a task's features never change when other tasks join or leave
the run); each carries its featurizer's version in its directory (or file) name and in the
metadata of its key field, and a reader refuses a file of another version. Rows are the
distinct structures of the given task tables, sorted by hash, so that two builds are
byte-identical whatever order the tables come in.

- ``scm-<SCM_VERSION>/``: ``structure_hash``, ``n_sites`` (int32) and
  ``sine_coulomb_eigenvalues`` (list<float64>, the structure's own n eigenvalues in matminer's
  order; models pad them to the width of their training rows).
- ``mlip-embed-<model>-<version>/``: ``structure_hash`` and ``embedding``
  (list<float64> of fixed length), see :mod:`crucible.features.mlip_embed`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from crucible.core.errors import DataValidationError
from crucible.core.io import InFile
from crucible.features.cache import StaleCacheError
from crucible.features.structures import StructureError, parse_structure, structure_hash

log = logging.getLogger(__name__)

VERSION_KEY = b"crucible.structure_feature_version"
KEY = "structure_hash"

# Bump when our Sine Coulomb code changes in a way that can change output.
_SCM_REVISION = "2"  # 2: per-pair dgemv and aligned ddot, as matminer on every BLAS kernel


def _scm_version() -> str:
    from crucible.features.sine_coulomb import ANG_TO_BOHR

    key = f"{_SCM_REVISION}|numpy {np.__version__}|ang_to_bohr {ANG_TO_BOHR!r}"
    return f"{_SCM_REVISION}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


SCM_VERSION: str = _scm_version()
SCM_COLUMN = "sine_coulomb_eigenvalues"


def scm_cache_filename(version: str = SCM_VERSION) -> str:
    return f"scm-{version}.parquet"


def scm_cache_dirname(version: str = SCM_VERSION) -> str:
    """The directory of the per-task files: ``scm-<version>``."""
    return f"scm-{version}"


def read_structures(data_paths: Iterable[str | os.PathLike]) -> dict[str, tuple[str, int, str]]:
    """Distinct structures of the task tables: hash -> (file, row, structure JSON) of the first."""
    first: dict[str, tuple[str, int, str]] = {}
    for path in data_paths:
        path = str(path)
        try:
            values = pq.read_table(path, columns=["structure"]).column("structure").to_pylist()
        except (OSError, KeyError, pa.ArrowInvalid) as exc:
            raise DataValidationError(f"{path}: cannot read the 'structure' column: {exc}") from exc
        for row, text in enumerate(values):
            if text is None:
                continue
            try:
                key = structure_hash(text)
            except StructureError as exc:
                raise DataValidationError(f"{path}: row {row}: field 'structure': {exc}") from None
            first.setdefault(key, (path, row, text))
    return first


def structure_hashes(structures: Sequence[str | None], source: str = "data") -> list[str]:
    """The hash of every row's structure (rows without one are an error naming the row)."""
    out = []
    for row, text in enumerate(structures):
        if text is None:
            raise DataValidationError(f"{source}: row {row}: field 'structure' is empty")
        try:
            out.append(structure_hash(text))
        except StructureError as exc:
            raise DataValidationError(f"{source}: row {row}: field 'structure': {exc}") from None
    return out


def _check_name(out_path: Path, prefix: str, version: str) -> None:
    """A file (or the directory of per-task files) named after the featurizer must name this version."""
    for name, expected in (
        (out_path.name, f"{prefix}-{version}.parquet"),
        (out_path.parent.name, f"{prefix}-{version}"),
    ):
        if name.startswith(f"{prefix}-") and name != expected:
            raise StaleCacheError(
                f"{out_path}: the file name does not carry this featurizer's version {version!r} "
                f"(expected {expected}); the workflow and the installed packages disagree"
            )


def write_structure_cache(
    hashes: Sequence[str], columns: dict[str, pa.Array], version: str, out_path: str | os.PathLike
) -> None:
    from crucible.core.io import atomic_path

    key_field = pa.field(KEY, pa.string(), nullable=False, metadata={VERSION_KEY: version.encode()})
    fields = [key_field] + [pa.field(name, array.type) for name, array in columns.items()]
    table = pa.Table.from_arrays([pa.array(list(hashes), pa.string()), *columns.values()], schema=pa.schema(fields))
    with atomic_path(out_path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def build_feature_cache(
    data_paths: Sequence[str | os.PathLike],
    out_path: str | os.PathLike,
    prefix: str,
    version: str,
    featurize: Callable[[list[str]], dict[str, pa.Array]],
) -> int:
    """Featurize every distinct structure of ``data_paths`` once; returns the row count.

    ``featurize(structure_jsons)`` returns the cache's value columns, one row per structure.
    """
    out_path = Path(out_path)
    _check_name(out_path, prefix, version)
    t0 = time.perf_counter()
    first = read_structures(data_paths)
    hashes = sorted(first)
    log.info("%s: featurizing %d distinct structures from %d files", prefix, len(hashes), len(data_paths))
    try:
        columns = featurize([first[h][2] for h in hashes])
    except _RowError as exc:
        path, row, _ = first[hashes[exc.index]]
        raise DataValidationError(f"{path}: row {row}: field 'structure': {exc.reason}") from None
    write_structure_cache(hashes, columns, version, out_path)
    log.info("wrote %s (%d rows) in %.2f s", out_path, len(hashes), time.perf_counter() - t0)
    return len(hashes)


class _RowError(Exception):
    def __init__(self, index: int, reason: str) -> None:
        super().__init__(reason)
        self.index, self.reason = index, reason


def _scm_columns(structure_jsons: list[str]) -> dict[str, pa.Array]:
    from tqdm import tqdm

    from crucible.features.sine_coulomb import sine_coulomb_eigenvalues

    parsed = []
    for i, text in enumerate(tqdm(structure_jsons, desc="parse structures", mininterval=5, disable=None)):
        try:
            parsed.append(parse_structure(text))
        except StructureError as exc:
            raise _RowError(i, str(exc)) from None
    eigs = sine_coulomb_eigenvalues(parsed)
    return {
        "n_sites": pa.array([len(p.numbers) for p in parsed], pa.int32()),
        SCM_COLUMN: pa.array([e.tolist() for e in eigs], pa.list_(pa.float64())),
    }


def build_scm_cache(data: Sequence[InFile], out: str | os.PathLike) -> None:
    """Sine Coulomb matrix eigenvalues of every distinct structure of the task tables, computed once.

    Args:
        out: results/features/scm-<version>/{task}.parquet
        data: as in :func:`crucible.features.cache.build_cache`
    """
    build_feature_cache(data, out, "scm", SCM_VERSION, _scm_columns)


def load_structure_cache(path: str | os.PathLike, hashes: Sequence[str], column: str, expected_version: str) -> list:
    """``column`` of the cache for each hash (same order); refuses another version or missing rows."""
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise DataValidationError(f"{path}: cannot read the structure feature cache: {exc}") from exc
    stored = None
    if KEY in schema.names:
        value = (schema.field(KEY).metadata or {}).get(VERSION_KEY)
        stored = value.decode() if value is not None else None
    if stored != expected_version:
        raise StaleCacheError(
            f"{path}: structure feature cache written by version {stored!r}, but this run needs "
            f"{expected_version!r}; rebuild it"
        )
    if column not in schema.names:
        raise DataValidationError(f"{path}: structure feature cache lacks column {column!r}")
    table = pq.read_table(path, columns=[KEY, column])
    position = {h: i for i, h in enumerate(table.column(KEY).to_pylist())}
    missing = [h for h in hashes if h not in position]
    if missing:
        shown = ", ".join(sorted(set(missing))[:5])
        raise DataValidationError(f"{path}: {len(set(missing))} structures are not in the cache (hashes {shown})")
    values = table.column(column).to_pylist()
    return [values[position[h]] for h in hashes]


def load_scm(path: str | os.PathLike, hashes: Sequence[str]) -> list[np.ndarray]:
    return [np.asarray(v, dtype=np.float64) for v in load_structure_cache(path, hashes, SCM_COLUMN, SCM_VERSION)]
