"""How many jobs a one-line edit of a library module replans, per family, from a dry run.

    snakemake -n --printshellcmds > dry.txt      (a fresh folder: every job planned)
    python benchmarks/replan_after_edit.py dry.txt [module ...]

For each module (default: each family's scoring or analysis module), the jobs whose command's
code digest holds it (crucible.job_code.code_identity): exactly those rerun after the edit, and
what is made from their outputs after them (Snakemake's inputs-changed trigger).
"""

from __future__ import annotations

import re
import sys
from collections import Counter

from crucible.job_code import code_identity

DEFAULT_MODULES = (
    "crucible.matbench.scoring",
    "crucible.features.magpie",
    "crucible.crystal.scoring",
    "crucible.crystal.audit",
    "crucible.reactions.scoring",
    "crucible.mlip.eos",
    "crucible.catalysis.analysis",
    "crucible.report.tables",
    "crucible.io",
)
COMMAND = re.compile(r"(?:[A-Z_]+=(?:'[^']*'|\S+)\s+)*crucible\s+([a-z0-9-]+)\s+([a-z0-9-]+)")


def main(argv: list[str]) -> int:
    text = open(argv[0], encoding="utf-8").read()
    modules = argv[1:] or list(DEFAULT_MODULES)
    jobs = Counter(m.groups() for m in COMMAND.finditer(text) if m.group(1) != "sources")
    total = sum(jobs.values())
    print(f"{total} jobs running a crucible command (downloads left out)")
    for module in modules:
        hit = {c: n for c, n in jobs.items() if module in code_identity(*c)["modules"]}
        commands = ", ".join(f"{g} {v} ({n})" for (g, v), n in sorted(hit.items()))
        print(f"{module}: {sum(hit.values())} of {total} jobs replan -- {commands or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
