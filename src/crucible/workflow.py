"""Workflow helpers every benchmark family shares: where raw artifacts are saved and extracted,
and wildcard constraints. Pure functions; ``workflow/rules/common.smk`` and ``fetch.smk`` call
them. Each family's own target lists live in ``crucible/<family>/workflow.py``.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Iterable

from crucible.errors import ConfigError


def alternation(names: Iterable[str]) -> str:
    """A regex matching exactly these names (a wildcard constraint); never-matching when empty."""
    return "|".join(re.escape(n) for n in sorted(names)) or "(?!x)x"


def flag(name: str, value: Any) -> str:
    """``name 'value'`` shell-quoted for a rule's ``params:``; empty when there is no value."""
    if not value:
        return ""
    return f"{name} {shlex.quote(str(value))}"


def artifact_file(sources: dict[str, Any], name: str) -> str:
    """Where the fetch stage saves artifact ``name`` of ``config/sources.yaml``."""
    return f"resources/downloads/{sources['artifacts'][name]['filename']}"


def artifact_name(sources: dict[str, Any], filename: str, sources_file: str = "config/sources.yaml") -> str:
    """The artifact saved as ``resources/downloads/<filename>``."""
    for name, spec in sources["artifacts"].items():
        if spec["filename"] == filename:
            return name
    raise ConfigError(f"no artifact in {sources_file} is saved as {filename}")


def artifact_members(sources: dict[str, Any], name: str) -> list[str]:
    """The extracted, hash-pinned member files of an archive artifact, sorted."""
    return [f"resources/extracted/{name}/{m}" for m in sorted(sources["artifacts"][name]["members"])]


def member_pin(sources: dict[str, Any], artifact: str, member: str) -> str:
    """The pinned SHA-256 of one extracted member: passed to the job that reads it, which checks it."""
    return sources["artifacts"][artifact]["members"][member]["sha256"]
