"""The benchmark families, each declared once: a ``FAMILY`` object in ``crucible/<family>/workflow.py``.

The Snakefile includes every family's rule files and makes one aggregate rule per family (``snakemake
<name>``); ``rule all`` is the union of their final outputs. ``workflow/rules/common.smk`` validates the
config against the union of their schemas, runs their start-up checks and sets their global wildcard
constraints. ``tests/test_workflow_contract.py`` checks every registered family against what this
declaration promises. A new family is its package (with ``workflow.py``, ``config.schema.yaml`` and
``stages.py``), its rule file, and one line in the registry, :data:`crucible.stages.groups.FAMILY_PACKAGES`:
its CLI group (crucible.stages.groups), the key paths of the names its config section defines
(crucible.dag.config_names) and its floor in the import graph (benchmarks/import_graph.py) all
follow from its ``FAMILY``.

A registered package is a benchmark family or, with ``layer="services"``, a service that brings
rules of its own and that families use (``llm``: the language-model inference that crystal and
reactions ask for their responses; families import it, so it stands below them).
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterable

from crucible.stages import groups as _registry

# The one switch every family's section has (crucible.dag.config adds it to each section's schema):
# ``<family>: {enabled: false}`` plans no job of that family, whatever else its section holds.
# It has no default on purpose: absent means on, and a config that does not use it is the config
# it was (the same sections, so the same job params and name meanings).
SWITCH = "enabled"
SWITCH_SCHEMA = {
    "type": "boolean",
    "description": "false: the family plans no job (its targets are empty, its start-up checks are skipped)",
}


def enabled(config: dict[str, Any], name: str) -> bool:
    """Whether family ``name`` is switched on in ``config`` (it is unless its section says ``enabled: false``)."""
    return (config.get(name) or {}).get(SWITCH, True) is not False


def _without_switch(config: dict[str, Any], name: str) -> dict[str, Any]:
    """The config as the family's own functions see it: its section without the switch."""
    sec = config.get(name)
    if not isinstance(sec, dict) or SWITCH not in sec:
        return config
    return {**config, name: {k: v for k, v in sec.items() if k != SWITCH}}


def _switched(
    name: str, fn: Callable[[dict[str, Any]], Any], off: Callable[[], Any]
) -> Callable[[dict[str, Any]], Any]:
    """``fn`` of family ``name``, answering ``off()`` when the family is switched off."""

    @functools.wraps(fn)
    def call(config: dict[str, Any]) -> Any:
        return fn(_without_switch(config, name)) if enabled(config, name) else off()

    return call


def _no_constraints(config: dict[str, Any]) -> dict[str, str]:
    return {}


def _no_names(config: dict[str, Any]) -> dict[str, Any]:
    return {}


# The floors a registered package may stand on (benchmarks/import_graph.py, CONTRIBUTING "Layers").
REGISTERED_LAYERS = ("families", "services")
# A key path inside a family's config section, e.g. ("csp", "samples_files").
KeyPath = tuple[str, ...]


