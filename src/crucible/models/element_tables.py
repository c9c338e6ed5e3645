"""Element embedding tables of the composition networks: a pinned table by name (``mat2vec``,
``magpie``: the members of config/sources.yaml whose role is ``element-table/<name>``) or a
CSV of the user's own. No torch import: the workflow calls this at parse time.
"""

from __future__ import annotations

import os
from pathlib import Path

from crucible.sources import pinned_files

DEFAULT_TABLE = "mat2vec"
ROLE_PREFIX = "element-table/"


def builtin_tables() -> list[str]:
    """The names of the pinned tables, sorted."""
    return [role.removeprefix(ROLE_PREFIX) for role in pinned_files.roles(prefix=ROLE_PREFIX)]


def table_file(table: str) -> str:
    """Where the table named ``table`` is extracted (a rule's input); a user's path as given."""
    if table in builtin_tables():
        return str(pinned_files.resource_path(ROLE_PREFIX + table))
    return table


def checked_table(table: str | None, path: str | os.PathLike | None) -> Path:
    """``path``, the file of the element table ``table`` (default mat2vec): checked against its
    pin when ``table`` names a pinned table (``path`` None: where the fetch stage extracts it),
    as given when it is the user's own CSV."""
    table = table or DEFAULT_TABLE
    if table in builtin_tables():
        return pinned_files.pinned(ROLE_PREFIX + table, path)
    return Path(path if path is not None else table)
