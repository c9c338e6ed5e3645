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

The section is read with the schema's defaults filled in (:func:`crucible.dag.config.section`);
:data:`FAMILY` declares the family to :mod:`crucible.dag.families`.
"""

from __future__ import annotations

import json

from crucible.catalysis.calculation import DEFAULTS
from crucible.core.errors import ConfigError
from crucible.dag import config as _config
from crucible.dag.families import Family
from crucible.dag.rules import alternation

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
    return _config.section(config, "catalysis")


def datasets(config: dict) -> dict[str, dict]:
    return {k: dict(v) for k, v in sorted(section(config)["datasets"].items())}


def relative_datasets(config: dict) -> dict[str, dict]:
    return {k: dict(v) for k, v in sorted(section(config)["relative"].items())}


def models(config: dict) -> list[str]:
    """``catalysis.models``, else the potentials of ``mlip.models``."""
    return list(section(config)["models"] or _config.section(config, "mlip")["models"])


def names(config: dict) -> dict:
    """Every name a catalysis run is made of, with its meaning (see crucible.identity.name_book.NameBook)."""
    from crucible.identity.name_book import Meaning, settings
    from crucible.potentials.workflow import potential_meanings

    if "catalysis" not in config or not (datasets(config) or relative_datasets(config)):
        return {}
    sec = section(config)
    out = {
        "catalysis/settings": Meaning(
            # chunks and the structure cache change how the work is split, not its numbers
            settings(sec, exclude=("datasets", "relative", "chunks", "structure_cache")),
            "catalysis",
            "use another --directory",
        )
    }
    out |= potential_meanings(config, models(config))
    for kind, entries in (("dataset", datasets(config)), ("relative", relative_datasets(config))):
        key = "datasets" if kind == "dataset" else "relative"
        for name, spec in entries.items():
            out[f"catalysis/{kind}/{name}"] = Meaning(
                spec, f"catalysis.{key}.{name}", f"give the set a name of its own under catalysis.{key}"
            )
    return out


def n_chunks(config: dict) -> int:
    return int(section(config)["chunks"])


def relax_params(config: dict) -> str:
    """The relaxation settings as sorted JSON (a rule param: changing one reruns the relaxations)."""
    cat = section(config)
    return json.dumps(
        {k: cat[k] for k in DEFAULTS if k != "chemical_bond_cutoff"}
        | {"chemical_bond_cutoff": cat["thresholds"]["chemical_bond_cutoff"]},
        sort_keys=True,
    )


def thresholds(config: dict) -> str:
    cat = section(config)
    thr = {k: v for k, v in cat["thresholds"].items() if k in THRESHOLD_KEYS}
    thr["n_crit_relax"] = int(cat["max_steps"])
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


def problems(config: dict) -> list[str]:
    """Problems a dry run should stop on (besides the schema): empty list when fine."""
    from crucible.potentials.workflow import potential_names

    problems = []
    for name, spec in datasets(config).items():
        if bool(spec.get("url")) == bool(spec.get("path")):
            problems.append(f"catalysis.datasets.{name}: give exactly one of 'path' or 'url'")
        if spec.get("url") and spec["format"] != "catbench-json":
            problems.append(f"catalysis.datasets.{name}: 'url' is only for format catbench-json")
        if spec["format"] == "vasp-tree" and not spec["coefficients"]:
            problems.append(f"catalysis.datasets.{name}: format vasp-tree needs 'coefficients'")
    if (datasets(config) or relative_datasets(config)) and not models(config):
        problems.append("catalysis: no potentials (set catalysis.models or mlip.models)")
    known = potential_names(config)
    unknown = [m for m in models(config) if m not in known]
    if unknown and (datasets(config) or relative_datasets(config)):
        problems.append(
            f"catalysis.models: unknown potential(s) {', '.join(unknown)} (registered or under potentials: "
            f"{', '.join(known)})"
        )
    return problems


def check(config: dict) -> None:
    for problem in problems(config):
        raise ConfigError(problem)


def wildcard_constraints(config: dict, relative: bool = False, device: str | None = None) -> dict[str, str]:
    """The catalysis rules' constraints (per rule): wildcards match only configured names, so that
    e.g. catalysis_{dataset}_anomaly.csv can never be read as a dataset called "X_anomaly";
    ``device``: the potentials of a relaxation rule's CPU or GPU variant (from their specs)."""
    from crucible.potentials.workflow import potentials_on

    name = "rel_dataset" if relative else "cat_dataset"
    names = models(config) if device is None else potentials_on(config, device, models(config))
    return {
        name: alternation(relative_datasets(config) if relative else datasets(config)),
        "cat_model": alternation(names),
    }


