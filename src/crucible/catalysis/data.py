"""Adsorption-energy datasets: read any supported source, clean into one table + an ASE database.

Three readers give the same :class:`Reaction` records:

* :func:`read_catbench_json` — CatBench's own ``{name}_adsorption.json`` (what its
  ``cathub_preprocessing`` / ``get_benchmark`` write): ``{reaction: {"raw": {key: {"stoi",
  "energy_ref", "atoms_json"}}, "ref_ads_eng", "adsorbate_indices"}}``, or, since CatBench 1.1.1
  (``catbench/utils/data_utils.py``, ``save_catbench_json``), the same with every structure
  stored once in a top-level ``_structures`` map and each system pointing to it by ``ref``;
  ``.json.gz`` is read too.
* :func:`read_cathub_raw` — Catalysis-Hub's raw reactions (``{"raw_reactions": [...]}``, each
  with ``reactionSystems`` whose ``systems`` carry ``energy``, an ASE-JSON ``InputFile`` and
  ``constraints``; ``reactants``/``products`` give the stoichiometry; ``reactionEnergy`` is the
  stated reaction energy), filtered as CatBench 1.1.6's ``cathub_preprocessing`` filters them
  (``catbench/adsorption/data/cathub.py``), see :func:`read_cathub_raw`.
* :func:`read_vasp_tree` — a user's VASP folders (``gas/{X}gas/``, ``{system}/slab/``,
  ``{system}/{adsorbate}/{site}/``, each with CONTCAR + OSZICAR) and a stoichiometry map.
  Selective-Dynamics flags become ``FixAtoms`` through ASE's POSCAR reader. Unlike CatBench's
  preprocessing, which deletes every other file, this only ever opens files for reading.

Structure keys follow CatBench: ``star`` is the clean slab, ``{adsorbate}star`` the adslab, keys
ending in ``gas`` are gas references; E_ads = Σ stoi·E.

Filtering (``filtering``): ``catbench`` (default) drops what CatBench drops, for CatBench's
reasons, and lists every dropped reaction with its reason (CatBench only logs them);
``strict`` refuses the whole dataset instead, checks Σ stoi·E to 1e-4 eV without CatBench's
adslab-coefficient retry, and adds Catalysis-Hub's ``energyCorrection`` to each energy, as
crucible did before.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from crucible import formats
from crucible.errors import DataValidationError

log = logging.getLogger(__name__)

FORMATS = ("catbench-json", "cathub-raw", "vasp-tree")
FILTERINGS = ("catbench", "strict")
DEFAULT_ENERGY_SOURCE = "DFT, as given by the source"
# |Σ stoi·E − reactionEnergy| allowed (eV): CatBench's cathub_preprocessing, and crucible's own.
TOLERANCE = {"catbench": 1e-3, "strict": 1e-4}
# An adslab substrate atom that sits within this distance (Å) of a clean-slab atom of its element
# never moved in DFT, so it was held fixed: CatBench's fix_detect_tol.
FIX_DETECT_TOL = 1e-4


@dataclass
class Structure:
    key: str  # CatBench key: "star", "{ads}star", "{X}gas"
    role: str  # "slab" | "adslab" | "gas"
    stoi: float
    dft_energy: float
    atoms: Any  # ase.Atoms (constraints kept)


@dataclass
class Reaction:
    reaction_id: str
    adsorbate: str
    system: str
    dft_ads_eng: float
    stated_energy: float | None
    structures: list[Structure]
    adsorbate_indices: list[int] = field(default_factory=list)
    cathub_id: str | None = None  # the Catalysis-Hub node id, where the source had one
    # where the slab's fixed atoms came from: deposited | geometry_inferred | free (CatBench's words)
    constraint_source: str | None = None

    def energy_sum(self) -> float:
        return float(sum(s.stoi * s.dft_energy for s in self.structures))

    def by_role(self, role: str) -> list[Structure]:
        return [s for s in self.structures if s.role == role]


class Reactions(list):
    """The reactions a reader kept (sorted by id), with what it dropped and why (``dropped``:
    one dict per reaction, ``reason`` in words and ``rule`` as a short code) and what it changed
    or ignored on the way (``notes``)."""

    def __init__(self, reactions: Iterable[Reaction] = (), dropped=None, notes=None):
        super().__init__(sorted(reactions, key=lambda r: r.reaction_id))
        self.dropped: list[dict[str, Any]] = list(dropped or [])
        self.notes: dict[str, Any] = dict(notes or {})


def role_of(key: str) -> str:
    if key == "star" or key == "slab":
        return "slab"
    if key.endswith("gas"):
        return "gas"
    if key.endswith("star"):
        return "adslab"
    raise ValueError(f"structure key {key!r} is neither 'star', '...star' nor '...gas'")


def detect_adsorbate_indices(slab, adslab) -> list[int]:
    """Adslab atoms that the clean slab lacks: every atom of an element the slab does not have,
    and for an element the adslab has more of, the extra ones highest along z (ties: lower index
    first), as CatBench's ``detect_adsorbate_indices`` chooses them."""
    slab_count = Counter(slab.get_chemical_symbols())
    chosen: set[int] = set()
    symbols = adslab.get_chemical_symbols()
    for element, count in sorted(Counter(symbols).items()):
        extra = count - slab_count.get(element, 0)
        if extra <= 0:
            continue
        idx = [i for i, s in enumerate(symbols) if s == element]
        idx.sort(key=lambda i: (-adslab.positions[i, 2], i))
        chosen.update(idx[:extra])
    return sorted(chosen)


