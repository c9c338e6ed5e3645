"""Atomic, typed reads and writes for the files passed between pipeline stages.

Every writer goes through :func:`atomic_path`: the data lands in a temporary file in the
destination folder and is renamed over the target only once complete, so a killed job never
leaves a half-written output that a later run would mistake for a finished one.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

# pandas and pyarrow cost most of a CPU-second to import; the many small jobs that only read
# and write JSON must not pay for them, so the parquet functions import them when called.
if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

# A file a function reads. A stage's parameter annotated so (or list[InFile], InFile | None) is
# its command's input file, the rule's input of that name (crucible.stages.declaration).
InFile = str | os.PathLike


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success.

    On any exception the temporary file is removed and ``path`` is left untouched.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix or ".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        # mkstemp creates the file private (0600); results are shared, so give it the
        # permissions an ordinary file of this user would have.
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


METADATA_PREFIX = "crucible."


def write_parquet(
    df: pd.DataFrame,
    path: str | os.PathLike,
    schema: pa.Schema | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> None:
    """Write ``df`` as parquet atomically, with an explicit arrow schema when given.

    Metadata that changes between runs (pandas index bookkeeping) is dropped so that two runs
    produce byte-identical files. ``metadata`` (JSON-serialisable values, e.g. the provenance of
    the potential that produced the rows) is kept in the file's schema as sorted JSON under
    ``crucible.<key>``: :func:`read_parquet_metadata` reads it back.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, schema=schema, preserve_index=False)
    table = table.replace_schema_metadata(
        {f"{METADATA_PREFIX}{k}": json.dumps(v, sort_keys=True) for k, v in sorted(metadata.items())}
        if metadata
        else None
    )
    with atomic_path(path, ".parquet") as tmp:
        pq.write_table(table, tmp, compression="zstd", write_statistics=True)


def read_parquet(path: str | os.PathLike, columns: list[str] | None = None) -> pd.DataFrame:
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=columns).to_pandas()


def read_parquet_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The ``metadata`` that :func:`write_parquet` stored in ``path`` (empty when none)."""
    import pyarrow.parquet as pq

    stored = pq.read_schema(path).metadata or {}
    prefix = METADATA_PREFIX.encode()
    return {k[len(prefix) :].decode(): json.loads(v) for k, v in sorted(stored.items()) if k.startswith(prefix)}


def write_json(obj: Any, path: str | os.PathLike, indent: int | None = 2) -> None:
    """Write ``obj`` as JSON atomically (sorted keys, trailing newline)."""
    text = json.dumps(obj, indent=indent, sort_keys=True, allow_nan=True) + "\n"
    with atomic_path(path, ".json") as tmp:
        tmp.write_text(text, encoding="utf-8")


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return json.load(fh)
    return json.loads(path.read_text(encoding="utf-8"))


def write_text(text: str, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_bytes(data: bytes, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
