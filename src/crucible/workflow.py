"""Workflow helpers every benchmark family shares: wildcard constraints and shell flags. Pure
functions; ``workflow/rules/common.smk`` calls them. Where raw artifacts are saved and extracted
is ``crucible.sources_workflow``'s; each family's own target lists live in
``crucible/<family>/workflow.py``.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Iterable, Mapping


def alternation(names: Iterable[str]) -> str:
    """A regex matching exactly these names (a wildcard constraint); never-matching when empty."""
    return "|".join(re.escape(n) for n in sorted(names)) or "(?!x)x"


def flag(name: str, value: Any) -> str:
    """``name 'value'`` shell-quoted for a rule's ``params:``; empty when there is no value."""
    if not value:
        return ""
    return f"{name} {shlex.quote(str(value))}"


def job_message(rule: str, wildcard_names: Iterable[str]) -> str:
    """A job's one console line: its rule and wildcards, as a rule's ``message:`` template
    (``predict_matbench model={wildcards.model} ...``); its command is in its log."""
    return " ".join([rule, *(f"{name}={{wildcards.{name}}}" for name in sorted(wildcard_names))])


# How every rule's shell line begins: the job's identity (crucible.identity) in its environment.
JOB_PREFIX = "CRUCIBLE_JOB={params.crucible_job:q} "
_COMMAND = re.compile(r"\s*(?:[A-Z_]+=\S+\s+)*crucible\s+(\S+)\s+(\S+)")


def rule_command(shellcmd: str | None, params: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(group, verb)`` of a rule's ``crucible group verb ...`` shell line (a verb given as
    ``{params.command}`` read from its params); None for a rule that runs no crucible command."""
    match = _COMMAND.match(shellcmd or "")
    if match is None:
        return None
    group, verb = match.groups()
    if verb.startswith("{params.") and verb.endswith("}"):
        verb = str(params[verb[len("{params.") : -1]])
    return group, verb