def infer_fixed_atoms(slab, adslab, adsorbate_indices, tol: float = FIX_DETECT_TOL):
    """(slab fixed indices, adslab fixed indices) from geometry alone, or (None, None) when the
    adslab's substrate does not correspond atom for atom to the clean slab.

    A DFT code that holds atoms fixed reuses their coordinates, so a fixed substrate atom of the
    adslab sits exactly on a clean-slab atom of its element (minimum image in the adslab's cell),
    while a free one relaxes differently once an adsorbate is there. This is the rule of
    CatBench's ``_fixed_indices_from_relaxation``; empty lists mean a slab relaxed freely."""
    from ase.geometry import find_mic

    ads = {int(i) for i in adsorbate_indices}
    substrate = [i for i in range(len(adslab)) if i not in ads]
    if len(substrate) != len(slab):
        return None, None
    slab_symbols = np.asarray(slab.get_chemical_symbols())
    symbols = adslab.get_chemical_symbols()
    slab_fixed, adslab_fixed = set(), []
    for i in substrate:
        candidates = np.flatnonzero(slab_symbols == symbols[i])
        if not candidates.size:
            continue
        vectors, _ = find_mic(slab.positions[candidates] - adslab.positions[i], adslab.cell)
        dist = np.linalg.norm(vectors, axis=1)
        nearest = int(dist.argmin())
        if dist[nearest] < tol:
            adslab_fixed.append(i)
            slab_fixed.add(int(candidates[nearest]))
    return sorted(slab_fixed), sorted(adslab_fixed)


def _has_fixed_atoms(atoms) -> bool:
    from ase.constraints import FixAtoms

    return any(isinstance(c, FixAtoms) and len(c.get_indices()) > 0 for c in atoms.constraints)


def _atoms_from_ase_json(text: str, where: str):
    from ase.io import read

    try:
        return read(io.StringIO(text), format="json")
    except Exception as exc:
        raise DataValidationError(f"{where}: cannot read the ASE-JSON structure: {exc}") from exc


def _load_json(path: Path) -> Any:
    return formats.read_json(path)


