"""Pure functions of the config dict that ``workflow/rules/catalysis.smk`` calls: which datasets,
potentials and chunks exist, where each raw input lives, and the final targets.

Config section (validated by the schema)::

    catalysis:
      models: [emt, chgnet-0.3.0]     # default: mlip.models
      seeds: 3
      fmax: 0.05
      max_steps: 999                  # CatBench's n_crit_relax
      gas_max_steps: 500
      mode: basic                     # or oc20
      chunks: 1                       # relaxation jobs per (potential, dataset)
      structure_cache: true           # CatBench's: a shared clean slab is relaxed once per seed
      thresholds: {disp_thrs: 0.5, energy_thrs: 2.0, reproduction_thrs: 0.2,
                   bond_length_change_threshold: 0.2, energy_cutoff: null, gas_shift_min_n: 5}
      datasets:
        MamunHighT2019: {format: catbench-json, url: "https://.../{name}_adsorption.json", sha256: ...}
        hub: {format: cathub-raw, path: raw.json, filtering: catbench}   # or strict: refuse, do not drop
        mine: {format: vasp-tree, path: /data/my_vasp, coefficients: {H: {slab: -1, adslab: 1, H2gas: -0.5}}}
      relative:
        my_surfaces: {task: surface, path: /data/surfaces}
"""

from __future__ import annotations

import json

from crucible.catalysis.calculation import DEFAULTS

THRESHOLD_KEYS = (
    "disp_thrs",
    "energy_thrs",
    "reproduction_thrs",
    "bond_length_change_threshold",
    "energy_cutoff",
    "gas_shift_min_n",
    "time_unit",
)


def section(config: dict) -> dict:
    return dict(config.get("catalysis") or {})


def datasets(config: dict) -> dict[str, dict]:
    return {k: dict(v) for k, v in sorted((section(config).get("datasets") or {}).items())}


def relative_datasets(config: dict) -> dict[str, dict]:
    return {k: dict(v) for k, v in sorted((section(config).get("relative") or {}).items())}


def models(config: dict) -> list[str]:
    cat = section(config)
    if cat.get("models"):
        return list(cat["models"])
    return list((config.get("mlip") or {}).get("models") or [])


def n_chunks(config: dict) -> int:
    return int(section(config).get("chunks", 1))


def relax_params(config: dict) -> str:
    """The relaxation settings as sorted JSON (a rule param: changing one reruns the relaxations)."""
    cat = section(config)
    return json.dumps(
        {k: cat.get(k, v) for k, v in DEFAULTS.items() if k != "chemical_bond_cutoff"}
        | {"chemical_bond_cutoff": (cat.get("thresholds") or {}).get("chemical_bond_cutoff", 6.0)},
        sort_keys=True,
    )


def thresholds(config: dict) -> str:
    cat = section(config)
    thr = {k: v for k, v in (cat.get("thresholds") or {}).items() if k in THRESHOLD_KEYS}
    thr["n_crit_relax"] = int(cat.get("max_steps", DEFAULTS["max_steps"]))
    return json.dumps(thr, sort_keys=True)


def raw_download(name: str, spec: dict) -> str:
    filename = spec["url"].format(name=spec.get("name", name)).rstrip("/").rsplit("/", 1)[-1].split("?")[0]
    return f"resources/catalysis/{name}/{filename}"


def raw_input(config: dict, name: str) -> str:
    """The raw file or folder a dataset is cleaned from: a download for ``url`` datasets."""
    spec = datasets(config)[name]
    if spec.get("url"):
        return raw_download(name, spec)
    return spec["path"]


def check(config: dict) -> list[str]:
    """Problems a dry run should stop on (besides the schema): empty list when fine."""
    problems = []
    for name, spec in datasets(config).items():
        if bool(spec.get("url")) == bool(spec.get("path")):
            problems.append(f"catalysis.datasets.{name}: give exactly one of 'path' or 'url'")
        if spec.get("url") and spec.get("format", "catbench-json") != "catbench-json":
            problems.append(f"catalysis.datasets.{name}: 'url' is only for format catbench-json")
        if spec.get("format") == "vasp-tree" and not spec.get("coefficients"):
            problems.append(f"catalysis.datasets.{name}: format vasp-tree needs 'coefficients'")
    if (datasets(config) or relative_datasets(config)) and not models(config):
        problems.append("catalysis: no potentials (set catalysis.models or mlip.models)")
    return problems


def table_files(name: str) -> list[str]:
    out = []
    for suffix in ("", "_anomaly", "_adsorbates", "_shifted"):
        out += [f"results/tables/catalysis_{name}{suffix}.{ext}" for ext in ("csv", "md", "tex")]
    return out


def figure_files(name: str, model_names: list[str]) -> list[str]:
    out = [f"results/figures/catalysis_{name}_parity{k}.{e}" for k in ("", "_shifted") for e in ("png", "pdf")]
    out += [f"results/figures/catalysis_{name}_sensitivity.{e}" for e in ("png", "pdf")]
    out += [f"results/figures/catalysis_{name}_parity_{m}.png" for m in model_names]
    return out


def final_outputs(config: dict) -> list[str]:
    """Nothing unless a dataset is configured: the default run does not include this benchmark."""
    ms = models(config)
    out: list[str] = []
    for name in datasets(config):
        out += [f"results/catalysis/{name}/reactions.parquet", f"results/catalysis/{name}/card.json"]
        out += table_files(name)
        out += [f"results/tables/catalysis_{name}.xlsx"]
        out += figure_files(name, ms)
    for name, spec in relative_datasets(config).items():
        out += [f"results/tables/catalysis_{spec['task']}_{name}.{e}" for e in ("csv", "md", "tex")]
    return out


def clean_options(spec: dict) -> str:
    """The filtering flags of ``crucible catalysis clean`` for one dataset: CatBench's rules unless
    ``filtering: strict``; a configured ``tolerance`` replaces the rule set's own."""
    flags = f"--filtering {spec.get('filtering', 'catbench')}"
    if spec.get("tolerance") is not None:
        flags += f" --tolerance {float(spec['tolerance'])!r}"
    return flags


def coefficients_arg(spec: dict) -> str:
    """A dataset's stoichiometric coefficients as the one-line JSON the CLI's --coefficients takes."""
    return json.dumps(spec.get("coefficients", {}), sort_keys=True)
