"""Catalysis-Hub's raw reactions, read as CatBench 1.1.6's ``cathub_preprocessing`` reads them.

The file is ``{"raw_reactions": [...]}``, each reaction with ``reactionSystems`` whose
``systems`` carry ``energy``, an ASE-JSON ``InputFile`` and ``constraints``; ``reactants`` /
``products`` give the stoichiometry; ``reactionEnergy`` is the stated reaction energy. Reactions
are filtered as CatBench 1.1.6 filters them (``catbench/adsorption/data/cathub.py``), see
:func:`read_cathub_raw`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from crucible.catalysis.adsorption import (
    TOLERANCE,
    Reaction,
    Reactions,
    Structure,
    assemble_reaction,
    atoms_from_ase_json,
    check_filtering,
    detect_adsorbate_indices,
    finite_float,
    has_fixed_atoms,
    infer_fixed_atoms,
    role_of,
    strict_refusal,
)
from crucible.core import formats, strict_json
from crucible.core.errors import DataValidationError


def _stoichiometry(value: Any, where: str) -> dict[str, float]:
    if isinstance(value, str):
        value = strict_json.parse_json(value, where)
    if not isinstance(value, dict):
        raise DataValidationError(f"{where}: expected name → coefficient, got {value!r}")
    return {str(k): finite_float(v, f"{where}.{k}") for k, v in value.items()}


def _cathub_fixed(constraints: Any, where: str, strict: bool) -> list[int]:
    """Indices of the FixAtoms in a Catalysis-Hub ``constraints`` field (a JSON text holding a
    list of ASE constraint dicts). CatBench reads only FixAtoms and treats text it cannot parse
    as no constraint; strict filtering refuses such a field instead."""
    if constraints in (None, [], ""):
        return []
    if isinstance(constraints, str):
        try:
            constraints = strict_json.parse_json(constraints, where)
        except DataValidationError:
            if strict:
                raise DataValidationError(f"{where}: constraints are not JSON: {constraints[:80]!r}") from None
            return []
    fixed: set[int] = set()
    for c in constraints if isinstance(constraints, list) else [constraints]:
        if strict or (isinstance(c, dict) and c.get("name") == "FixAtoms"):
            formats.check(formats.CATHUB_CONSTRAINT, c, f"{where} constraint {c!r}"[:200])
        if isinstance(c, dict) and c.get("name") == "FixAtoms":
            fixed.update(c["kwargs"]["indices"])
        elif isinstance(c, int) and not isinstance(c, bool):
            fixed.add(c)
        elif strict:
            raise DataValidationError(f"{where}: constraint {c!r} not understood (FixAtoms or atom indices)")
    return sorted(fixed)


def _fix(atoms, indices: list[int]) -> None:
    from ase.constraints import FixAtoms

    atoms.set_constraint(FixAtoms(indices=indices) if indices else None)


def _dedup_signature(node: dict[str, Any]) -> tuple:
    """CatBench's identity of a downloaded reaction: its Catalysis-Hub id, else its content."""
    if node.get("id") is not None:
        return ("id", node["id"])

    def r4(v):
        try:
            return round(float(v), 4)
        except (TypeError, ValueError):
            return None

    systems = tuple(
        sorted((s.get("name"), r4((s.get("systems") or {}).get("energy"))) for s in node.get("reactionSystems") or [])
    )
    return ("content", node.get("Equation"), r4(node.get("reactionEnergy")), systems)


def _energy_sum(energies: dict[str, float], coefficients: dict[str, float]) -> float:
    # summed in the systems' order, as CatBench sums them, so a 1e-3 eV boundary case falls the same way
    total = 0.0
    for name in coefficients:
        total += energies[name] * coefficients[name]
    return total


def _reaction_systems(node: dict[str, Any], where: str, strict: bool) -> dict[str, dict[str, Any]]:
    """name → system (atoms with ``pbc = True`` and their FixAtoms, energy, correction), as
    CatBench builds it: a repeated name keeps its first place and its last value."""
    entries = node.get("reactionSystems")
    if not isinstance(entries, list) or not entries:
        raise DataValidationError(f"{where}: field 'reactionSystems' missing or empty")
    systems: dict[str, dict[str, Any]] = {}
    for entry in entries:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str):
            raise DataValidationError(f"{where}: a reactionSystems entry has no name")
        body = entry.get("systems") or {}
        swhere = f"{where} reactionSystems {name!r}"
        if "InputFile" not in body:
            raise DataValidationError(f"{swhere}: systems.InputFile is required")
        atoms = atoms_from_ase_json(body["InputFile"], swhere)
        atoms.pbc = True
        _fix(atoms, _cathub_fixed(body.get("constraints"), swhere, strict))
        systems[name] = {
            "atoms": atoms,
            "energy": body.get("energy"),
            "correction": entry.get("energyCorrection") or 0.0,
            "where": swhere,
        }
    return systems