@dataclass(frozen=True)
class Family:
    """What the shared layer needs to know about one benchmark family.

    ``name`` is at once the config section, the aggregate target, the CLI group (``crucible <name>``)
    and the stem of the default rule file, schema and conda env.
    """

    name: str
    package: str
    # Every target of `rule all` (and of `snakemake <name>`) for this config, as paths relative to
    # the working directory; nothing when the family is not configured.
    final_outputs: Callable[[dict[str, Any]], list[str]]
    # Start-up checks on the raw config (after the schema): raise ConfigError naming the key.
    check: Callable[[dict[str, Any]], None]
    # The workflow/report/*.rst captions of the family's report entries.
    captions: tuple[str, ...]
    # Rule files under workflow/rules/, in include order (default: <name>.smk).
    rule_files: tuple[str, ...] = ()
    # Conda envs under envs/ that its rules use (default: <name>.yaml).
    envs: tuple[str, ...] = ()
    # Global wildcard constraints its rules rely on, e.g. matbench's {task} and {fold}. Other
    # families name their wildcards <family>_... and constrain them per rule.
    wildcard_constraints: Callable[[dict[str, Any]], dict[str, str]] = field(default=_no_constraints)
    # More aggregate targets beside `name`, e.g. matbench_data: {target: final outputs of config}.
    extra_targets: dict[str, Callable[[dict[str, Any]], list[str]]] = field(default_factory=dict)
    # What a run of the config builds, for the report's front page: {axis: names}, e.g.
    # {"tasks": [...], "models": [...]}, axes in the order a reader wants them. None: every list
    # of names at the top of the family's config section (crucible.report.front_page.built_by).
    built: Callable[[dict[str, Any]], dict[str, list[str]]] | None = None
    # Every name a run of the config is made of, with its meaning: {"<family>/<kind>/<name>" (or
    # "potential/<name>", "llm/<name>", "<family>/settings"): crucible.identity.name_book.Meaning}. Only the
    # names the run uses: an unused entry means nothing yet. See crucible.identity.name_book.NameBook.
    names: Callable[[dict[str, Any]], dict[str, Any]] = field(default=_no_names)
    # Mappings of its section keyed by the name of what they parameterize, e.g. matbench's
    # model_params: {key: (what, the names it may use, from the raw section)}. The config check
    # (crucible.dag.config_names) refuses a key that names nothing.
    keyed_by_name: dict[str, tuple[str, Callable[[dict[str, Any]], set[str]]]] = field(default_factory=dict)
    # The name of a run of the config, where the family has named runs (matbench.run_name): runs
    # of one results folder that differ in it keep their names' meanings apart (crucible.identity.records).
    run_name: Callable[[dict[str, Any]], str] | None = None
    # What the run's aggregates summarize, one list of names per axis (matbench: its tasks, models
    # and user datasets): a config merged over config/config.yaml that leaves out part of its set
    # and names no run gets a run name of its own (crucible.dag.runs): it never shrinks the full run's.
    run_set: Callable[[dict[str, Any]], Any] | None = None
    # The floor of the package (benchmarks/import_graph.py reads it from this declaration): a
    # benchmark family, or a service with rules that families use and so import (llm).
    layer: str = "families"
    # Key paths inside its section whose names become paths, wildcards or markup, each checked by
    # crucible.dag.config_names.check_name at start-up: mappings whose keys a user defines as new
    # names (matbench's custom_models), lists of names (matbench's models), single names
    # (matbench's run_name).
    defined_names: tuple[KeyPath, ...] = ()
    listed_names: tuple[KeyPath, ...] = ()
    single_names: tuple[KeyPath, ...] = ()

    def __post_init__(self):
        if self.layer not in REGISTERED_LAYERS:
            raise ValueError(f"family {self.name}: layer {self.layer!r} is not one of {', '.join(REGISTERED_LAYERS)}")
        if not self.rule_files:
            object.__setattr__(self, "rule_files", (f"{self.name}.smk",))
        if not self.envs:
            object.__setattr__(self, "envs", (f"{self.name}.yaml",))
        # The switch, the same for every family: off, a family has no targets, no start-up checks,
        # no names and asks no language model; its rules stay defined (nothing asks for them).
        for attr, off in (("final_outputs", list), ("check", lambda: None), ("names", dict)):
            object.__setattr__(self, attr, _switched(self.name, getattr(self, attr), off))
        if self.built is not None:
            object.__setattr__(self, "built", _switched(self.name, self.built, dict))
        targets = {t: _switched(self.name, f, list) for t, f in self.extra_targets.items()}
        object.__setattr__(self, "extra_targets", targets)

    @property
    def schema_file(self):
        """The family's config section schema, inside its package (so the library can read it too)."""
        from importlib.resources import files

        return files(self.package) / "config.schema.yaml"

    def targets(self, config: dict[str, Any]) -> dict[str, list[str]]:
        """Every aggregate target of the family with its inputs: ``name`` first."""
        return {self.name: self.final_outputs(config)} | {t: f(config) for t, f in self.extra_targets.items()}


@lru_cache(maxsize=None)
def families() -> tuple[Family, ...]:
    """Every registered family, in :data:`crucible.stages.groups.FAMILY_PACKAGES` order."""
    found = []
    for package in _registry.FAMILY_PACKAGES:
        family = importlib.import_module(f"{package}.workflow").FAMILY
        if family.package != package or family_package(family.name) != package:
            raise RuntimeError(f"{package}.workflow.FAMILY declares package {family.package!r}, name {family.name!r}")
        found.append(family)
    return tuple(found)


def family_package(name: str) -> str:
    """The package of family ``name``, found without importing any family's workflow module: a job
    that needs one section's schema imports that family's package alone (what it imports is what
    identifies it, crucible.identity.job_code)."""
    for package in _registry.FAMILY_PACKAGES:
        if package.rpartition(".")[2] == name:
            return package
    raise KeyError(f"no benchmark family {name!r} (registered: {', '.join(_registry.FAMILY_PACKAGES)})")


def family(name: str) -> Family:
    for f in families():
        if f.name == name:
            return f
    raise KeyError(f"no benchmark family {name!r} (registered: {', '.join(f.name for f in families())})")


def final_outputs(config: dict[str, Any]) -> list[str]:
    """The inputs of ``rule all``: every family's final outputs, in registry order, each once."""
    seen: dict[str, None] = {}
    for f in families():
        seen.update(dict.fromkeys(f.final_outputs(config)))
    return list(seen)


def run_of(config: dict[str, Any], fams: Iterable[Family]) -> str:
    """Which run of a results folder ``config`` is: ``default``, or its families' run names
    (``matbench=quick``) where one is not the default."""
    from crucible.identity.records import DEFAULT_RUN

    named = []
    for f in fams:
        if f.run_name is not None and enabled(config, f.name) and f.name in config:
            name = f.run_name(config)
            if name != DEFAULT_RUN:
                named.append(f"{f.name}={name}")
    return ",".join(named) or DEFAULT_RUN
