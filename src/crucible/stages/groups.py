"""The command groups of the ``crucible`` CLI: each group's module and one line of help.

A framework module (below the CLI) because the code digest (crucible.identity.job_code) and the
rules' shell lines (crucible.stages.declaration) look a command up here without importing the CLI. The
module names are strings, imported only when their group runs: crucible.identity.code_closure counts this
module as a dispatcher, not as an import of every group.
"""

from __future__ import annotations

GROUPS: dict[str, tuple[str, str]] = {
    "sources": ("crucible.sources.stages", "fetch raw artifacts and verify their SHA-256"),
    "names": ("crucible.identity.stages", "what each configured name means in this results folder; forget one"),
    "matbench": ("crucible.matbench.stages", "Matbench v0.1: clean, folds, predict, score, results file"),
    "features": ("crucible.features.stages", "composition and structure features, one file per task table"),
    "mlip": ("crucible.mlip.stages", "interatomic potentials: EOS benchmark, s2ef metrics"),
    "reactions": ("crucible.reactions.stages", "reaction-condition selection: clean, questions, baselines, score"),
    "llm": ("crucible.llm.stages", "language-model inference: prompts.jsonl -> responses/{model}.jsonl"),
    "catalysis": ("crucible.catalysis.stages", "adsorption, surface and formation energies (CatBench semantics)"),
    "crystal": ("crucible.crystal.stages", "text-to-crystal: items, generators, OpenCompass MP-20 scoring"),
    "discovery": ("crucible.discovery.stages", "Matbench Discovery: diatomics curves and table, the discovery scorer"),
}