def _coefficients(systems, reactants: dict[str, float], products: dict[str, float], strict: bool) -> dict[str, float]:
    """Each system's stoi: −coefficient among the reactants, else +coefficient among the
    products (CatBench); strict sums both for a name that is reactant and product."""
    stoi: dict[str, float] = {}
    for name in systems:
        if strict:
            if name in reactants or name in products:
                stoi[name] = products.get(name, 0.0) - reactants.get(name, 0.0)
        elif name in reactants:
            stoi[name] = -reactants[name]
        elif name in products:
            stoi[name] = products[name]
    return stoi


def _structure_problems(stoi, systems, reactants, products, ignored, strict: bool) -> list[tuple[str, str]]:
    """(rule, reason) of everything that keeps the reaction's structures out of the benchmark."""
    problems = []
    if strict and ignored:
        problems.append(("extra_systems", f"reactionSystems {ignored} are not among the reactants/products"))
    missing = sorted((set(reactants) | set(products)) - set(systems))
    if strict and missing:
        problems.append(("missing_systems", f"no reactionSystems entry for {missing}"))
    stars = [n for n in stoi if "star" in n]
    if len(stars) != 2:
        problems.append(
            ("multi_adsorbate", f"{len(stars) - 1} adslab structures {[n for n in stars if n != 'star']}, expected 1")
        )
    unknown = [n for n in stoi if n != "star" and not n.endswith("star") and not n.endswith("gas")]
    if unknown:
        problems.append(("structure_roles", f"structure key(s) {unknown} are neither 'star', '...star' nor '...gas'"))
    return problems


