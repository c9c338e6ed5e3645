"""The bounded reading of a user's file: its bytes, its text and its CSV table.

* bytes: at most :func:`max_bytes` after decompression (gzip is read as it inflates, so a small
  file that inflates to gigabytes is refused at the bound, not in a ``MemoryError``); archives
  at most :func:`max_members` members; raise either with ``CRUCIBLE_MAX_INPUT_MB`` /
  ``CRUCIBLE_MAX_INPUT_MEMBERS`` in the environment the workflow runs in;
* text: UTF-8 (a byte-order mark is allowed and dropped); anything else is refused at its byte;
* CSV: a column named twice is refused (pandas would rename it and a reader would take the wrong one).

Every refusal is a :class:`~crucible.core.errors.DataValidationError` naming the file (and the
line or byte), never a traceback. JSON is parsed by :mod:`crucible.core.strict_json`, YAML by
:mod:`crucible.core.yaml_files`, records checked by :mod:`crucible.core.formats`.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import zlib
from pathlib import Path
from typing import Any

from crucible.core.errors import DataValidationError

MAX_BYTES_ENV = "CRUCIBLE_MAX_INPUT_MB"
MAX_MEMBERS_ENV = "CRUCIBLE_MAX_INPUT_MEMBERS"
# A CatBench dataset of every Catalysis-Hub reaction is ~100 MB of JSON; 1 GiB leaves room and
# still stops a gzip bomb long before the machine's memory does.
DEFAULT_MAX_MB = 1024
DEFAULT_MAX_MEMBERS = 1_000_000
# Sample numbers and option indices: int32 is far beyond any k a paper scores, and every table


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if not re.fullmatch(r"[0-9]+", raw) or int(raw) < 1:
        raise DataValidationError(f"environment {name}={raw!r}: a positive whole number expected")
    return int(raw)


def max_bytes() -> int:
    """The most bytes a user file may hold once decompressed."""
    return env_int(MAX_BYTES_ENV, DEFAULT_MAX_MB) * 2**20


def max_members() -> int:
    """The most members (files) an archive or folder of user files may hold."""
    return env_int(MAX_MEMBERS_ENV, DEFAULT_MAX_MEMBERS)


def too_big(where: str, limit: int) -> DataValidationError:
    return DataValidationError(
        f"{where}: more than {limit // 2**20} MB once decompressed; if that is meant, raise the bound "
        f"with {MAX_BYTES_ENV}=<MB> in the environment"
    )


def read_limited(fh: Any, where: str, limit: int | None = None) -> bytes:
    """All of a binary stream, refused past ``limit`` bytes (default :func:`max_bytes`)."""
    limit = max_bytes() if limit is None else limit
    try:
        data = fh.read(limit + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise DataValidationError(f"{where}: not readable ({type(exc).__name__}: {exc})") from None
    if len(data) > limit:
        raise too_big(where, limit)
    return data


def read_bytes(path: str | os.PathLike, limit: int | None = None) -> bytes:
    """A user file's bytes, gunzipped when it is gzip (by its magic number, whatever its name)."""
    path = Path(path)
    try:
        with open(path, "rb") as raw:
            gz = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            if gz:
                with gzip.GzipFile(fileobj=raw) as fh:
                    return read_limited(fh, str(path), limit)
            return read_limited(raw, str(path), limit)
    except FileNotFoundError:
        raise DataValidationError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise DataValidationError(f"{path}: a folder, where a file is expected") from None
    except OSError as exc:
        raise DataValidationError(f"{path}: not readable ({exc.strerror or exc})") from None


def check_size(path: str | os.PathLike, limit: int | None = None) -> None:
    """Refuse a file past the bound once decompressed, reading it in chunks (for files that
    another library then parses itself, such as matminer's datasets)."""
    path = Path(path)
    limit = max_bytes() if limit is None else limit
    total = 0
    try:
        with open(path, "rb") as raw:
            gz = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            fh = gzip.GzipFile(fileobj=raw) if gz else raw
            while chunk := fh.read(2**20):
                total += len(chunk)
                if total > limit:
                    raise too_big(str(path), limit)
    except (OSError, EOFError, zlib.error) as exc:
        raise DataValidationError(f"{path}: not readable ({type(exc).__name__}: {exc})") from None


def decode(data: bytes, where: str) -> str:
    """UTF-8 text (a leading byte-order mark dropped); a byte that is not UTF-8 is named."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataValidationError(f"{where}: line {line}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None


def read_text(path: str | os.PathLike, limit: int | None = None) -> str:
    return decode(read_bytes(path, limit), str(path))


def read_csv(path: str | os.PathLike, encoding: str = "utf-8", limit: int | None = None, **pandas_kwargs: Any):
    """A user's CSV table as a pandas DataFrame: bounded, decoded (``encoding``, a BOM dropped),
    every column named once (pandas would rename a repeated ``yield`` to ``yield.1`` and read
    the wrong one)."""
    import csv

    import pandas as pd

    where = str(path)
    data = read_bytes(path, limit)
    if encoding.replace("-", "").lower() in ("utf8", "utf8sig"):
        text = decode(data, where)
    else:
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError as exc:
            raise DataValidationError(f"{where}: not {encoding} text (byte {exc.start}: {exc.reason})") from None
    header = next(csv.reader(io.StringIO(text)), [])
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:
        raise DataValidationError(f"{where}: line 1: column(s) {', '.join(map(repr, repeated))} named twice")
    try:
        return pd.read_csv(io.StringIO(text), **pandas_kwargs)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise DataValidationError(f"{where}: cannot read as CSV ({type(exc).__name__}: {exc})") from None
