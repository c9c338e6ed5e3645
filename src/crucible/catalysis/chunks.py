"""One chunk of reactions relaxed by :func:`crucible.catalysis.calculation.run_reaction`,
resumable after a kill.

Each finished reaction is written at once to ``{out}.parts/{reaction}.json``, keyed by the
settings, the model and the reaction's input (structures, energies, stoichiometry, adsorbate
atoms); a rerun after a kill reuses a part only when all of them match. A part that does not
match or does not parse is named in the log, moved to ``{out}.set-aside/`` and recomputed.
Chunks never split reactions that reuse each other's relaxations (:func:`chunk_ids`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from crucible.catalysis.adsorption import Reaction
from crucible.catalysis.calculation import DEFAULTS, MODES, RelaxationCache, run_reaction
from crucible.core.io import InFile

log = logging.getLogger(__name__)


def chunk_ids(ids: Sequence[str], chunk: int, n_chunks: int, groups: Sequence[int] | None = None) -> list[str]:
    """Contiguous slice ``chunk`` of ``n_chunks`` over the sorted reaction ids. With ``groups``
    (one number per id: reactions that reuse each other's relaxations,
    :func:`crucible.catalysis.equivalence.relaxation_groups`) a group is never split: it goes to the
    chunk in which its first reaction falls, so the reuse, and the time and steps counted, do not
    depend on the number of chunks."""
    if not 0 <= chunk < n_chunks:
        raise ValueError(f"chunk {chunk} outside 0..{n_chunks - 1}")
    ordered = sorted(ids)
    bounds = np.linspace(0, len(ordered), n_chunks + 1).round().astype(int)
    if groups is None:
        return ordered[bounds[chunk] : bounds[chunk + 1]]
    group_of = dict(zip(ids, groups))
    members: dict[int, list[str]] = {}
    for rid in ordered:
        members.setdefault(group_of[rid], []).append(rid)
    out, start = [], 0
    for group in sorted(members, key=lambda g: members[g][0]):
        if bounds[chunk] <= start < bounds[chunk + 1]:
            out += members[group]
        start += len(members[group])
    return sorted(out)


def _part_name(reaction_id: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", reaction_id)[:80]
    return f"{safe}-{hashlib.sha256(reaction_id.encode()).hexdigest()[:8]}.json"


IDENTITY_FIELDS = ("class", "params", "package", "version", "code_sha256", "files_sha256")


def settings_key(params: dict[str, Any], model: str, potential: dict[str, Any] | None = None) -> str:
    """Digest of the relaxation settings, the model name and what the model is
    (:func:`crucible.potentials.provenance.provenance`: class, params, package version, a local
    package's and files' hashes): a part written by another version or configuration of the potential is not
    resumed."""
    p = {**DEFAULTS, **params, "model": model}
    if potential:
        p["potential"] = {k: potential.get(k) for k in IDENTITY_FIELDS if k in potential}
    return hashlib.sha256(json.dumps(p, sort_keys=True).encode()).hexdigest()[:16]


def input_key(reaction: Reaction) -> str:
    """Digest of everything of a reaction's input that its relaxations depend on: ids, reference
    energies, stoichiometry, adsorbate atoms and every structure's atoms, positions (exact bits),
    cell, periodicity and fixed atoms."""
    from crucible.catalysis.equivalence import fixed_set

    h = hashlib.sha256()
    head = [reaction.reaction_id, reaction.adsorbate, repr(float(reaction.dft_ads_eng)), reaction.adsorbate_indices]
    h.update(json.dumps(head).encode())
    for s in reaction.structures:
        h.update(json.dumps([s.key, s.role, repr(float(s.stoi)), repr(float(s.dft_energy))]).encode())
        for arr in (s.atoms.numbers, s.atoms.positions, np.asarray(s.atoms.cell), s.atoms.pbc):
            h.update(np.ascontiguousarray(arr).tobytes())
        h.update(json.dumps(sorted(fixed_set(s.atoms))).encode())
    return h.hexdigest()[:32]


def _set_aside(part: Path, set_aside: Path, why: str) -> None:
    set_aside.mkdir(parents=True, exist_ok=True)
    target = set_aside / part.name
    n = 1
    while target.exists():
        target = set_aside / f"{part.name}.{n}"
        n += 1
    os.replace(part, target)
    log.warning("part file %s %s: moved to %s; the reaction is relaxed again", part, why, target)


def _saved_record(part: Path, reaction: Reaction, key: str, set_aside: Path) -> dict[str, Any] | None:
    """The record in a part file when it belongs to these settings, this model and this very
    input; otherwise the file is named in the log and set aside."""
    try:
        saved = json.loads(part.read_text(encoding="utf-8"))
        record = saved["record"]
        stored_settings, stored_input = saved["settings_key"], saved.get("input_key")
        if record["reaction_id"] != reaction.reaction_id:
            raise KeyError("reaction_id")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        _set_aside(
            part, set_aside, f"does not parse as a part of {reaction.reaction_id!r} ({type(exc).__name__}: {exc})"
        )
        return None
    if stored_settings != key:
        _set_aside(part, set_aside, "was written with other settings or another model (or version of it)")
        return None
    if stored_input != input_key(reaction):
        _set_aside(part, set_aside, "was written for other input structures or energies of this reaction")
        return None
    return record


def run_chunk(
    reactions: list[Reaction],
    calc,
    params: dict[str, Any],
    out: str | os.PathLike,
    model: str,
    progress: bool = True,
    device: str | None = None,
    potential: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Relax ``reactions`` (one chunk), keeping each finished reaction in ``{out}.parts/`` so a
    killed run resumes; then write the chunk's JSON to ``out`` and remove the parts.
    ``potential``: the potential's provenance (``Potential.provenance``), recorded in the chunk
    and part of the key a part must match."""
    from tqdm import tqdm

    from crucible.core.io import write_json

    p = {**DEFAULTS, **params}
    if p["mode"] not in MODES:
        raise ValueError(f"mode {p['mode']!r}: one of {MODES}")
    out = Path(out)
    parts = out.with_name(out.name + ".parts")
    set_aside = out.with_name(out.name + ".set-aside")
    parts.mkdir(parents=True, exist_ok=True)
    key = settings_key(params, model, potential)
    cache = RelaxationCache(bool(p["structure_cache"]) and p["mode"] != "oc20")
    records, n_resumed, n_computed = [], 0, 0
    for reaction in tqdm(
        sorted(reactions, key=lambda r: r.reaction_id), desc=f"{model} relaxations", disable=None if progress else True
    ):
        part = parts / _part_name(reaction.reaction_id)
        record = _saved_record(part, reaction, key, set_aside) if part.is_file() else None
        if record is not None:
            record = cache.remember(reaction, record)
            if record is None:
                _set_aside(part, set_aside, "reuses a relaxation that this run does not hold (its source changed)")
        if record is not None:
            records.append(record)
            n_resumed += 1
            continue
        record = run_reaction(reaction, calc, p, cache=cache)
        write_json({"settings_key": key, "input_key": input_key(reaction), "record": record}, part)
        records.append(record)
        n_computed += 1
    # the device the potential was loaded on (crucible.potentials.spec.Potential.device)
    doc = {
        "model": model,
        "device": device or "cpu",
        "potential": dict(potential or {}),
        "settings": p,
        "settings_key": key,
        "n_reactions": len(records),
        "n_resumed": n_resumed,
        "n_computed": n_computed,
        "reactions": records,
    }
    write_json(doc, out)
    for f in parts.glob("*.json"):
        f.unlink()
    parts.rmdir()
    log.info("%s: %d reactions (%d computed, %d resumed) -> %s", model, len(records), n_computed, n_resumed, out)
    return doc