class _CathubReader:
    """One pass over a file's raw reactions: each step of :func:`read_cathub_raw` either hands
    the reaction on or drops it (``drop``: its row, rule and reason), in CatBench's order."""

    def __init__(self, path: Path, filtering: str, tolerance: float | None):
        self.path = path
        self.strict = filtering == "strict"
        self.tol = TOLERANCE[filtering] if tolerance is None else float(tolerance)
        self.dropped: list[dict[str, Any]] = []
        self.notes: dict[str, Any] = {}
        self.seen: dict[tuple, int] = {}
        self.tags: list[str] = []  # CatBench's id bookkeeping (a filtered reaction is not always taken back)

    def drop(self, row: int, node: dict[str, Any], rid: str | None, rule: str, reason: str) -> None:
        self.dropped.append(
            {
                "reaction_id": rid,
                "cathub_id": node.get("id"),
                "row": row,
                "where": f"{self.path} raw_reactions[{row}]" + (f" ({rid})" if rid else ""),
                "rule": rule,
                "reason": reason,
            }
        )

    def read(self) -> Reactions:
        doc = strict_json.read_json(self.path)
        nodes = doc.get("raw_reactions") if isinstance(doc, dict) else None
        if not isinstance(nodes, list):
            raise DataValidationError(f"{self.path}: field 'raw_reactions' (a list) missing")
        self.notes = {
            "n_input": len(nodes),
            "ignored_systems": [],
            "adslab_coefficient_set_to_1": [],
            "energy_corrections_ignored": [],
            "constraint_source": {},
        }
        out = [r for r in (self.reaction(row, item) for row, item in enumerate(nodes)) if r is not None]
        if self.strict and self.dropped:
            raise strict_refusal(self.path, self.dropped)
        self.notes["constraint_source"] = dict(sorted(self.notes["constraint_source"].items()))
        return Reactions(out, self.dropped, self.notes)

    def reaction(self, row: int, item: Any) -> Reaction | None:
        """Raw reaction ``row`` as a :class:`Reaction`, or None when it is dropped."""
        node = item.get("node", item) if isinstance(item, dict) else None
        where = f"{self.path} raw_reactions[{row}]"
        if not isinstance(node, dict):
            raise DataValidationError(f"{where}: not an object")
        sig = _dedup_signature(node)
        if sig in self.seen:
            self.drop(row, node, None, "duplicate", f"duplicate of raw_reactions[{self.seen[sig]}] (same {sig[0]})")
            return None
        self.seen[sig] = row
        systems = _reaction_systems(node, where, self.strict)
        base, rid = self.reaction_id(node, systems)
        stoi = self.stoichiometry(row, node, rid, systems, where)
        if stoi is None:
            return None
        found = self.energies(row, node, rid, systems, stoi, where)
        if found is None:
            return None
        energies, stated = found
        corrections = {} if self.strict else {n: systems[n]["correction"] for n in stoi if systems[n]["correction"]}
        adslab_key = next(n for n in stoi if "star" in n and n != "star")
        total = _energy_sum(energies, stoi)
        if not self.energy_matches(row, node, rid, base, energies, stoi, stated, total, adslab_key, corrections):
            return None
        if "star" not in stoi:
            self.drop(row, node, rid, "no_clean_slab", "no clean slab ('star'); CatBench 1.1.6 fails such a reaction")
            return None
        slab = systems["star"]["atoms"]
        indices = detect_adsorbate_indices(slab, systems[adslab_key]["atoms"])
        source = self.constraint_source(row, node, rid, systems, adslab_key, indices)
        if source is None:
            return None
        self.notes["energy_corrections_ignored"] += [
            {"reaction_id": rid, "system": n, "energyCorrection": c} for n, c in corrections.items()
        ]
        structures = [Structure(n, role_of(n), stoi[n], energies[n], systems[n]["atoms"]) for n in stoi]
        system = str(node.get("surfaceComposition") or node.get("chemicalComposition") or slab.get_chemical_formula())
        return assemble_reaction(
            rid,
            structures,
            total if stated is None else stated,
            stated,
            system,
            indices,
            where,
            cathub_id=node.get("id"),
            constraint_source=source,
        )

    def reaction_id(self, node: dict[str, Any], systems: dict[str, dict[str, Any]]) -> tuple[str, str]:
        """(base, id): ``<clean-slab formula>_<Equation>``, with ``_1``, ``_2`` … for later
        reactions of the same base, counted as CatBench counts them."""
        first = systems["star"] if "star" in systems else next(iter(systems.values()))
        base = f"{first['atoms'].get_chemical_formula()}_{node.get('Equation')}"
        count = self.tags.count(base)
        self.tags.append(base)
        return base, (base if count == 0 else f"{base}_{count}")

    def stoichiometry(self, row, node, rid: str, systems, where: str) -> dict[str, float] | None:
        """Each entering system's stoi, or None when the reaction is dropped for its
        stoichiometry or its structures; systems outside the reactants/products go to the notes."""
        try:
            reactants = _stoichiometry(node.get("reactants", {}), f"{where}.reactants")
            products = _stoichiometry(node.get("products", {}), f"{where}.products")
        except DataValidationError as exc:
            if self.strict:
                raise
            self.drop(row, node, rid, "bad_stoichiometry", str(exc))
            return None
        stoi = _coefficients(systems, reactants, products, self.strict)
        ignored = [n for n in systems if n not in stoi]
        self.notes["ignored_systems"] += [{"reaction_id": rid, "system": n} for n in ignored]
        problems = _structure_problems(stoi, systems, reactants, products, ignored, self.strict)
        if problems:
            self.drop(row, node, rid, problems[0][0], "; ".join(reason for _, reason in problems))
            return None
        return stoi

    def energies(self, row, node, rid: str, systems, stoi, where: str) -> tuple[dict[str, float], float | None] | None:
        """(energy per system, the stated reaction energy), or None when one is missing; strict
        adds ``energyCorrection`` and takes Σ stoi·E where no reaction energy is stated, as
        crucible's earlier reader did."""
        energies: dict[str, float] = {}
        try:
            for name in stoi:
                swhere = systems[name]["where"]
                energies[name] = finite_float(systems[name]["energy"], f"{swhere}.energy")
                if self.strict:
                    energies[name] += finite_float(systems[name]["correction"], f"{swhere}.energyCorrection")
            stated = node.get("reactionEnergy")
            if stated is not None or not self.strict:
                stated = finite_float(stated, f"{where}.reactionEnergy")
        except DataValidationError as exc:
            self.drop(row, node, rid, "energy_missing", str(exc))
            return None
        return energies, stated

    def energy_matches(self, row, node, rid, base, energies, stoi, stated, total, adslab_key, corrections) -> bool:
        """Whether Σ stoi·E matches the stated energy to the tolerance, after CatBench's one retry
        with the adslab coefficient set to 1 (which then stays in ``stoi``); a mismatch is dropped."""
        if stated is None or not abs(stated - total) > self.tol:
            return True
        retry = None if self.strict else _energy_sum(energies, {**stoi, adslab_key: 1.0})
        if retry is not None and abs(stated - retry) <= self.tol:
            self.notes["adslab_coefficient_set_to_1"].append({"reaction_id": rid, "was": stoi[adslab_key]})
            stoi[adslab_key] = 1.0
            return True
        self.tags.remove(base)  # CatBench takes the id back for this drop only
        also = "" if retry is None else f"; with the adslab coefficient set to 1: {retry:.6f} eV"
        if corrections:
            also += f"; energyCorrection {corrections} not used, as CatBench does not use it"
        self.drop(
            row,
            node,
            rid,
            "stoichiometry_mismatch",
            f"Σ stoi·E = {total:.6f} eV differs from reactionEnergy {stated:.6f} eV by "
            f"{abs(stated - total):.6g} eV (tolerance {self.tol:g}){also}",
        )
        return False

    def constraint_source(self, row, node, rid, systems, adslab_key: str, indices: list[int]) -> str | None:
        """Where the fixed atoms of slab and adslab come from (deposited, geometry_inferred or
        free), inferring them from geometry for a structure without FixAtoms; None when they
        cannot be inferred and the reaction is dropped."""
        slab, adslab = systems["star"]["atoms"], systems[adslab_key]["atoms"]
        lacking = [n for n in ("star", adslab_key) if not has_fixed_atoms(systems[n]["atoms"])]
        source = "deposited"
        if lacking:
            slab_fx, adslab_fx = infer_fixed_atoms(slab, adslab, indices)
            if slab_fx is None:
                self.drop(
                    row,
                    node,
                    rid,
                    "constraints_undetermined",
                    f"{lacking} carry no FixAtoms and the fixed atoms cannot be inferred "
                    f"(the adslab's substrate has {len(adslab) - len(indices)} atoms, the clean slab {len(slab)})",
                )
                return None
            if "star" in lacking and slab_fx:
                _fix(slab, slab_fx)
            if adslab_key in lacking and adslab_fx:
                _fix(adslab, adslab_fx)
            source = "geometry_inferred" if adslab_fx else "free"
        self.notes["constraint_source"][source] = self.notes["constraint_source"].get(source, 0) + 1
        return source


