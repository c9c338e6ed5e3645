"""Benchmark items: OpenCompass's MP-20 record plus the shared LLM prompt contract.

One JSON object per line of ``prompts.jsonl``, sorted by id::

    {"id", "messages": [{"role": "system", ...}, {"role": "user", ...}], "meta": {...},
     "response_schema": {...}, "id_ddm", "system_prompt", "user_input",
     "ground_truth": {"lattice": 3x3, "sites": [...]}}

``response_schema`` is the JSON Schema of the answer (:func:`answer_schema`, with the item's
site count), which a language model with ``structured_output`` is held to.

``meta`` holds what the report groups by (formula, nsites, space group, crystal system, whether
the anonymised formula occurs in the training set) and what a generator may read from the
prompt: the element order of the answer, the counts, and the space group only when the prompt
template gives it. Sites are written grouped by element in the formula's order (pymatgen's
electronegativity order), and the prompt tells the model that order, because the scorer takes
species from the reference in reference order.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable

from crucible.core.errors import ConfigError, DataValidationError
from crucible.core.io import InFile, atomic_path
from crucible.core.yaml_files import load_mapping

SYMPREC = 0.1


def load_templates(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    templates = load_mapping(path).get("templates")
    if not isinstance(templates, dict) or not templates:
        raise ConfigError(f"{path}: no 'templates' mapping")
    for name, t in templates.items():
        if not isinstance(t, dict) or not all(isinstance(t.get(k), str) for k in ("system", "user")):
            raise ConfigError(f"{path}: template {name!r} needs 'system' and 'user' text")
    return templates


def get_template(templates: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    if name not in templates:
        raise ConfigError(f"unknown prompt template {name!r}; known: {', '.join(sorted(templates))}")
    return templates[name]


def canonical_order(structure):
    """The structure with sites grouped by element, elements in formula order, stable within."""
    from pymatgen.core import Structure

    order = [el.symbol for el in structure.composition.element_composition.elements]
    rank = {el: i for i, el in enumerate(order)}
    idx = sorted(range(len(structure)), key=lambda i: (rank[structure[i].specie.symbol], i))
    return Structure.from_sites([structure[i] for i in idx]), order


def ground_truth(structure) -> dict[str, Any]:
    return {
        "lattice": [[float(x) for x in row] for row in structure.lattice.matrix],
        "sites": [
            {"element": site.specie.symbol, "fractional_coordinates": [float(x) for x in site.frac_coords]}
            for site in structure
        ],
    }


def spacegroup_analyzer(structure, symprec: float = SYMPREC):
    """pymatgen's ``SpacegroupAnalyzer`` with spglib's errors raised, spglib's current handling:
    its old one (still the default in spglib 2.x) returns None and warns on every call, which
    was most of the test suite's 3,505 warnings. pymatgen turns the raised error into its
    ``SymmetryUndeterminedError``, as it did the None; every caller here catches either."""
    import spglib.error
    from pymatgen.symmetry.analyzer import SpacegroupAnalyzer

    spglib.error.OLD_ERROR_HANDLING = False
    return SpacegroupAnalyzer(structure, symprec=symprec)


def describe(structure) -> dict[str, Any]:
    comp = structure.composition
    try:
        sga = spacegroup_analyzer(structure, symprec=SYMPREC)
        sg_number, sg_symbol, system = (
            sga.get_space_group_number(),
            sga.get_space_group_symbol(),
            sga.get_crystal_system(),
        )
    except Exception:  # noqa: BLE001 - spglib gives up on some cells; P1 is then the honest answer
        sg_number, sg_symbol, system = 1, "P1", "triclinic"
    return {
        "formula": comp.formula.replace(" ", ""),
        "reduced_formula": comp.reduced_formula,
        "anonymized_formula": comp.anonymized_formula,
        "nsites": len(structure),
        "spacegroup_number": int(sg_number),
        "spacegroup_symbol": sg_symbol,
        "crystal_system": system,
    }


def lattice_system(spacegroup_number: int, spacegroup_symbol: str) -> str:
    """The lattice system of a space group (trigonal groups: rhombohedral for R, else hexagonal)."""
    n = int(spacegroup_number)
    for last, name in ((2, "triclinic"), (15, "monoclinic"), (74, "orthorhombic"), (142, "tetragonal")):
        if n <= last:
            return name
    if n <= 167:
        return "rhombohedral" if spacegroup_symbol.startswith("R") else "hexagonal"
    return "hexagonal" if n <= 194 else "cubic"


def _plural(n: int, el: str) -> str:
    return f"the {n} {el} site" + ("s" if n != 1 else "")


LATTICE_KEYS = ("a", "b", "c", "alpha", "beta", "gamma")


def answer_schema(elements: list[str], nsites: int) -> dict[str, Any]:
    """The JSON Schema of an answer to one item (the object inside ``<material>``): the six
    lattice parameters and exactly ``nsites`` sites, each an element of the formula and three
    fractional coordinates. A model with ``structured_output`` can write nothing else, so the
    site count is the item's, not one schema for the whole set."""
    number = {"type": "number"}
    return {
        "type": "object",
        "properties": {
            "lattice_parameters": {
                "type": "object",
                "properties": {k: number for k in LATTICE_KEYS},
                "required": list(LATTICE_KEYS),
                "additionalProperties": False,
            },
            "atomic_sites": {
                "type": "array",
                "minItems": nsites,
                "maxItems": nsites,
                "items": {
                    "type": "object",
                    "properties": {
                        "element": {"type": "string", "enum": list(elements)},
                        "coordinate": {"type": "array", "items": number, "minItems": 3, "maxItems": 3},
                    },
                    "required": ["element", "coordinate"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["lattice_parameters", "atomic_sites"],
        "additionalProperties": False,
    }


def make_item(
    dataset: str, ident: str, structure, template_name: str, template: dict[str, Any], train_anonymized: set[str]
) -> dict[str, Any]:
    structure, order = canonical_order(structure)
    meta = describe(structure)
    counts = [sum(1 for s in structure if s.specie.symbol == el) for el in order]
    lattice = {
        "lattice_system": lattice_system(meta["spacegroup_number"], meta["spacegroup_symbol"]),
        "formula_units": int(structure.composition.get_reduced_composition_and_factor()[1]),
    }
    fields = {
        **meta,
        **lattice,
        "counts": ", ".join(f"{n} {el}" for el, n in zip(order, counts)),
        "site_order": "first " + ", then ".join(_plural(n, el) for el, n in zip(order, counts)),
    }
    try:
        system = template["system"].format(**fields)
        user = template["user"].format(**fields)
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(f"prompt template {template_name!r}: bad placeholder ({exc})") from None
    gives_sg = bool(template.get("gives_spacegroup", False))
    if template.get("gives_lattice_system", False):
        # only where the prompt says it, so that the other templates' items stay as they were
        meta.update({**lattice, "prompt_gives_lattice_system": True})
    meta.update(
        {
            "dataset": dataset,
            "elements": order,
            "element_counts": counts,
            "formula_in_train": meta["anonymized_formula"] in train_anonymized,
            "prompt_template": template_name,
            "prompt_gives_spacegroup": gives_sg,
        }
    )
    return {
        "id": ident,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "meta": meta,
        "response_schema": answer_schema(order, len(structure)),
        "id_ddm": ident,
        "system_prompt": system,
        "user_input": user,
        "ground_truth": ground_truth(structure),
    }


def training_record(ident: str, structure) -> dict[str, Any]:
    structure, _ = canonical_order(structure)
    return {"id": ident, "meta": describe(structure), "ground_truth": ground_truth(structure)}


def write_jsonl(records: Iterable[dict[str, Any]], path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, sort_keys=True, allow_nan=False) + "\n")


def read_jsonl(path: str | os.PathLike) -> list[dict[str, Any]]:
    from crucible.core.strict_json import iter_json_lines

    out = []
    for n, rec in iter_json_lines(path):  # blank lines skipped, as OpenCompass skips them
        if not isinstance(rec.get("id"), str):
            raise DataValidationError(f"{path}: line {n}: needs an object with a string 'id'")
        out.append(rec)
    return out


def build_items(dataset: str, train: list, test: list, template_name: str, template: dict[str, Any]):
    """(prompt items for the test set, training records), both sorted by id."""
    train_records = [training_record(i, s) for i, s in train]
    anonymized = {r["meta"]["anonymized_formula"] for r in train_records}
    items = [make_item(dataset, i, s, template_name, template, anonymized) for i, s in test]
    return items, train_records


def build_item_files(
    source: str,
    dataset: str,
    inputs: list[InFile],
    templates: str | os.PathLike,
    template: str,
    out_prompts: str | os.PathLike,
    out_train: str | os.PathLike,
    test_fraction: float = 0.5,
    seed: int = 0,
    max_sites: int | None = None,
    max_test_items: int = 0,
    max_train_items: int = 0,
    split_by: str = "random",
) -> None:
    """``prompts.jsonl`` (the seeded test items) and ``train.jsonl`` of one crystal set; ``max_sites``
    None: the set's own limit (:func:`crucible.crystal.data.max_sites_for`); crystals over it are
    logged and counted (the audit's summary and table carry the count).

    Args:
        inputs: aflow: the prototypes .json.gz; cdvae: train CSV then test CSV; user: CSV/JSONL (cif column,
            optional id and split) or ASE db (optional key split), several files read as one set
        template: the prompt template's name in --templates, recorded in every item (default: %(default)s)
        out_prompts: the test items to write (JSON lines: the LLM prompt contract plus OpenCompass's fields
            and the reference structure): results/crystal/{dataset}/prompts.jsonl
        out_train: the training split to write (JSON lines: id, meta, ground_truth):
            results/crystal/{dataset}/train.jsonl
        max_train_items: a seeded subset of this many training crystals (default 0: all)
        source: aflow: the AFLOW prototypes of the pinned pymatgen wheel; cdvae: a built-in CDVAE set (mp-20, perov-5,
            carbon-24), checked against its pins; user: your own CSV/JSONL with a cif column or ASE db
        dataset: the dataset's name, written into every item (aflow-prototypes, mp-20, ... or a user dataset's name);
            for cdvae it picks the pinned files the inputs are checked against
        templates: YAML of the versioned prompt templates (default: %(default)s)
        test_fraction: share of the crystals drawn into the test split, 0 < f <= 1, where the rows carry no split of
            their own (default 0.5; the cdvae sets keep their own splits)
        seed: seed of the train/test split (build-items: also of the item subsets; default 0)
        split_by: where the rows carry no split: random (default), or formula (a polymorph-grouped split: every crystal
            of one reduced formula on the same side)
        max_sites: leave out crystals with more sites in the given cell, before the split, counted and logged (default:
            the set's own limit, carbon-24 24, mp-20 and perov-5 20, others 20; 0: keep all)
        max_test_items: a seeded subset of this many test items (default 0: all); the audit scores the same subset and
            chooses the de-duplicated test set among them
    """
    from crucible.crystal import data

    # the dataset's name picks the pinned files a built-in set is checked against
    limit = data.max_sites_for(dataset, max_sites)
    train, test = data.load_dataset(source, inputs, test_fraction, seed, limit, dataset=dataset, split_by=split_by)
    test = data.subsample(test, max_test_items, seed, "max_test_items")
    train = data.subsample(train, max_train_items, seed, "max_train_items")
    prompts, train_records = build_items(
        dataset, train, test, template, get_template(load_templates(templates), template)
    )
    write_jsonl(prompts, out_prompts)
    write_jsonl(train_records, out_train)
