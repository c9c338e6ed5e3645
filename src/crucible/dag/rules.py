"""What every rule of every family shares: wildcard alternations, priorities, job messages and
every rule's job identity. Pure functions; ``workflow/rules/common.smk`` calls them. Where raw artifacts are saved and extracted
is ``crucible.sources.workflow``'s; each family's own target lists live in
``crucible/<family>/workflow.py``.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from crucible.stages.declaration import JOB_PREFIX

__all__ = ["JOB_PREFIX", "PRIORITY", "alternation", "attach_identity", "job_message", "rule_command"]

# A rule's ``priority:``. Among ready jobs Snakemake's greedy scheduler starts the one of highest
# priority, then of largest inputs: cheap jobs that unlock others come first, so that the long
# fits keep every core busy to the end and a run does not close on a chain of small jobs.
PRIORITY = {"prepare": 3, "quick_fit": 2, "summarize": 1, "fit": 0}


def alternation(names: Iterable[str]) -> str:
    """A regex matching exactly these names (a wildcard constraint); never-matching when empty."""
    return "|".join(re.escape(n) for n in sorted(names)) or "(?!x)x"


def job_message(rule: str, wildcard_names: Iterable[str]) -> str:
    """A job's one console line: its rule and wildcards, as a rule's ``message:`` template
    (``predict_matbench model={wildcards.model} ...``); its command is in its log."""
    return " ".join([rule, *(f"{name}={{wildcards.{name}}}" for name in sorted(wildcard_names))])


_COMMAND = re.compile(r"\s*(?:[A-Z_]+=\S+\s+)*crucible\s+(\S+)\s+(\S+)")


def rule_command(shellcmd: str | None) -> tuple[str, str] | None:
    """``(group, verb)`` of a rule's ``crucible group verb ...`` shell line (crucible.stages.declaration.shell);
    None for a rule that runs no crucible command."""
    match = _COMMAND.match(shellcmd or "")
    return None if match is None else (match.group(1), match.group(2))


def attach_identity(smk_rule: Any, names: Any, rule_families: Mapping[str, str]) -> None:
    """Hand every job of a Snakemake rule its identity (crucible.identity.records): the command's code
    digest and the meanings of the names its wildcards hold as the param ``crucible_identity``
    (so that a change of either reruns it: Snakemake's params trigger compares only params not
    made from inputs or outputs), and with its inputs and outputs as ``crucible_job``, which the
    rule's shell line passes to the command as CRUCIBLE_JOB. Downloads are left alone (their
    pinned SHA-256 is their identity), and so is a rule that runs no crucible command."""
    import os

    from crucible.core.errors import ConfigError
    from crucible.identity.job_state import planned_state
    from crucible.identity.records import job_env, job_identity

    command = rule_command(smk_rule.shellcmd)
    if command is None or command[0] == "sources":
        return
    if not smk_rule.shellcmd.startswith(JOB_PREFIX):
        raise ConfigError(f"rule {smk_rule.name}: its shell line must begin {JOB_PREFIX}")
    group, verb = command
    family = rule_families.get(os.path.basename(smk_rule.snakefile), group)
    rule_name = smk_rule.name

    # What the records of a job's outputs say it ran and read, checked again (a param made of
    # wildcards alone: Snakemake's params trigger compares no param made from inputs or outputs).
    def planned(wildcards):
        return planned_state(rule_name, map(str, smk_rule.expand_output(wildcards)[0]))

    def crucible_identity(wildcards):
        chosen = names.for_job(family, list(wildcards), rule_name)
        return job_identity(group, verb, chosen, names.code_of(chosen), planned(wildcards))

    def crucible_job(wildcards, input, output):
        chosen = names.for_job(family, list(wildcards), rule_name)
        return job_env(
            group, verb, chosen, list(input), list(output), names.code_of(chosen), rule_name, planned(wildcards)
        )

    # The files a user declared that the things of its names read (``files:``): inputs of the job,
    # shown in the DAG, hashed into its record and rerun by Snakemake when newer.
    def crucible_files(wildcards):
        return list(names.declared_files(names.for_job(family, list(wildcards), rule_name)))

    smk_rule.set_input(crucible_files=crucible_files)
    smk_rule.set_params(crucible_identity=crucible_identity, crucible_job=crucible_job)
