"""Relax every reaction K times with one potential and record CatBench's per-seed quantities.

Per seed (CatBench 1.1.6, ``catbench/adsorption/calculation/calculation.py`` and
``catbench/utils/calculation_utils.py``): slab and adslab relaxed from the reference geometries with ASE's LBFGS
(``fmax`` 0.05 eV/Å, at most ``max_steps``; FixAtoms from the data), gas molecules relaxed with
their heaviest atom fixed (at most ``gas_max_steps``), all through :func:`crucible.mlip.relax.relax`;
E_ads = Σ stoi·E; displacements are
minimum-image norms initial → relaxed. The summary takes the median-rank seed (stable sort,
NaN last, position ⌊(K−1)/2⌋) and max − min ranges over seeds. ``single_calculation`` holds
single-point energies of the unrelaxed structures with the first seed. OC20 mode relaxes only
the adslab and takes its energy as E_ads.

A non-finite energy or force from the potential (a relaxation's failure status, or a NaN single
point) makes the reaction a calculation failure, recorded with its reason like an exception from
the potential: it is counted in ``Num_failed``, never rated.

Each finished reaction is written at once to ``{out}.parts/{reaction}.json``; a rerun after a
kill reuses those files (if the settings match) and relaxes only what is missing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from crucible.catalysis.data import Reaction

log = logging.getLogger(__name__)

DEFAULTS = {
    "seeds": 3,
    "fmax": 0.05,
    "max_steps": 999,
    "gas_max_steps": 500,
    "mode": "basic",
    "chemical_bond_cutoff": 6.0,
}
MODES = ("basic", "oc20")


# ---------------------------------------------------------------------------------------------
# geometry


def mic_displacements(initial, final) -> np.ndarray:
    """Per-atom minimum-image displacement norms from ``initial`` to ``final`` (Å)."""
    from ase.geometry import find_mic

    delta = np.asarray(final.positions) - np.asarray(initial.positions)
    if initial.cell.rank == 0 or not any(initial.pbc):
        return np.linalg.norm(delta, axis=1)
    _, lengths = find_mic(delta, initial.cell, initial.pbc)
    return np.asarray(lengths, dtype=float)


def fixed_indices(atoms) -> set[int]:
    from ase.constraints import FixAtoms

    out: set[int] = set()
    for c in atoms.constraints:
        if isinstance(c, FixAtoms):
            out.update(int(i) for i in c.get_indices())
    return out


def displacement_stats(initial, final) -> dict[str, float]:
    """max over all atoms; mean and RMS over mobile atoms (not in FixAtoms; 0 when none)."""
    d = mic_displacements(initial, final)
    fixed = fixed_indices(initial)
    mobile = np.array([i for i in range(len(d)) if i not in fixed], dtype=int)
    m = d[mobile] if mobile.size else np.zeros(0)
    return {
        "max_disp": float(d.max()) if d.size else 0.0,
        "pos_mae": float(m.mean()) if m.size else 0.0,
        "pos_rmsd": float(np.sqrt(np.mean(m**2))) if m.size else 0.0,
    }


def max_bond_change(initial, final, adsorbate_indices: Sequence[int], cutoff: float = 6.0) -> float:
    """Largest |d_f − d_i|/d_i × 100 over (adsorbate atom, any other atom) pairs with d_i ≤ cutoff
    or d_f ≤ cutoff and d_i > 0 (minimum-image distances)."""
    worst = 0.0
    n = len(initial)
    for a in adsorbate_indices:
        others = [j for j in range(n) if j != a]
        if not others:
            continue
        d_i = initial.get_distances(a, others, mic=any(initial.pbc))
        d_f = final.get_distances(a, others, mic=any(final.pbc))
        keep = ((d_i <= cutoff) | (d_f <= cutoff)) & (d_i > 0)
        if keep.any():
            worst = max(worst, float(np.max(np.abs(d_f[keep] - d_i[keep]) / d_i[keep] * 100.0)))
    return worst


def substrate_displacement(initial, final, adsorbate_indices: Sequence[int]) -> float:
    d = mic_displacements(initial, final)
    ads = set(int(i) for i in adsorbate_indices)
    rest = [d[i] for i in range(len(d)) if i not in ads]
    return float(max(rest)) if rest else 0.0


def median_seed(values: Sequence[float]) -> tuple[int, float]:
    """(index, value) of the median-rank seed: stable sort, NaN last, position ⌊(K−1)/2⌋."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise ValueError("median_seed of an empty sequence")
    key = np.where(np.isnan(arr), np.inf, arr)
    nan_last = np.lexsort((np.arange(arr.size), np.isnan(arr), key))
    idx = int(nan_last[(arr.size - 1) // 2])
    return idx, float(arr[idx])


def seed_range(values: Sequence[float]) -> float:
    arr = np.asarray(values, dtype=float)
    if arr.size == 0 or np.all(np.isnan(arr)):
        return math.nan
    return float(np.nanmax(arr) - np.nanmin(arr))


# ---------------------------------------------------------------------------------------------
# relaxation


def relax(atoms, calc, fmax: float, max_steps: int, fixed: Sequence[int] = (), what: str = "") -> dict[str, Any]:
    """LBFGS relaxation of a copy of ``atoms``; energy, steps, displacement stats, wall time.

    Raises :class:`~crucible.mlip.calculators.NonFiniteError` (naming ``what``) when the
    potential returns a non-finite energy or force."""
    from crucible.mlip.calculators import NonFiniteError
    from crucible.mlip.relax import relax as relax_structure

    result = relax_structure(atoms, calc, optimizer="LBFGS", fmax=fmax, steps=max_steps, fixed=fixed)
    if not result.ok:
        raise NonFiniteError(f"{what} relaxation: {result.reason}" if what else str(result.reason))
    out = {"energy": result.energy, "steps": result.steps, "time": result.time, "atoms": result.atoms}
    out.update(displacement_stats(atoms, result.atoms))
    return out


def gas_fixed_atom(atoms) -> int:
    """The gas molecule's atom held fixed while it relaxes: the first of the heaviest."""
    return int(np.argmax(atoms.get_masses()))


def _fingerprint(atoms) -> str:
    h = hashlib.sha256()
    for arr in (atoms.numbers, np.round(atoms.positions, 6), np.round(np.asarray(atoms.cell), 6), atoms.pbc):
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()[:16]


def _seed_everything(seed: int) -> None:
    import random

    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch
    except ImportError:
        return
    torch.manual_seed(seed)


def _single_point(calc, atoms, what: str) -> float:
    from crucible.mlip.calculators import NonFiniteError, single_energy

    try:
        return single_energy(calc, atoms)
    except NonFiniteError as exc:
        raise NonFiniteError(f"{what} single point: {exc}") from None


def run_reaction(reaction: Reaction, calc, params: dict[str, Any], gas_cache: dict | None = None) -> dict[str, Any]:
    """Every per-seed quantity of one reaction, the median-seed summary and single points."""
    p = {**DEFAULTS, **params}
    gas_cache = {} if gas_cache is None else gas_cache
    slab = next((s for s in reaction.structures if s.role == "slab"), None)
    adslab = next(s for s in reaction.structures if s.role == "adslab")
    gases = [s for s in reaction.structures if s.role == "gas"]
    oc20 = p["mode"] == "oc20"
    record: dict[str, Any] = {
        "reaction_id": reaction.reaction_id,
        "adsorbate": reaction.adsorbate,
        "dft_ads_eng": reaction.dft_ads_eng,
        "error": None,
    }
    seeds = []
    try:
        for seed in range(int(p["seeds"])):
            _seed_everything(seed)
            rec: dict[str, Any] = {"seed": seed}
            ads = relax(adslab.atoms, calc, p["fmax"], p["max_steps"], what=f"seed {seed}: adslab")
            rec.update(
                adslab_tot_eng=ads["energy"],
                adslab_steps=ads["steps"],
                adslab_max_disp=ads["max_disp"],
                adslab_pos_mae=ads["pos_mae"],
                adslab_pos_rmsd=ads["pos_rmsd"],
                adslab_time=ads["time"],
            )
            if oc20:
                rec.update(
                    ads_eng=ads["energy"],
                    slab_tot_eng=None,
                    slab_steps=0,
                    slab_max_disp=0.0,
                    slab_pos_mae=0.0,
                    slab_pos_rmsd=0.0,
                    slab_time=0.0,
                    max_bond_change=0.0,
                    substrate_displacement=0.0,
                    gas_energies={},
                )
            else:
                sl = relax(slab.atoms, calc, p["fmax"], p["max_steps"], what=f"seed {seed}: slab")
                gas_e = {}
                for g in gases:
                    key = (g.key, _fingerprint(g.atoms), seed)
                    if key not in gas_cache:
                        gas = g.atoms.copy()
                        gas.set_constraint()  # the one fixed atom is the gas molecule's only constraint
                        gas_cache[key] = relax(
                            gas,
                            calc,
                            p["fmax"],
                            p["gas_max_steps"],
                            fixed=[gas_fixed_atom(gas)],
                            what=f"seed {seed}: gas {g.key}",
                        )["energy"]
                    gas_e[g.key] = gas_cache[key]
                e_ads = (
                    adslab.stoi * ads["energy"] + slab.stoi * sl["energy"] + sum(g.stoi * gas_e[g.key] for g in gases)
                )
                rec.update(
                    ads_eng=float(e_ads),
                    slab_tot_eng=sl["energy"],
                    slab_steps=sl["steps"],
                    slab_max_disp=sl["max_disp"],
                    slab_pos_mae=sl["pos_mae"],
                    slab_pos_rmsd=sl["pos_rmsd"],
                    slab_time=sl["time"],
                    gas_energies=gas_e,
                    max_bond_change=max_bond_change(
                        adslab.atoms, ads["atoms"], reaction.adsorbate_indices, p["chemical_bond_cutoff"]
                    ),
                    substrate_displacement=substrate_displacement(
                        adslab.atoms, ads["atoms"], reaction.adsorbate_indices
                    ),
                )
            seeds.append(rec)
        _seed_everything(0)
        if oc20:
            single = _single_point(calc, adslab.atoms, "adslab")
        else:
            single = sum(s.stoi * _single_point(calc, s.atoms, s.role) for s in reaction.structures)
    except Exception as exc:  # a potential that cannot handle this system: recorded, never dropped
        text = str(exc).strip().replace("\n", " ")[:300]
        record.update(error=f"{type(exc).__name__}: {text}", seeds=seeds, final=None, single_calculation=None)
        log.warning("%s: %s", reaction.reaction_id, record["error"])
        return record
    idx, med = median_seed([s["ads_eng"] for s in seeds])
    record["seeds"] = seeds
    record["final"] = {
        "ads_eng_median": med,
        "median_num": idx,
        "slab_seed_range": 0.0 if oc20 else seed_range([s["slab_tot_eng"] for s in seeds]),
        "ads_seed_range": seed_range([s["adslab_tot_eng"] for s in seeds]),
        "ads_eng_seed_range": seed_range([s["ads_eng"] for s in seeds]),
    }
    record["single_calculation"] = {"ads_eng": float(single)}
    record["time_total_slab"] = float(sum(s["slab_time"] for s in seeds))
    record["time_total_adslab"] = float(sum(s["adslab_time"] for s in seeds))
    record["steps_total_slab"] = int(sum(s["slab_steps"] for s in seeds))
    record["steps_total_adslab"] = int(sum(s["adslab_steps"] for s in seeds))
    return record


# ---------------------------------------------------------------------------------------------
# chunks, resumable


def chunk_ids(ids: Sequence[str], chunk: int, n_chunks: int) -> list[str]:
    """Contiguous slice ``chunk`` of ``n_chunks`` over the sorted reaction ids."""
    if not 0 <= chunk < n_chunks:
        raise ValueError(f"chunk {chunk} outside 0..{n_chunks - 1}")
    ordered = sorted(ids)
    bounds = np.linspace(0, len(ordered), n_chunks + 1).round().astype(int)
    return ordered[bounds[chunk] : bounds[chunk + 1]]


def _part_name(reaction_id: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", reaction_id)
    return f"{safe}-{hashlib.sha256(reaction_id.encode()).hexdigest()[:8]}.json"


def settings_key(params: dict[str, Any], model: str) -> str:
    p = {**DEFAULTS, **params, "model": model}
    return hashlib.sha256(json.dumps(p, sort_keys=True).encode()).hexdigest()[:16]


def run_chunk(
    reactions: list[Reaction],
    calc,
    params: dict[str, Any],
    out: str | os.PathLike,
    model: str,
    progress: bool = True,
    device: str | None = None,
) -> dict[str, Any]:
    """Relax ``reactions`` (one chunk), keeping each finished reaction in ``{out}.parts/`` so a
    killed run resumes; then write the chunk's JSON to ``out`` and remove the parts."""
    from tqdm import tqdm

    from crucible.io import write_json

    p = {**DEFAULTS, **params}
    if p["mode"] not in MODES:
        raise ValueError(f"mode {p['mode']!r}: one of {MODES}")
    out = Path(out)
    parts = out.with_name(out.name + ".parts")
    parts.mkdir(parents=True, exist_ok=True)
    key = settings_key(params, model)
    gas_cache: dict = {}
    records, n_resumed, n_computed = [], 0, 0
    for reaction in tqdm(
        sorted(reactions, key=lambda r: r.reaction_id), desc=f"{model} relaxations", disable=None if progress else True
    ):
        part = parts / _part_name(reaction.reaction_id)
        if part.is_file():
            saved = json.loads(part.read_text(encoding="utf-8"))
            if saved.get("settings_key") == key and saved["record"]["reaction_id"] == reaction.reaction_id:
                records.append(saved["record"])
                n_resumed += 1
                continue
        record = run_reaction(reaction, calc, p, gas_cache)
        write_json({"settings_key": key, "record": record}, part)
        records.append(record)
        n_computed += 1
    # the device the potential was loaded on (crucible.mlip.calculators.Potential.device)
    doc = {
        "model": model,
        "device": device or "cpu",
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