def relax_chunk(
    reactions: InFile,
    db: InFile,
    model: str,
    chunk: int,
    n_chunks: int,
    params: dict[str, Any] | None,
    out: str | os.PathLike,
    device: str | None = None,
    threads: int | None = None,
    custom_potentials: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Relax chunk ``chunk`` of ``n_chunks`` of the reaction table ``reactions`` (structures from
    the ASE database ``db``) with the potential ``model`` and write it to ``out``
    (:func:`run_chunk`: resumable); ``params``: the relaxation settings, those not given the
    defaults.

    Args:
        reactions: the reaction table clean wrote (reactions.parquet)
        db: the ASE database clean wrote beside it (structures.db)
        chunk: which chunk to relax, 0 .. N-1 of --n-chunks (default 0)
        n_chunks: slices of the sorted reaction ids, a relaxation group never split (default 1: all in one)
        params: JSON of relaxation settings, each optional: seeds (3), fmax (0.05 eV/Å), max_steps (999),
            gas_max_steps (500), mode (basic; oc20: the adslab only), chemical_bond_cutoff (6.0 Å: atom pairs
            whose bond change is measured), structure_cache (true: relax each distinct slab/adslab once per
            seed)
        out: the chunk's JSON to write: results/catalysis/{dataset}/calc/{model}/chunk_{chunk}.json (finished
            reactions are kept in {out}.parts/ until then, so a killed run resumes)
        model: as in :func:`crucible.mlip.run.write_eos`
        device: cpu or cuda (default: cuda when available; built-in ASE potentials: cpu)
        threads: torch CPU threads (default: torch's own choice)
        custom_potentials: JSON of config's potentials: section (a user's potential named by --model)
    """
    from crucible.catalysis import potential as potentials
    from crucible.catalysis.clean import load_reactions
    from crucible.core.io import read_parquet

    table = read_parquet(reactions)
    groups = list(table["relax_group"]) if "relax_group" in table else None
    ids = chunk_ids(list(table["reaction_id"]), chunk, n_chunks, groups)
    loaded = potentials.load(model, device, threads, custom_potentials)
    return run_chunk(
        load_reactions(reactions, db, ids),
        loaded.calculator,
        params or {},
        out,
        model,
        device=loaded.device,
        potential=dict(loaded.provenance),
    )