def _float(value: Any, where: str) -> float:
    # crucible.formats' rule for numbers in text: a number written in other digits is refused
    if isinstance(value, bool) or (isinstance(value, str) and formats.non_ascii_digits(value)):
        raise DataValidationError(f"{where}: not a number: {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise DataValidationError(f"{where}: not a number: {value!r}") from None
    if not math.isfinite(out):
        raise DataValidationError(f"{where}: not finite: {value!r}")
    return out


def _finish(
    rid: str,
    structures: list[Structure],
    dft: float,
    stated: float | None,
    system: str,
    indices: list[int] | None,
    where: str,
    cathub_id: str | None = None,
    constraint_source: str | None = None,
) -> Reaction:
    slabs = [s for s in structures if s.role == "slab"]
    adslabs = [s for s in structures if s.role == "adslab"]
    if len(adslabs) != 1:
        raise DataValidationError(
            f"{where}: reaction {rid!r} needs exactly one adslab ('...star') structure, has {len(adslabs)}"
        )
    if len(slabs) > 1:
        raise DataValidationError(f"{where}: reaction {rid!r} has {len(slabs)} clean slabs")
    adsorbate = adslabs[0].key[: -len("star")]
    if indices is None:
        indices = detect_adsorbate_indices(slabs[0].atoms, adslabs[0].atoms) if slabs else []
    n_atoms = len(adslabs[0].atoms)
    outside = [i for i in indices if not 0 <= i < n_atoms]
    if outside:
        raise DataValidationError(
            f"{where}: field adsorbate_indices: {outside} not atoms of the adslab ({n_atoms} atoms, 0..{n_atoms - 1})"
        )
    structures = sorted(structures, key=lambda s: ({"slab": 0, "adslab": 1, "gas": 2}[s.role], s.key))
    return Reaction(
        rid, adsorbate, system, dft, stated, structures, [int(i) for i in indices], cathub_id, constraint_source
    )


def _strict_refusal(path: Path, dropped: list[dict[str, Any]]) -> DataValidationError:
    lines = [f"  {d['where']}: {d['reason']}" for d in dropped[:10]]
    more = f"\n  ... and {len(dropped) - 10} more" if len(dropped) > 10 else ""
    return DataValidationError(
        f"{path}: {len(dropped)} reaction(s) cannot be used as they are (filtering: strict refuses the "
        f"dataset; filtering: catbench would drop them and list them in the card):\n" + "\n".join(lines) + more
    )


# ---------------------------------------------------------------------------------------------
# CatBench's JSON


def _catbench_roles(rid: str, raw: dict[str, Any]) -> str | None:
    """Why CatBench 1.1.6 could not benchmark this reaction as stored, or None."""
    keys = list(raw)
    bad = [k for k in keys if k != "star" and not k.endswith("star") and not k.endswith("gas")]
    if bad:
        return f"structure key(s) {bad} are neither 'star', '...star' nor '...gas'"
    adslabs = [k for k in keys if k != "star" and k.endswith("star")]
    if len(adslabs) != 1:
        return f"{len(adslabs)} adslab structures {adslabs}, CatBench benchmarks single-adsorbate reactions"
    if "star" not in keys:
        return "no clean slab ('star'): CatBench measures adsorption relative to a clean surface"
    return None


def read_catbench_json(path: str | os.PathLike, filtering: str = "catbench") -> Reactions:
    """Both CatBench layouts (verbatim ``atoms_json`` per system, or the deduplicated
    ``_structures`` + ``ref`` of CatBench ≥ 1.1.1). Reactions CatBench could not benchmark
    (several adslabs, no clean slab, a key that is no structure role) are dropped with their
    reason, or refused with ``filtering: strict``."""
    path = Path(path)
    _check_filtering(filtering)
    doc = _load_json(path)
    if not isinstance(doc, dict):
        raise DataValidationError(f"{path}: expected an object of reactions, got {type(doc).__name__}")
    shared = formats.check(formats.CATBENCH_STRUCTURES, doc.get("_structures", {}), f"{path} '_structures'")
    # CatBench treats every top-level key starting with '_' as bookkeeping, not a reaction.
    out, dropped = [], []
    for rid in sorted(k for k in doc if not k.startswith("_")):
        entry = doc[rid]
        where = f"{path} reaction {rid!r}"
        formats.check(formats.CATBENCH_REACTION, entry, where)
        raw = entry["raw"]
        why = _catbench_roles(rid, raw)
        if why is not None:
            dropped.append({"reaction_id": rid, "where": where, "rule": "structure_roles", "reason": why})
            continue
        structures = []
        for key in sorted(raw):
            item = raw[key]
            if not isinstance(item, dict):
                raise DataValidationError(f"{where} structure {key!r}: not an object")
            for needed in ("stoi", "energy_ref"):
                if needed not in item:
                    raise DataValidationError(f"{where} structure {key!r}: field {needed!r} missing")
            if "atoms_json" in item:
                text = item["atoms_json"]
            elif "ref" in item:
                text = shared.get(item["ref"])
                if text is None:
                    raise DataValidationError(
                        f"{where} structure {key!r}: ref {item['ref']!r} is not in the file's '_structures' map "
                        "(truncated or edited file?)"
                    )
            else:
                raise DataValidationError(f"{where} structure {key!r}: field 'atoms_json' (or 'ref') missing")
            structures.append(
                Structure(
                    key,
                    role_of(key),
                    _float(item["stoi"], f"{where} {key}.stoi"),
                    _float(item["energy_ref"], f"{where} {key}.energy_ref"),
                    _atoms_from_ase_json(text, f"{where} {key}.atoms_json"),
                )
            )
        if "ref_ads_eng" not in entry:
            raise DataValidationError(f"{where}: field 'ref_ads_eng' missing")
        ref = _float(entry["ref_ads_eng"], f"{where} ref_ads_eng")
        out.append(
            _finish(
                rid,
                structures,
                ref,
                ref,
                rid.split("_")[0],
                entry.get("adsorbate_indices"),
                where,
                constraint_source=entry.get("constraint_source"),
            )
        )
    if filtering == "strict" and dropped:
        raise _strict_refusal(path, dropped)
    return Reactions(out, dropped, {"n_input": len(out) + len(dropped)})


def _ase_json(atoms) -> str:
    """ASE's JSON text of ``atoms`` without what changes from run to run (the database's
    creation and modification times, user and random unique id), so equal structures give equal
    text and files are byte-identical across runs."""
    from ase.io import write

    buf = io.StringIO()
    write(buf, atoms, format="json")
    text = buf.getvalue()
    text = re.sub(r'"(ctime|mtime)": [^,\n]+', r'"\1": 0.0', text)
    text = re.sub(r'"user": [^,\n}]+', '"user": null', text)
    digest = hashlib.sha256(re.sub(r'"unique_id": "[0-9a-f]*"', "", text).encode()).hexdigest()[:32]
    return re.sub(r'"unique_id": "[0-9a-f]*"', f'"unique_id": "{digest}"', text)


def catbench_document(reactions: Iterable[Reaction], dedup: bool = True) -> dict[str, Any]:
    """The reactions in CatBench's dataset layout: the current one (``dedup``: each distinct
    structure once under ``_structures``, systems pointing to it by ``ref``, as
    ``save_catbench_json`` writes since 1.1.1), or the earlier one with ``atoms_json`` inline.
    Structures are shared only when their ASE-JSON text is identical, so the file is lossless."""
    doc: dict[str, Any] = {}
    shared: dict[str, str] = {}
    for r in sorted(reactions, key=lambda r: r.reaction_id):
        raw = {}
        for s in r.structures:
            text = _ase_json(s.atoms)
            item: dict[str, Any] = {"stoi": s.stoi, "energy_ref": s.dft_energy}
            if dedup:
                ref = hashlib.sha256(text.encode()).hexdigest()[:32]
                shared.setdefault(ref, text)
                item["ref"] = ref
            else:
                item["atoms_json"] = text
            raw[s.key] = item
        entry: dict[str, Any] = {"raw": raw, "ref_ads_eng": r.dft_ads_eng, "adsorbate_indices": r.adsorbate_indices}
        if r.constraint_source:
            entry["constraint_source"] = r.constraint_source
        doc[r.reaction_id] = entry
    if dedup and shared:
        doc["_structures"] = dict(sorted(shared.items()))
    return doc


def write_catbench_json(reactions: Iterable[Reaction], path: str | os.PathLike, dedup: bool = True) -> Path:
    """``{name}_adsorption.json`` (gzip when the name ends in ``.gz``) that CatBench's
    ``load_catbench_json`` reads, written atomically."""
    from crucible.io import write_bytes

    text = json.dumps(catbench_document(reactions, dedup), indent=1)
    data = text.encode("utf-8")
    path = Path(path)
    if path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    write_bytes(data, path)
    return path


# ---------------------------------------------------------------------------------------------
# Catalysis-Hub raw reactions


def _check_filtering(filtering: str) -> None:
    if filtering not in FILTERINGS:
        raise DataValidationError(f"filtering {filtering!r}: one of {', '.join(FILTERINGS)}")


def _stoichiometry(value: Any, where: str) -> dict[str, float]:
    if isinstance(value, str):
        value = formats.parse_json(value, where)
    if not isinstance(value, dict):
        raise DataValidationError(f"{where}: expected name → coefficient, got {value!r}")
    return {str(k): _float(v, f"{where}.{k}") for k, v in value.items()}


def _cathub_fixed(constraints: Any, where: str, strict: bool) -> list[int]:
    """Indices of the FixAtoms in a Catalysis-Hub ``constraints`` field (a JSON text holding a
    list of ASE constraint dicts). CatBench reads only FixAtoms and treats text it cannot parse
    as no constraint; strict filtering refuses such a field instead."""
    if constraints in (None, [], ""):
        return []
    if isinstance(constraints, str):
        try:
            constraints = formats.parse_json(constraints, where)
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
    geometry (:func:`infer_fixed_atoms`), and are dropped when it cannot be inferred.

    ``filtering: strict`` instead refuses the dataset on any of those drops (and on systems
    outside the reactants/products), sums the coefficients of a name that is both reactant and
    product, skips the coefficient retry, checks to 1e-4 eV and adds ``energyCorrection``."""
    path = Path(path)
    _check_filtering(filtering)
    strict = filtering == "strict"
    tol = TOLERANCE[filtering] if tolerance is None else float(tolerance)
    doc = _load_json(path)
    nodes = doc.get("raw_reactions") if isinstance(doc, dict) else None
    if not isinstance(nodes, list):
        raise DataValidationError(f"{path}: field 'raw_reactions' (a list) missing")
    out: list[Reaction] = []
    dropped: list[dict[str, Any]] = []
    notes: dict[str, Any] = {
        "n_input": len(nodes),
        "ignored_systems": [],
        "adslab_coefficient_set_to_1": [],
        "energy_corrections_ignored": [],
        "constraint_source": {},
    }
    seen: dict[tuple, int] = {}
    tags: list[str] = []  # CatBench's id bookkeeping (a filtered reaction is not always taken back)

    def drop(row, node, rid, rule, reason):
        dropped.append(
            {
                "reaction_id": rid,
                "cathub_id": node.get("id"),
                "row": row,
                "where": f"{path} raw_reactions[{row}]" + (f" ({rid})" if rid else ""),
                "rule": rule,
                "reason": reason,
            }
        )

    for row, item in enumerate(nodes):
        node = item.get("node", item) if isinstance(item, dict) else None
        where = f"{path} raw_reactions[{row}]"
        if not isinstance(node, dict):
            raise DataValidationError(f"{where}: not an object")
        sig = _dedup_signature(node)
        if sig in seen:
            drop(row, node, None, "duplicate", f"duplicate of raw_reactions[{seen[sig]}] (same {sig[0]})")
            continue
        seen[sig] = row
        entries = node.get("reactionSystems")
        if not isinstance(entries, list) or not entries:
            raise DataValidationError(f"{where}: field 'reactionSystems' missing or empty")
        # name -> system, as CatBench builds it: a repeated name keeps its first place, last value
        systems: dict[str, dict[str, Any]] = {}
        for entry in entries:
            name = entry.get("name") if isinstance(entry, dict) else None
            if not isinstance(name, str):
                raise DataValidationError(f"{where}: a reactionSystems entry has no name")
            body = entry.get("systems") or {}
            swhere = f"{where} reactionSystems {name!r}"
            if "InputFile" not in body:
                raise DataValidationError(f"{swhere}: systems.InputFile is required")
            atoms = _atoms_from_ase_json(body["InputFile"], swhere)
            atoms.pbc = True
            _fix(atoms, _cathub_fixed(body.get("constraints"), swhere, strict))
            systems[name] = {
                "atoms": atoms,
                "energy": body.get("energy"),
                "correction": entry.get("energyCorrection") or 0.0,
                "where": swhere,
            }
        first = systems["star"] if "star" in systems else next(iter(systems.values()))
        base = f"{first['atoms'].get_chemical_formula()}_{node.get('Equation')}"
        count = tags.count(base)
        tags.append(base)
        rid = base if count == 0 else f"{base}_{count}"
        try:
            reactants = _stoichiometry(node.get("reactants", {}), f"{where}.reactants")
            products = _stoichiometry(node.get("products", {}), f"{where}.products")
        except DataValidationError as exc:
            if strict:
                raise
            drop(row, node, rid, "bad_stoichiometry", str(exc))
            continue
        stoi: dict[str, float] = {}
        for name in systems:
            if strict:
                if name in reactants or name in products:
                    stoi[name] = products.get(name, 0.0) - reactants.get(name, 0.0)
            elif name in reactants:
                stoi[name] = -reactants[name]
            elif name in products:
                stoi[name] = products[name]
        ignored = [n for n in systems if n not in stoi]
        notes["ignored_systems"] += [{"reaction_id": rid, "system": n} for n in ignored]
        problems = []
        if strict and ignored:
            problems.append(("extra_systems", f"reactionSystems {ignored} are not among the reactants/products"))
        missing = sorted((set(reactants) | set(products)) - set(systems))
        if strict and missing:
            problems.append(("missing_systems", f"no reactionSystems entry for {missing}"))
        stars = [n for n in stoi if "star" in n]
        if len(stars) != 2:
            problems.append(
                (
                    "multi_adsorbate",
                    f"{len(stars) - 1} adslab structures {[n for n in stars if n != 'star']}, expected 1",
                )
            )
        unknown = [n for n in stoi if n != "star" and not n.endswith("star") and not n.endswith("gas")]
        if unknown:
            problems.append(
                ("structure_roles", f"structure key(s) {unknown} are neither 'star', '...star' nor '...gas'")
            )
        if problems:
            drop(row, node, rid, problems[0][0], "; ".join(reason for _, reason in problems))
            continue
        energies: dict[str, float] = {}
        try:
            for name in stoi:
                swhere = systems[name]["where"]
                energies[name] = _float(systems[name]["energy"], f"{swhere}.energy")
                if strict:
                    energies[name] += _float(systems[name]["correction"], f"{swhere}.energyCorrection")
            # strict (crucible's earlier reader) takes Σ stoi·E where no reaction energy is stated
            stated = node.get("reactionEnergy")
            if stated is not None or not strict:
                stated = _float(stated, f"{where}.reactionEnergy")
        except DataValidationError as exc:
            drop(row, node, rid, "energy_missing", str(exc))
            continue
        corrections = {} if strict else {n: systems[n]["correction"] for n in stoi if systems[n]["correction"]}
        adslab_key = next(n for n in stoi if "star" in n and n != "star")

        total = _energy_sum(energies, stoi)
        if stated is not None and abs(stated - total) > tol:
            retry = None if strict else _energy_sum(energies, {**stoi, adslab_key: 1.0})
            if retry is not None and abs(stated - retry) <= tol:
                notes["adslab_coefficient_set_to_1"].append({"reaction_id": rid, "was": stoi[adslab_key]})
                stoi[adslab_key] = 1.0
            else:
                tags.remove(base)  # CatBench takes the id back for this drop only
                also = "" if retry is None else f"; with the adslab coefficient set to 1: {retry:.6f} eV"
                if corrections:
                    also += f"; energyCorrection {corrections} not used, as CatBench does not use it"
                drop(
                    row,
                    node,
                    rid,
                    "stoichiometry_mismatch",
                    f"Σ stoi·E = {total:.6f} eV differs from reactionEnergy {stated:.6f} eV by "
                    f"{abs(stated - total):.6g} eV (tolerance {tol:g}){also}",
                )
                continue
        if "star" not in stoi:
            drop(row, node, rid, "no_clean_slab", "no clean slab ('star'); CatBench 1.1.6 fails such a reaction")
            continue
        slab, adslab = systems["star"]["atoms"], systems[adslab_key]["atoms"]
        indices = detect_adsorbate_indices(slab, adslab)
        lacking = [n for n in ("star", adslab_key) if not _has_fixed_atoms(systems[n]["atoms"])]
        source = "deposited"
        if lacking:
            slab_fx, adslab_fx = infer_fixed_atoms(slab, adslab, indices)
            if slab_fx is None:
                drop(
                    row,
                    node,
                    rid,
                    "constraints_undetermined",
                    f"{lacking} carry no FixAtoms and the fixed atoms cannot be inferred "
                    f"(the adslab's substrate has {len(adslab) - len(indices)} atoms, the clean slab {len(slab)})",
                )
                continue
            if "star" in lacking and slab_fx:
                _fix(slab, slab_fx)
            if adslab_key in lacking and adslab_fx:
                _fix(adslab, adslab_fx)
            source = "geometry_inferred" if adslab_fx else "free"
        notes["constraint_source"][source] = notes["constraint_source"].get(source, 0) + 1
        notes["energy_corrections_ignored"] += [
            {"reaction_id": rid, "system": n, "energyCorrection": c} for n, c in corrections.items()
        ]
        structures = [Structure(n, role_of(n), stoi[n], energies[n], systems[n]["atoms"]) for n in stoi]
        system = str(node.get("surfaceComposition") or node.get("chemicalComposition") or slab.get_chemical_formula())
        out.append(
            _finish(
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
        )
    if strict and dropped:
        raise _strict_refusal(path, dropped)
    notes["constraint_source"] = dict(sorted(notes["constraint_source"].items()))
    return Reactions(out, dropped, notes)


# ---------------------------------------------------------------------------------------------
# a user's VASP folders


def read_oszicar_energy(path: str | os.PathLike) -> float:
    """E0 of the last ionic step (the last line carrying ``E0=``)."""
    path = Path(path)
    lines = formats.read_bytes(path).decode("utf-8", errors="replace").splitlines()
    for n, line in reversed(list(enumerate(lines, 1))):
        if "E0=" in line:
            token = line.split("E0=")[1].split()[0]
            return _float(token, f"{path} line {n} E0")
    raise DataValidationError(f"{path}: no line with 'E0=' (not a finished VASP OSZICAR?)")


def _read_vasp_dir(folder: Path):
    from ase.io import read

    contcar, oszicar = folder / "CONTCAR", folder / "OSZICAR"
    for f in (contcar, oszicar):
        if not f.is_file():
            raise DataValidationError(f"{folder}: {f.name} missing")
    try:
        atoms = read(str(contcar), format="vasp")
    except Exception as exc:
        raise DataValidationError(f"{contcar}: cannot read: {exc}") from exc
    return atoms, read_oszicar_energy(oszicar)


def check_coefficients(coefficients: dict[str, dict[str, float]], where: str = "coefficients") -> None:
    for ads, coeff in sorted(coefficients.items()):
        for needed in ("slab", "adslab"):
            if needed not in coeff:
                raise DataValidationError(f"{where}.{ads}: key {needed!r} is required")
        bad = [k for k in coeff if k not in ("slab", "adslab") and not k.endswith("gas")]
        if bad:
            raise DataValidationError(f"{where}.{ads}: keys other than slab/adslab must end with 'gas': {bad}")


def refuse_links(root: Path) -> None:
    """A VASP folder is read without links, as its pin (:func:`tree_sha256`) hashes it: a link
    anywhere below it is an error naming the link."""
    from crucible.fingerprint import tree_files

    tree_files(root, links="refuse")


def read_vasp_tree(root: str | os.PathLike, coefficients: dict[str, dict[str, float]]) -> Reactions:
    root = Path(root)
    if not root.is_dir():
        raise DataValidationError(f"{root}: not a folder")
    refuse_links(root)
    check_coefficients(coefficients)
    gas: dict[str, tuple] = {}
    if (root / "gas").is_dir():
        for d in sorted(p for p in (root / "gas").iterdir() if p.is_dir()):
            if not d.name.endswith("gas"):
                raise DataValidationError(f"{d}: gas-reference folders must end with 'gas'")
            gas[d.name] = _read_vasp_dir(d)
    out = []
    for system_dir in sorted(p for p in root.iterdir() if p.is_dir() and p.name != "gas"):
        if not (system_dir / "slab").is_dir():
            raise DataValidationError(f"{system_dir}: no 'slab' folder")
        slab_atoms, slab_e = _read_vasp_dir(system_dir / "slab")
        for ads_dir in sorted(p for p in system_dir.iterdir() if p.is_dir() and p.name != "slab"):
            ads = ads_dir.name
            if ads not in coefficients:
                raise DataValidationError(
                    f"{ads_dir}: adsorbate {ads!r} has no entry in coefficients (known: {sorted(coefficients)})"
                )
            coeff = coefficients[ads]
            sites = sorted({p.parent for p in ads_dir.rglob("CONTCAR")})
            if not sites:
                raise DataValidationError(f"{ads_dir}: no CONTCAR below it")
            for site in sites:
                atoms, energy = _read_vasp_dir(site)
                structures = [
                    Structure("star", "slab", float(coeff["slab"]), slab_e, slab_atoms.copy()),
                    Structure(f"{ads}star", "adslab", float(coeff["adslab"]), energy, atoms),
                ]
                for key in sorted(k for k in coeff if k.endswith("gas")):
                    if key not in gas:
                        raise DataValidationError(
                            f"{root / 'gas' / key}: gas reference {key!r} (needed by {ads}) missing"
                        )
                    g_atoms, g_e = gas[key]
                    structures.append(Structure(key, "gas", float(coeff[key]), g_e, g_atoms.copy()))
                rid = "_".join([system_dir.name, ads, *site.relative_to(ads_dir).parts])
                dft = float(sum(s.stoi * s.dft_energy for s in structures))
                out.append(_finish(rid, structures, dft, None, system_dir.name, None, str(site)))
    if not out:
        raise DataValidationError(f"{root}: no reactions found")
    return Reactions(out, [], {"n_input": len(out)})


def read_dataset(
    fmt: str,
    path: str | os.PathLike,
    coefficients: dict | None = None,
    filtering: str = "catbench",
    tolerance: float | None = None,
    sha256: str | None = None,
) -> Reactions:
    """The reactions of a dataset, read with ``filtering``'s rules; one with a pin
    (``catalysis.datasets.<name>.sha256``) is checked against it first, so a file or folder
    changed after its fetch stops here."""
    _check_filtering(filtering)
    if sha256:
        check_pin(path, sha256)
    if fmt == "catbench-json":
        return read_catbench_json(path, filtering)
    if fmt == "cathub-raw":
        return read_cathub_raw(path, filtering, tolerance)
    if fmt == "vasp-tree":
        if not coefficients:
            raise DataValidationError("vasp-tree datasets need 'coefficients' (adsorbate → {slab, adslab, ...gas})")
        return read_vasp_tree(path, coefficients)
    raise DataValidationError(f"unknown dataset format {fmt!r}; known: {', '.join(FORMATS)}")


def tree_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a file, or of a folder's sorted (relative path, file SHA-256) list. A symbolic
    link in the folder is refused, naming it, as :func:`read_vasp_tree` refuses it: the pin
    covers exactly the files read."""
    from crucible.fingerprint import path_sha256

    return path_sha256(path, links="refuse")


def file_md5(path: str | os.PathLike) -> str | None:
    """MD5 of a file (what CatBench stamps as ``input_md5``), None for a folder."""
    path = Path(path)
    if not path.is_file():
        return None
    digest = hashlib.md5()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_pin(path: str | os.PathLike, sha256: str) -> str:
    """:func:`tree_sha256` of ``path``, which must equal the dataset's pin."""
    from crucible.errors import HashMismatchError

    actual = tree_sha256(path)
    if actual != sha256.lower():
        raise HashMismatchError(
            f"{path}: SHA-256 {actual} differs from the pin {sha256.lower()} of this catalysis dataset in the config "
            "(catalysis.datasets.<name>.sha256); it changed after it was fetched: delete it and rerun, so that it "
            "is fetched again (or pin the new hash if you changed it on purpose)"
        )
    return actual


# ---------------------------------------------------------------------------------------------
# clean: one table + an ASE database, and a card


REACTION_COLUMNS = [
    "reaction_id",
    "adsorbate",
    "system",
    "dft_ads_eng",
    "stated_energy",
    "structures",
    "adsorbate_indices",
    "cathub_id",
    "constraint_source",
    "relax_group",
]


def _schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("reaction_id", pa.string()),
            ("adsorbate", pa.string()),
            ("system", pa.string()),
            ("dft_ads_eng", pa.float64()),
            ("stated_energy", pa.float64()),
            ("structures", pa.string()),
            ("adsorbate_indices", pa.string()),
            ("cathub_id", pa.string()),
            ("constraint_source", pa.string()),
            ("relax_group", pa.int64()),
        ]
    )