def dataset_spec(config: dict, name: str, relative: bool = False) -> dict:
    return (relative_datasets(config) if relative else datasets(config))[name]


def sha256(config: dict, name: str) -> str:
    """A dataset's pin ("" for none): the fetch job checks the download, the clean job the file
    it reads."""
    return dataset_spec(config, name).get("sha256") or ""


def download_url(config: dict, name: str) -> str:
    spec = datasets(config)[name]
    return spec["url"].format(name=spec.get("name", name))


def chunk_files(config: dict, name: str, model: str) -> list[str]:
    """The relaxation chunks of one (dataset, potential): the inputs of its analysis."""
    return [f"results/catalysis/{name}/calc/{model}/chunk_{k}.json" for k in range(n_chunks(config))]


def analysis_files(config: dict, name: str, ext: str = "json") -> list[str]:
    """Every potential's analysis of a dataset (``json``) or its per-reaction table (``parquet``)."""
    return [f"results/catalysis/{name}/analysis/{m}.{ext}" for m in models(config)]


def relative_files(config: dict, name: str) -> list[str]:
    return [f"results/catalysis/relative/{name}/{m}.parquet" for m in models(config)]


# The tasks of `catalysis.relative` entries (the schema's enum; crucible.catalysis.RELATIVE_TASKS).
RELATIVE_TASKS = "surface|bulk_formation"


def relative_table_prefix(task: str, name: str) -> str:
    """``results/tables/catalysis_<task>_<name>``: the CSV, Markdown and LaTeX tables get its suffixes."""
    return f"results/tables/catalysis_{task}_{name}"


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
        out += [f"{relative_table_prefix(spec['task'], name)}.{e}" for e in ("csv", "md", "tex")]
    return out


def tolerance(spec: dict) -> str:
    """A dataset's configured energy tolerance (eV), "" for the filtering rule set's own."""
    return "" if spec.get("tolerance") is None else repr(float(spec["tolerance"]))


def custom_potentials(config: dict, model: str) -> str:
    """The user's potential ``model`` as JSON ``{model: entry}``; "" for a registered one."""
    from crucible.potentials.workflow import custom_potential_json

    return custom_potential_json(config, model)


def potential_sources(config: dict, model: str) -> list[str]:
    """A user's potential's source file beside the project (editing it reruns its jobs)."""
    from crucible.potentials.workflow import custom_potential_sources

    return custom_potential_sources(config, model)


def coefficients_arg(spec: dict) -> str:
    """A dataset's stoichiometric coefficients as the one-line JSON the CLI's --coefficients takes."""
    return json.dumps(spec["coefficients"], sort_keys=True)


FAMILY = Family(
    name="catalysis",
    package="crucible.catalysis",
    final_outputs=final_outputs,
    check=check,
    envs=("mlip.yaml", "fetch.yaml"),
    captions=(
        "catalysis_table.rst",
        "catalysis_anomaly.rst",
        "catalysis_adsorbates.rst",
        "catalysis_shifted.rst",
        "catalysis_workbook.rst",
        "catalysis_parity.rst",
        "catalysis_sensitivity.rst",
        "catalysis_relative.rst",
    ),
    built=lambda c: {
        "datasets": list(datasets(c)),
        "relative-energy sets": list(relative_datasets(c)),
        "potentials": models(c),
    },
    names=names,
    defined_names=(("datasets",), ("relative",)),
    listed_names=(("models",),),
)
