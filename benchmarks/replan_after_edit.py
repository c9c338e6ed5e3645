"""How many jobs a one-line edit replans, from a dry run: per module, or per definition.

    snakemake -n --printshellcmds > dry.txt      (a fresh folder: every job planned)
    python benchmarks/replan_after_edit.py dry.txt [module | module:definition ...]

For each module (default: each family's scoring or analysis module), or one definition of it
(``crucible.models.registry:_gradient_boosting``, a registry entry ``crucible.models.registry:<entry
comp-transformer>``), the jobs whose code digest holds it: exactly those rerun after the edit,
and what is made from their outputs after them (Snakemake's inputs-changed trigger). Each job's
code is its command's closure with the roots its names stand for (its model's entry, a user's
class), read from the CRUCIBLE_JOB that the job's shell line carries -- as the job itself reads it.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter

from crucible.identity.code_closure import taken_definitions
from crucible.identity.job_code import command_roots, normal_roots

DEFAULT_MODULES = (
    "crucible.matbench.scoring",
    "crucible.features.magpie",
    "crucible.crystal.scoring",
    "crucible.crystal.audit",
    "crucible.reactions.scoring",
    "crucible.mlip.eos",
    "crucible.catalysis.analysis",
    "crucible.report.tables",
    "crucible.core.io",
)
COMMAND = re.compile(
    r"(?:CRUCIBLE_JOB='(?P<job>[^']*)'\s+)?(?:[A-Z_]+=(?:'[^']*'|\S+)\s+)*crucible\s+([a-z0-9-]+)\s+([a-z0-9-]+)"
)


def _jobs(text: str) -> list[tuple[str, str, tuple, str]]:
    """``(group, verb, roots, thing)`` of each job; ``thing``: the one model or potential its names
    hold (``matbench/model/dummy``), "" for a job of several (a leaderboard) or none."""
    jobs = []
    for m in COMMAND.finditer(text):
        group, verb = m.group(2), m.group(3)
        if group == "sources":  # downloads: their pin is their identity
            continue
        job = json.loads(m.group("job")) if m.group("job") else {}
        things = sorted(k for k in job.get("names", {}) if re.search(r"(^|/)(model|potential)/", k))
        jobs.append((group, verb, normal_roots(job.get("roots", [])), things[0] if len(things) == 1 else ""))
    return jobs


def _takes(taken: dict, target: str) -> bool:
    module, _, definition = target.partition(":")
    if module not in taken:
        return False
    return not definition or taken[module] is None or definition in taken[module]


def main(argv: list[str]) -> int:
    text = open(argv[0], encoding="utf-8").read()
    targets = argv[1:] or list(DEFAULT_MODULES)
    jobs = _jobs(text)
    closures = {
        (g, v, r): taken_definitions([*command_roots(g, v), *[(m, None if n is None else frozenset(n)) for m, n in r]])
        for g, v, r, _ in set(jobs)
    }
    print(f"{len(jobs)} jobs running a crucible command (downloads left out)")
    for target in targets:
        hits = [(g, v, t) for g, v, r, t in jobs if _takes(closures[(g, v, r)], target)]
        commands = ", ".join(f"{g} {v} ({n})" for (g, v), n in sorted(Counter(h[:2] for h in hits).items()))
        print(f"{target}: {len(hits)} of {len(jobs)} jobs replan -- {commands or 'none'}")
        things = Counter(t or "of several or none" for _, _, t in hits)
        if things:
            print("    by name: " + ", ".join(f"{t} ({n})" for t, n in sorted(things.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
