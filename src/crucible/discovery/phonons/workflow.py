"""What the κ part of the DAG builds, as pure functions of the config dict (the rules of
``workflow/rules/discovery.smk`` call these).

Per potential of ``discovery.phonons.potentials`` and material of ``discovery.phonons.materials``:
``relaxed.json`` → ``fc2.json`` → ``fc3_{chunk}.json`` (a job per ``chunk_size`` third-order
displacements) → ``kappa.json``, under ``results/discovery/phonons/{potential}/{material}/``; per
potential its prediction file and scores; over them the table, the per-material table and the
figures. The number of chunks of a material comes from ``displacements.json`` beside this module
(the displacement counts of the pinned structures, which the jobs check), so that planning the DAG
runs no phono3py.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any

from crucible.core.errors import ConfigError
from crucible.dag.config import section
from crucible.dag.rules import alternation
from crucible.discovery.phonons.protocol import PHONONS_FORMAT

DIR = "results/discovery/phonons/{potential}/{material}"
RELAXED = DIR + "/relaxed.json"
FC2 = DIR + "/fc2.json"
FC3 = DIR + "/fc3_{chunk}.json"
KAPPA = DIR + "/kappa.json"
PREDICTIONS = "results/discovery/phonons/{potential}.json.gz"
SCORES = "results/discovery/phonons/{potential}.scores.json"
TABLE = "results/tables/discovery_kappa.{ext}"
MATERIALS_TABLE = "results/tables/discovery_kappa_materials.{ext}"
KAPPA_FIGURE = "results/figures/discovery_kappa_parity.png"
SRME_FIGURE = "results/figures/discovery_kappa_srme.png"
COUNTS = Path(__file__).with_name("displacements.json")
FORMAT = PHONONS_FORMAT  # the rules' param: files of an older meaning rerun


def _section(config: dict[str, Any]) -> dict[str, Any]:
    return section(config, "discovery")["phonons"]


def potentials(config: dict[str, Any]) -> list[str]:
    return list(_section(config)["potentials"])


def chunk_size(config: dict[str, Any]) -> int:
    return int(_section(config)["chunk_size"])


@functools.lru_cache(maxsize=1)
def counts() -> dict[str, dict[str, Any]]:
    """``{mp_id: {desc, name, fc2, fc3}}``: each material's label and displacement counts."""
    return json.loads(COUNTS.read_text(encoding="utf-8"))["materials"]


def materials(config: dict[str, Any]) -> list[str]:
    """The configured materials' mp ids, in the structures file's order."""
    wanted = _section(config)["materials"]
    table = counts()
    if wanted == "all":
        return list(table)
    out: set[str] = set()
    for w in wanted:
        hits = [k for k, v in table.items() if w in (k, v["desc"], v["name"])]
        if not hits:
            raise ConfigError(
                f"config discovery.phonons.materials: {w!r} is no mp id, label (MgO-rs) or name of the set"
            )
        out.update(hits)
    return [k for k in table if k in out]


def n_chunks(config: dict[str, Any], material: str) -> int:
    return max(1, math.ceil(counts()[material]["fc3"] / chunk_size(config)))


def chunk_files(config: dict[str, Any], potential: str, material: str) -> list[str]:
    return [FC3.format(potential=potential, material=material, chunk=c) for c in range(n_chunks(config, material))]


def kappa_files(config: dict[str, Any], potential: str) -> list[str]:
    return [KAPPA.format(potential=potential, material=m) for m in materials(config)]


def scores_files(config: dict[str, Any]) -> list[str]:
    return [SCORES.format(potential=p) for p in potentials(config)]


def potential_pattern(config: dict[str, Any], device: str | None = None) -> str:
    """The ``potential`` constraint of the κ rules; with ``device`` ("cpu" or "gpu"), of a force
    rule's plain (CPU potentials) or ``_neural`` (GPU potentials) variant."""
    if device is None:
        return alternation(potentials(config))
    from crucible.potentials import workflow as potentials_wf

    return alternation(potentials_wf.potentials_on(config, device, potentials(config)))


def material_pattern(config: dict[str, Any]) -> str:
    return alternation(materials(config))


def role_file(role: str) -> str:
    from crucible.sources.pinned_files import resource_path

    return str(resource_path(role))


def check(config: dict[str, Any]) -> None:
    from crucible.potentials import workflow as potentials_wf

    if "discovery" not in config or not potentials(config):
        return
    potentials_wf.check_potential_names(config, potentials(config), "discovery.phonons.potentials")
    materials(config)


def final_outputs(config: dict[str, Any]) -> list[str]:
    if "discovery" not in config or not potentials(config):
        return []
    out = [PREDICTIONS.format(potential=p) for p in potentials(config)]
    out += [TABLE.format(ext=e) for e in ("csv", "md", "tex")]
    out += [MATERIALS_TABLE.format(ext=e) for e in ("csv", "md")]
    return out + [KAPPA_FIGURE, SRME_FIGURE]