def clean(
    reactions: list[Reaction],
    out_parquet: str | os.PathLike,
    out_db: str | os.PathLike,
    out_card: str | os.PathLike,
    *,
    source: dict[str, Any],
    tolerance: float | None = None,
    filtering: str = "catbench",
    energy_source: str = DEFAULT_ENERGY_SOURCE,
    out_catbench: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Write ``reactions.parquet`` (structures referenced by ASE-db row id), the ASE database, the
    card and, with ``out_catbench``, the same reactions as a CatBench dataset file; fail when
    Σ stoi·E differs from a stated reaction energy by more than ``tolerance`` (default: 1e-3 eV
    with CatBench's filtering, 1e-4 eV strict). ``reactions`` may be a reader's
    :class:`Reactions`: what it dropped and noted goes into the card."""
    import ase.db
    import pandas as pd

    from crucible.catalysis.identity import relaxation_groups
    from crucible.io import atomic_path, write_json, write_parquet

    _check_filtering(filtering)
    tolerance = TOLERANCE[filtering] if tolerance is None else float(tolerance)
    ids = [r.reaction_id for r in reactions]
    dup = sorted(k for k, n in Counter(ids).items() if n > 1)
    if dup:
        raise DataValidationError(f"{source.get('path')}: duplicate reaction ids {dup[:5]}")
    worst, worst_id = 0.0, None
    for r in reactions:
        if r.stated_energy is None:
            continue
        diff = abs(r.energy_sum() - r.stated_energy)
        if diff > worst:
            worst, worst_id = diff, r.reaction_id
    if worst > tolerance:
        raise DataValidationError(
            f"{source.get('path')}: reaction {worst_id!r}: Σ stoi·E = {next(r.energy_sum() for r in reactions if r.reaction_id == worst_id):.6f} eV "
            f"differs from the stated reaction energy by {worst:.6g} eV (tolerance {tolerance})"
        )
    groups = relaxation_groups(reactions)
    rows = []
    with atomic_path(out_db, ".db") as tmp:
        tmp.unlink()
        with ase.db.connect(str(tmp), type="db", append=True) as db:
            for r in sorted(reactions, key=lambda r: r.reaction_id):
                refs = []
                for s in r.structures:
                    db_id = db.write(s.atoms, reaction_id=r.reaction_id, key=s.key)
                    refs.append(
                        {"key": s.key, "role": s.role, "stoi": s.stoi, "dft_energy": s.dft_energy, "db_id": db_id}
                    )
                rows.append(
                    {
                        "reaction_id": r.reaction_id,
                        "adsorbate": r.adsorbate,
                        "system": r.system,
                        "dft_ads_eng": r.dft_ads_eng,
                        "stated_energy": np.nan if r.stated_energy is None else r.stated_energy,
                        "structures": json.dumps(refs, sort_keys=True),
                        "adsorbate_indices": json.dumps(r.adsorbate_indices),
                        "cathub_id": r.cathub_id,
                        "constraint_source": r.constraint_source,
                        "relax_group": groups[r.reaction_id],
                    }
                )
    df = pd.DataFrame(rows, columns=REACTION_COLUMNS)
    write_parquet(df, out_parquet, schema=_schema())
    if out_catbench is not None:
        write_catbench_json(reactions, out_catbench)
    dropped = [{k: v for k, v in d.items() if k != "where"} for d in getattr(reactions, "dropped", [])]
    notes = dict(getattr(reactions, "notes", {}))
    card = {
        "n_reactions": len(df),
        "reactions_per_adsorbate": {k: int(v) for k, v in sorted(Counter(df["adsorbate"]).items())},
        "energy_source": energy_source,
        "source": source,
        "filtering": filtering,
        "n_input": int(notes.pop("n_input", len(df) + len(dropped))),
        "n_dropped": len(dropped),
        "dropped_by_rule": dict(sorted(Counter(d["rule"] for d in dropped).items())),
        "dropped": dropped,
        "notes": notes,
        "n_relaxation_groups": len(set(groups.values())),
        "energy_check": {
            "n_checked": int(sum(r.stated_energy is not None for r in reactions)),
            "worst_abs_difference_eV": worst,
            "worst_reaction": worst_id,
            "tolerance_eV": tolerance,
        },
        "dft_ads_eng": {
            "min": float(df["dft_ads_eng"].min()) if len(df) else None,
            "max": float(df["dft_ads_eng"].max()) if len(df) else None,
        },
    }
    write_json(card, out_card)
    return card


def load_reactions(
    parquet: str | os.PathLike, db_path: str | os.PathLike, ids: Iterable[str] | None = None
) -> list[Reaction]:
    """Reactions back from ``reactions.parquet`` + the ASE database (constraints included)."""
    import ase.db

    from crucible.io import read_parquet

    df = read_parquet(parquet)
    if ids is not None:
        wanted = set(ids)
        df = df[df["reaction_id"].isin(wanted)]
    out = []
    with ase.db.connect(str(db_path), type="db") as db:
        for row in df.to_dict(orient="records"):
            structures = [
                Structure(s["key"], s["role"], s["stoi"], s["dft_energy"], db.get_atoms(id=s["db_id"]))
                for s in json.loads(row["structures"])
            ]
            stated = None if math.isnan(row["stated_energy"]) else row["stated_energy"]
            out.append(
                Reaction(
                    row["reaction_id"],
                    row["adsorbate"],
                    row["system"],
                    row["dft_ads_eng"],
                    stated,
                    structures,
                    json.loads(row["adsorbate_indices"]),
                    row.get("cathub_id"),
                    row.get("constraint_source"),
                )
            )
    return out


def clean_input(
    fmt: str,
    path: str | os.PathLike,
    out_parquet: str | os.PathLike,
    out_db: str | os.PathLike,
    out_card: str | os.PathLike,
    *,
    coefficients: dict | None = None,
    url: str | None = None,
    filtering: str = "catbench",
    tolerance: float | None = None,
    sha256: str | None = None,
    energy_source: str = DEFAULT_ENERGY_SOURCE,
    out_catbench: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Read a dataset in any supported format with ``filtering``'s rules and :func:`clean` it,
    recording where it came from (format, path, SHA-256 of the file or tree, the MD5 that CatBench
    stamps as ``input_md5``, and the download URL when given) in the card. ``sha256``: the
    dataset's pin, checked before anything is read."""
    reactions = read_dataset(fmt, path, coefficients, filtering, tolerance, sha256=sha256)
    source: dict[str, Any] = {"format": fmt, "path": str(path), "sha256": tree_sha256(path)}
    if file_md5(path):
        source["md5"] = file_md5(path)
    if url:
        source["url"] = url
    return clean(
        reactions,
        out_parquet,
        out_db,
        out_card,
        source=source,
        tolerance=tolerance,
        filtering=filtering,
        energy_source=energy_source,
        out_catbench=out_catbench,
    )