def read_cathub_raw(path: str | os.PathLike, filtering: str = "catbench", tolerance: float | None = None) -> Reactions:
    """Catalysis-Hub raw reactions, read as CatBench 1.1.6's ``cathub_preprocessing`` reads them.

    In CatBench's order: duplicates (same Catalysis-Hub id, else same content) dropped; every
    structure gets ``pbc = True``; the reaction id is ``<clean-slab formula>_<Equation>``
    (``_1``, ``_2`` … for later reactions with the same id, counted as CatBench counts them;
    the Catalysis-Hub id is kept as :attr:`Reaction.cathub_id`); each reaction system named among
    the reactants (stoi −coefficient) or else the products (+coefficient) enters the reaction,
    other systems are ignored (listed in the notes); a reaction without exactly one clean slab
    and one adslab key (``star`` in its name) is dropped as multi-adsorbate; Σ stoi·E must match
    ``reactionEnergy`` to ``tolerance`` (1e-3 eV), else it is tried once more with the adslab
    coefficient set to 1 and dropped if that fails too; ``energyCorrection`` is not used (CatBench
    never downloads it); slab and adslab without FixAtoms get the fixed set inferred from
    geometry (:func:`~crucible.catalysis.adsorption.infer_fixed_atoms`), and are dropped when it
    cannot be inferred.

    ``filtering: strict`` instead refuses the dataset on any of those drops (and on systems
    outside the reactants/products), sums the coefficients of a name that is both reactant and
    product, skips the coefficient retry, checks to 1e-4 eV and adds ``energyCorrection``."""
    check_filtering(filtering)
    return _CathubReader(Path(path), filtering, tolerance).read()
