"""The command groups of the ``crucible`` CLI, and the registry of the packages that bring rules.

Each group's ``stages`` module declares its commands (``STAGES``) and its one line of help
(``HELP``). The groups are the shared services' that have commands and no rules
(:data:`SERVICE_GROUPS`), then one per registered package (:data:`FAMILY_PACKAGES`), named as it is.

A framework module (below the CLI) because the code digest (crucible.identity.job_code) and the
rules' shell lines (crucible.stages.declaration) look a command up here without importing the CLI. The
module names are strings, imported only when their group runs: crucible.identity.code_closure counts this
module as a dispatcher, not as an import of every group.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator, Mapping
from pathlib import Path

# The registry: the one line a family adds outside its own package. Each package declares its
# ``FAMILY`` (crucible.dag.families.Family) in its ``workflow.py``; its config section, aggregate
# target, CLI group (its ``stages.py``), name key paths and floor all follow from it. Order: the
# include order of the rule files and the order of rule all's inputs. It lives here, not in
# crucible.dag.families, because every command looks its group up in it, and what a command's
# job imports identifies its results (crucible.identity.job_code): this module is in every job's
# code already, the families' whole declaration is not (and crucible.dag stands above this
# package: it reads the declarations).
FAMILY_PACKAGES = (
    "crucible.matbench",
    "crucible.mlip",
    "crucible.reactions",
    "crucible.llm",
    "crucible.catalysis",
    "crucible.crystal",
    "crucible.discovery",
)

# Services with commands and no rules of their own.
SERVICE_GROUPS = {
    "sources": "crucible.sources.stages",
    "names": "crucible.identity.stages",
    "features": "crucible.features.stages",
}


class _Groups(Mapping[str, str]):
    """``{group: its stages module}``, read from the registry on each look-up (a test that registers
    a family sees its group)."""

    def _all(self) -> dict[str, str]:
        return SERVICE_GROUPS | {p.rpartition(".")[2]: f"{p}.stages" for p in FAMILY_PACKAGES}

    def __getitem__(self, group: str) -> str:
        return self._all()[group]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


GROUPS: Mapping[str, str] = _Groups()


def group_help(group: str) -> str:
    """The group's line of help, its stages module's ``HELP``, read from its source (``ast``):
    ``crucible --help`` lists every group, and importing every group's declarations (registries,
    pymatgen names) would take it from a few tenths of a second to a whole one."""
    module = GROUPS[group]
    spec = importlib.util.find_spec(module)  # imports its package's __init__, not the module
    if spec is None or not spec.origin:
        raise ValueError(f"crucible {group}: no module {module}")
    for node in ast.parse(Path(spec.origin).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["HELP"]:
            return ast.literal_eval(node.value)
    raise ValueError(f'{module}: no HELP = "..." (the group\'s line in crucible --help)')
