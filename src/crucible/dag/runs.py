"""A subset or own-model run keeps its aggregates under its own name.

What summarizes a family's configured set (Matbench's leaderboard, task and fold tables,
scaled-error figure, results files) belongs to a run: ``results/`` for the run named ``default``,
``results/runs/<run_name>/`` otherwise (:func:`crucible.matbench.workflow.run_dir`). A config of
the user's merged over ``config/config.yaml`` (``--configfile mine.yaml``, ``make run
CONFIG=mine.yaml``) that names no run and leaves out part of that file's set (a task, a model, a
user dataset) would replace the full run's aggregates with its subset's: the README's own-model
example (2 tasks) rewrote ``results/tables/matbench_leaderboard.md`` and the built-in models'
results files to its 2 tasks. :func:`name_runs` names such a run after its config file instead
(``mine``): its aggregates go to ``results/runs/mine/`` and the full run's stay as they were. A
config that keeps the whole set and adds to it (``config/paper.yaml``, a model of yours beside
the 13 tasks) grows the full run's aggregates in place: nothing is lost.

Why a name and not the full run's aggregates merged with what a subset adds: a table is then
made from its config alone, never from what earlier runs left in ``results/`` (a model dropped
from the config would otherwise stay on the leaderboard for good). Per-(model, task) work is
shared by every run either way, so the subset refits nothing the full run made.

A family takes part by declaring ``run_set`` (what its aggregates summarize) and ``run_name``;
a config that sets ``run_name`` itself (``default`` included) is left as it says.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, Sequence

from crucible.core.errors import CrucibleError
from crucible.identity.records import DEFAULT_RUN

BASE_CONFIG = "config/config.yaml"  # the Snakefile's `configfile:`, under the working directory
RUN_NAME_KEY = "run_name"
_NOT_A_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def name_from_file(path: str | Path) -> str:
    """A run name from a config file's name: its stem (its folder's name for a ``config.yaml``),
    with what a run name may not hold made ``-``."""
    path = Path(path)
    stem = path.stem if path.stem != "config" or not path.parent.name else path.parent.name
    name = _NOT_A_NAME.sub("-", stem).strip("-_.")
    return name or "subset"


def leaves_out(mine: Sequence[Iterable[str]], full: Sequence[Iterable[str]]) -> bool:
    """Whether a run of set ``mine`` lacks a name of set ``full`` (both: a family's ``run_set``,
    one list of names per axis): under the full run's name its aggregates would shrink."""
    return any(not set(f) <= set(m) for m, f in zip(mine, full, strict=True))


def name_runs(
    config: dict[str, Any], families: Iterable[Any], configfiles: Sequence[str | Path], base: str | Path = BASE_CONFIG
) -> list[str]:
    """Set ``<family>.run_name`` in ``config`` (in place) for every family whose configured set
    leaves out part of the one of ``base`` (the config that ``configfiles`` were merged over) and
    whose section names no run; one console line per run so named. Nothing without a ``base`` file or
    without ``configfiles``; a config that does not parse is left to the start-up check."""
    from crucible.core.yaml_files import load_mapping
    from crucible.dag.families import enabled

    if not configfiles or not Path(base).is_file():
        return []
    try:
        base_config = load_mapping(base)
        files = [(Path(f), load_mapping(f)) for f in configfiles]
    except CrucibleError:
        return []
    lines = []
    for family in families:
        run_set = getattr(family, "run_set", None)
        if run_set is None or family.run_name is None:
            continue
        section = config.get(family.name)
        if not isinstance(section, dict) or RUN_NAME_KEY in section or not enabled(config, family.name):
            continue
        if not isinstance(base_config.get(family.name), dict) or not enabled(base_config, family.name):
            continue  # the full run builds none of this family's aggregates: nothing to keep
        try:
            if not leaves_out(run_set(config), run_set(base_config)):
                continue
        except (CrucibleError, KeyError, TypeError, ValueError):
            continue  # an invalid section: the start-up check names what is wrong
        # the last file that says something of the family, else the last file
        own = [path for path, doc in files if isinstance(doc.get(family.name), dict)] or [files[-1][0]]
        name = name_from_file(own[-1])
        if name == DEFAULT_RUN:  # a file called default.yaml: still not the full run
            name = f"{name}-{family.name}"
        section[RUN_NAME_KEY] = name
        lines.append(
            f"crucible: {own[-1]} leaves out part of {base}'s {family.name} set: its aggregates go to "
            f"results/runs/{name}/ ({family.name}.{RUN_NAME_KEY}: {name}), the full run's stay as they are "
            f"({family.name}.{RUN_NAME_KEY}: default replaces them)"
        )
    return lines
