"""CatBench's own files: its dataset file, read and written, and its result file, written.

* :func:`read_catbench_json` — CatBench's ``{name}_adsorption.json`` (what its
  ``cathub_preprocessing`` / ``get_benchmark`` write): ``{reaction: {"raw": {key: {"stoi",
  "energy_ref", "atoms_json"}}, "ref_ads_eng", "adsorbate_indices"}}``, or, since CatBench 1.1.1
  (``catbench/utils/data_utils.py``, ``save_catbench_json``), the same with every structure
  stored once in a top-level ``_structures`` map and each system pointing to it by ``ref``;
  ``.json.gz`` is read too.
* :func:`write_catbench_json` — the same layout from :class:`~crucible.catalysis.adsorption.Reaction`
  records, byte-identical between runs, which CatBench's ``load_catbench_json`` reads.
* :func:`catbench_result` — relaxation records as CatBench's ``{mlip}_result.json``, which its
  ``AdsorptionAnalysis`` reads (the peer-agreement tests hand it ours).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
from pathlib import Path
from typing import Any, Iterable, Sequence

from crucible.catalysis.adsorption import (
    Reaction,
    Reactions,
    Structure,
    assemble_reaction,
    atoms_from_ase_json,
    check_filtering,
    finite_float,
    role_of,
    strict_refusal,
)
from crucible.core import formats, strict_json
from crucible.core.errors import DataValidationError

# ---------------------------------------------------------------------------------------------
# the dataset file, read


def _catbench_roles(raw: dict[str, Any]) -> str | None:
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


def _structure(key: str, item: Any, shared: dict[str, str], where: str) -> Structure:
    """One system of a reaction, its ASE-JSON inline (``atoms_json``) or in ``_structures`` (``ref``)."""
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
    return Structure(
        key,
        role_of(key),
        finite_float(item["stoi"], f"{where} {key}.stoi"),
        finite_float(item["energy_ref"], f"{where} {key}.energy_ref"),
        atoms_from_ase_json(text, f"{where} {key}.atoms_json"),
    )


def read_catbench_json(path: str | os.PathLike, filtering: str = "catbench") -> Reactions:
    """Both CatBench layouts (verbatim ``atoms_json`` per system, or the deduplicated
    ``_structures`` + ``ref`` of CatBench ≥ 1.1.1). Reactions CatBench could not benchmark
    (several adslabs, no clean slab, a key that is no structure role) are dropped with their
    reason, or refused with ``filtering: strict``."""
    path = Path(path)
    check_filtering(filtering)
    doc = strict_json.read_json(path)
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
        why = _catbench_roles(raw)
        if why is not None:
            dropped.append({"reaction_id": rid, "where": where, "rule": "structure_roles", "reason": why})
            continue
        structures = [_structure(key, raw[key], shared, where) for key in sorted(raw)]
        if "ref_ads_eng" not in entry:
            raise DataValidationError(f"{where}: field 'ref_ads_eng' missing")
        ref = finite_float(entry["ref_ads_eng"], f"{where} ref_ads_eng")
        out.append(
            assemble_reaction(
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
        raise strict_refusal(path, dropped)
    return Reactions(out, dropped, {"n_input": len(out) + len(dropped)})


# ---------------------------------------------------------------------------------------------
# the dataset file, written


def ase_json(atoms) -> str:
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
            text = ase_json(s.atoms)
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
    from crucible.core.io import write_bytes

    text = json.dumps(catbench_document(reactions, dedup), indent=1)
    data = text.encode("utf-8")
    path = Path(path)
    if path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    write_bytes(data, path)
    return path


# ---------------------------------------------------------------------------------------------
# the result file


_SLAB_KEYS = ("slab_tot_eng", "slab_max_disp", "slab_pos_mae", "slab_pos_rmsd", "slab_time", "slab_steps")
_ADSLAB_KEYS = ("adslab_max_disp", "adslab_pos_mae", "adslab_pos_rmsd", "adslab_time", "adslab_steps")


def _result_entry(r: dict[str, Any], reaction: Any | None, oc20: bool) -> dict[str, Any]:
    """One computed reaction of ``{mlip}_result.json``: reference, single point, a block per
    seed, final."""
    reference: dict[str, Any] = {"ads_eng": r["dft_ads_eng"]}
    if reaction is not None:
        for s in reaction.structures:
            if s.role != "gas":
                reference[f"{s.key}_tot_eng"] = s.dft_energy
    else:
        reference.update({"star_tot_eng": None, f"{r['adsorbate']}star_tot_eng": None})
    entry: dict[str, Any] = {"reference": reference, "single_calculation": dict(r["single_calculation"])}
    for n, seed in enumerate(r["seeds"]):
        block = {"ads_eng": seed["ads_eng"]}
        if not oc20:
            block.update({k: seed.get(k) for k in _SLAB_KEYS})
            block.update(
                adslab_tot_eng=seed["adslab_tot_eng"],
                max_bond_change=seed["max_bond_change"],
                substrate_displacement=seed["substrate_displacement"],
            )
        block.update({k: seed.get(k) for k in _ADSLAB_KEYS})
        entry[str(seed.get("seed", n))] = block
    final = dict(r["final"])
    final["adslab_max_disp"] = max(s["adslab_max_disp"] for s in r["seeds"])
    final["time_total_adslab"] = r["time_total_adslab"]
    final["steps_total_adslab"] = r["steps_total_adslab"]
    if oc20:
        for k in ("slab_seed_range", "ads_seed_range"):
            final.pop(k, None)
    else:
        final["slab_max_disp"] = max(s["slab_max_disp"] for s in r["seeds"])
        final["time_total_slab"] = r["time_total_slab"]
        final["steps_total_slab"] = r["steps_total_slab"]
    entry["final"] = final
    return entry


def catbench_result(
    records: Sequence[dict[str, Any]], settings: dict[str, Any], reactions: Sequence[Any] = ()
) -> dict[str, Any]:
    """Our records as CatBench's ``{mlip}_result.json`` (what ``AdsorptionAnalysis`` reads):
    ``calculation_settings``, one entry per computed reaction (``reference``, ``single_calculation``,
    one block per seed ``"0"``, ``"1"`` …, ``final``), the failed ones under ``_failures`` with their
    stage. ``reactions`` (the inputs) fill in the reference total energies; without them the
    adsorbate still shows in the key CatBench reads it from."""
    p = dict(settings)
    oc20 = p.get("mode") == "oc20"
    doc: dict[str, Any] = {
        "calculation_settings": {
            "optimizer": "LBFGS",
            "f_crit_relax": p.get("fmax", 0.05),
            "n_crit_relax": p.get("max_steps", 999),
            "damping": 1.0,
            "chemical_bond_cutoff": p.get("chemical_bond_cutoff", 6.0),
            "n_reactions_input": len(records),
            "catbench_version": "none: crucible (CatBench 1.1.6 semantics)",
        }
    }
    by_id = {r.reaction_id: r for r in reactions}
    failures = {}
    for r in sorted(records, key=lambda r: r["reaction_id"]):
        rid = r["reaction_id"]
        if r.get("error"):
            failures[rid] = {"error": r["error"], "stage": r.get("stage", "unknown")}
            continue
        doc[rid] = _result_entry(r, by_id.get(rid), oc20)
    if failures:
        doc["_failures"] = failures
    return doc
