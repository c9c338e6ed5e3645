"""Relax every reaction K times with one potential and record CatBench's per-seed quantities.

Per seed (CatBench 1.1.6, ``catbench/adsorption/calculation/calculation.py`` and
``catbench/utils/calculation_utils.py``): slab and adslab relaxed from the reference geometries with ASE's LBFGS
(``fmax`` 0.05 eV/Å, at most ``max_steps``; FixAtoms from the data), gas molecules relaxed with
one of their heaviest atoms fixed (at most ``gas_max_steps``), all through
:func:`crucible.potentials.relax.relax`; E_ads = Σ stoi·E; displacements are minimum-image norms initial → relaxed. The summary takes the median-rank seed (stable sort,
NaN last, position ⌊(K−1)/2⌋) and max − min ranges over seeds. ``single_calculation`` holds
single-point energies of the unrelaxed structures with the first seed. OC20 mode relaxes only
the adslab and takes its energy as E_ads.

A non-finite energy or force from the potential (a relaxation's failure status, or a NaN single
point) makes the reaction a calculation failure, recorded with its reason like an exception from
the potential: it is counted in ``Num_failed``, never rated.

As in CatBench 1.1.6 (``catbench/adsorption/calculation/calculation.py``, ``structure_cache``),
a clean slab that another reaction of the chunk already relaxed with the same seed is not relaxed
again (same structure: :mod:`crucible.catalysis.equivalence`): its energy and displacements are
reused and the reuse counts 0 time and 0 steps; an identical adslab with the same adsorbate atoms
is reused the same way. Every structure is relaxed and evaluated with ``tags`` set to 1, and the
gas atom held fixed is drawn among the atoms of the highest atomic number, as CatBench does, but
from a seeded generator, so runs repeat.

A chunk of reactions is relaxed, resumably, by :mod:`crucible.catalysis.chunks`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import zlib
from typing import Any, Sequence

import numpy as np

from crucible.catalysis.adsorption import Reaction

log = logging.getLogger(__name__)

DEFAULTS = {
    "seeds": 3,
    "fmax": 0.05,
    "max_steps": 999,
    "gas_max_steps": 500,
    "mode": "basic",
    "chemical_bond_cutoff": 6.0,
    "structure_cache": True,
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


def _catbench_copy(atoms):
    """A copy as CatBench hands structures to the potential: every tag set to 1 (models that
    read tags, e.g. to tell adsorbate from surface, then see what they see in CatBench)."""
    work = atoms.copy()
    work.set_tags(np.ones(len(work), dtype=int))
    return work


def relax(atoms, calc, fmax: float, max_steps: int, fixed: Sequence[int] = (), what: str = "") -> dict[str, Any]:
    """LBFGS relaxation (:func:`crucible.potentials.relax.relax`) of a copy of ``atoms`` with tags 1;
    energy, steps, displacement stats, wall time.

    Raises :class:`~crucible.potentials.spec.NonFiniteError` (naming ``what``) when the
    potential returns a non-finite energy or force."""
    from crucible.potentials.relax import relax as relax_structure
    from crucible.potentials.spec import NonFiniteError

    result = relax_structure(_catbench_copy(atoms), calc, optimizer="LBFGS", fmax=fmax, steps=max_steps, fixed=fixed)
    if not result.ok:
        raise NonFiniteError(f"{what} relaxation: {result.reason}" if what else str(result.reason))
    out = {"energy": result.energy, "steps": result.steps, "time": result.time, "atoms": result.atoms}
    out.update(displacement_stats(atoms, result.atoms))
    return out


def gas_fixed_atom(atoms, seed: int, key: str) -> int:
    """The gas atom held fixed: one of the atoms with the highest atomic number (CatBench draws it
    with numpy's global generator, unseeded), drawn here from a generator seeded by the seed and
    the gas key, so it is the same on every run."""
    numbers = np.asarray(atoms.numbers)
    heaviest = np.flatnonzero(numbers == numbers.max())
    rng = np.random.default_rng([int(seed), zlib.crc32(key.encode())])
    return int(heaviest[rng.integers(len(heaviest))])


def relax_gas(gas, calc, p: dict[str, Any], seed: int) -> float:
    """Relaxed energy of a gas molecule, its one fixed atom (:func:`gas_fixed_atom`) its only constraint."""
    atoms = gas.atoms.copy()
    atoms.set_constraint()
    fixed = [gas_fixed_atom(atoms, seed, gas.key)]
    return relax(atoms, calc, p["fmax"], p["gas_max_steps"], fixed=fixed, what=f"seed {seed}: gas {gas.key}")["energy"]


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
    from crucible.potentials.energies import single_energy
    from crucible.potentials.spec import NonFiniteError

    try:
        return single_energy(calc, _catbench_copy(atoms))
    except NonFiniteError as exc:
        raise NonFiniteError(f"{what} single point: {exc}") from None


SLAB_FIELDS = ("slab_tot_eng", "slab_steps", "slab_max_disp", "slab_pos_mae", "slab_pos_rmsd")
ADSLAB_FIELDS = (
    "adslab_tot_eng",
    "adslab_steps",
    "adslab_max_disp",
    "adslab_pos_mae",
    "adslab_pos_rmsd",
    "max_bond_change",
    "substrate_displacement",
)


class RelaxationCache:
    """Per-seed results of relaxed clean slabs and adslabs, and relaxed gas energies, shared by
    the reactions of one chunk (CatBench's ``structure_cache`` and gas cache)."""

    def __init__(self, structures: bool = True) -> None:
        from crucible.catalysis.equivalence import StructureIndex

        self.structures = structures
        self.index = StructureIndex()
        self.gas: dict[tuple, float] = {}

    @staticmethod
    def _extra(reaction: Reaction, role: str, seed: int):
        return ("slab", seed) if role == "slab" else ("adslab", tuple(reaction.adsorbate_indices), seed)

    def find(self, reaction: Reaction, role: str, seed: int) -> dict[str, Any] | None:
        if not self.structures:
            return None
        s = next(x for x in reaction.structures if x.role == role)
        return self.index.find(s.atoms, s.dft_energy, self._extra(reaction, role, seed))

    def add(self, reaction: Reaction, role: str, seed: int, values: dict[str, Any]) -> None:
        if not self.structures:
            return
        s = next(x for x in reaction.structures if x.role == role)
        self.index.add(s.atoms, s.dft_energy, dict(values), self._extra(reaction, role, seed))

    @staticmethod
    def gas_key(gas, seed: int) -> tuple:
        return (gas.key, _fingerprint(gas.atoms), seed)

    def remember(self, reaction: Reaction, record: dict[str, Any]) -> dict[str, Any] | None:
        """Take in a resumed record and return it as this run would have written it, or None (and
        nothing taken in) when it disagrees with what this run already holds: a reused slab or
        adslab whose relaxation is not, or no longer, in the cache, or another gas energy. Such a
        record is recomputed. A relaxation that this run already holds from an earlier reaction
        becomes a reuse (0 time, 0 steps), as it would have been in one uninterrupted run."""
        if record.get("error"):
            return record
        gases = {g.key: g for g in reaction.structures if g.role == "gas"}
        new_structures, new_gas, now_reused = [], {}, []
        for n, seed_rec in enumerate(record["seeds"]):
            seed = seed_rec["seed"]
            for role, fields in (("slab", SLAB_FIELDS), ("adslab", ADSLAB_FIELDS)):
                if not self.structures or not any(s.role == role for s in reaction.structures):
                    continue
                values = {k: seed_rec.get(k) for k in fields}
                cached = self.find(reaction, role, seed)
                if cached is None:
                    if seed_rec.get(f"{role}_cached"):
                        return None
                    new_structures.append((role, seed, values))
                elif cached != values:
                    return None
                elif not seed_rec.get(f"{role}_cached"):
                    now_reused.append((n, role))
            for key, energy in (seed_rec.get("gas_energies") or {}).items():
                if key not in gases:
                    return None
                gkey = self.gas_key(gases[key], seed)
                if self.gas.get(gkey, new_gas.get(gkey, energy)) != energy:
                    return None
                new_gas[gkey] = energy
        for role, seed, values in new_structures:
            self.add(reaction, role, seed, values)
        for gkey, energy in new_gas.items():
            self.gas.setdefault(gkey, energy)
        if now_reused:
            record = json.loads(json.dumps(record))
            for n, role in now_reused:
                record["seeds"][n].update({f"{role}_cached": True, f"{role}_time": 0.0})
            _count_work(record)
        return record


def _count_work(record: dict[str, Any]) -> None:
    """Time and steps of the relaxations this reaction performed: a reused relaxation counts 0
    time and 0 steps (CatBench's ``time_total_*`` / ``steps_total_*``), although the seed keeps the
    reused steps for the convergence check."""
    seeds = record["seeds"]
    for role in ("slab", "adslab"):
        record[f"time_total_{role}"] = float(sum(s[f"{role}_time"] for s in seeds if not s.get(f"{role}_cached")))
        record[f"steps_total_{role}"] = int(sum(s[f"{role}_steps"] for s in seeds if not s.get(f"{role}_cached")))


def _relaxed(reaction: Reaction, role: str, structure, calc, p, seed: int, cache: RelaxationCache) -> dict[str, Any]:
    """The per-seed fields of the slab or adslab (``role``): reused from ``cache`` (0 time) when
    this seed already relaxed the same structure, else relaxed and, outside OC20 mode, cached;
    an adslab also gets the adsorbate's bond change and the substrate's displacement."""
    hit = cache.find(reaction, role, seed)
    if hit is not None:
        return {**hit, f"{role}_time": 0.0, f"{role}_cached": True}
    relaxed = relax(structure.atoms, calc, p["fmax"], p["max_steps"], what=f"seed {seed}: {role}")
    out = {
        f"{role}_tot_eng": relaxed["energy"],
        f"{role}_steps": relaxed["steps"],
        f"{role}_max_disp": relaxed["max_disp"],
        f"{role}_pos_mae": relaxed["pos_mae"],
        f"{role}_pos_rmsd": relaxed["pos_rmsd"],
    }
    # OC20 mode relaxes the adslab alone and caches nothing (the slab is never relaxed there)
    if p["mode"] != "oc20":
        if role == "adslab":
            indices = reaction.adsorbate_indices
            out["max_bond_change"] = max_bond_change(
                structure.atoms, relaxed["atoms"], indices, p["chemical_bond_cutoff"]
            )
            out["substrate_displacement"] = substrate_displacement(structure.atoms, relaxed["atoms"], indices)
        cache.add(reaction, role, seed, out)
    return {**out, f"{role}_time": relaxed["time"], f"{role}_cached": False}


def run_reaction(
    reaction: Reaction,
    calc,
    params: dict[str, Any],
    gas_cache: dict | None = None,
    cache: RelaxationCache | None = None,
) -> dict[str, Any]:
    """Every per-seed quantity of one reaction, the median-seed summary and single points.
    ``cache`` (or, for the gas energies alone, ``gas_cache``) is shared across the reactions of a
    chunk; a failure anywhere (the potential raising, e.g. on an element it does not know) makes
    the record an error with the stage it happened in, counted as failed by the analysis."""
    p = {**DEFAULTS, **params}
    oc20 = p["mode"] == "oc20"
    if cache is None:
        cache = RelaxationCache(bool(p["structure_cache"]) and not oc20)
    if gas_cache is not None:
        cache.gas = gas_cache
    slab = next((s for s in reaction.structures if s.role == "slab"), None)
    adslab = next(s for s in reaction.structures if s.role == "adslab")
    gases = [s for s in reaction.structures if s.role == "gas"]
    record: dict[str, Any] = {
        "reaction_id": reaction.reaction_id,
        "adsorbate": reaction.adsorbate,
        "dft_ads_eng": reaction.dft_ads_eng,
        "error": None,
    }
    seeds = []
    stage = "single_point"
    try:
        # Single points first, as CatBench computes them (its failures are then named by the
        # same stage), with the first seed.
        _seed_everything(0)
        if oc20:
            stage = "single_point:adslab"
            single = _single_point(calc, adslab.atoms, "adslab")
        else:
            single = 0.0
            for s in reaction.structures:
                stage = f"single_point:{s.role if s.role != 'gas' else 'gas:' + s.key}"
                single += s.stoi * _single_point(calc, s.atoms, s.role if s.role != "gas" else f"gas {s.key}")
        if not oc20 and slab is None:
            stage = "input"
            raise ValueError("no clean slab ('star') structure")
        for seed in range(int(p["seeds"])):
            _seed_everything(seed)
            rec: dict[str, Any] = {"seed": seed}
            stage = "relax:adslab"
            rec.update(_relaxed(reaction, "adslab", adslab, calc, p, seed, cache))
            if oc20:
                rec.update(
                    ads_eng=rec["adslab_tot_eng"],
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
                stage = "relax:slab"
                rec.update(_relaxed(reaction, "slab", slab, calc, p, seed, cache))
                gas_e = {}
                for g in gases:
                    stage = f"relax:gas:{g.key}"
                    key = cache.gas_key(g, seed)
                    if key not in cache.gas:
                        cache.gas[key] = relax_gas(g, calc, p, seed)
                    gas_e[g.key] = cache.gas[key]
                e_ads = (
                    adslab.stoi * rec["adslab_tot_eng"]
                    + slab.stoi * rec["slab_tot_eng"]
                    + sum(g.stoi * gas_e[g.key] for g in gases)
                )
                rec.update(ads_eng=float(e_ads), gas_energies=gas_e)
            seeds.append(rec)
    except Exception as exc:  # a potential that cannot handle this system: recorded, never dropped
        text = str(exc).strip().replace("\n", " ")[:300]
        record.update(
            error=f"{type(exc).__name__}: {text}", stage=stage, seeds=seeds, final=None, single_calculation=None
        )
        log.warning("%s: %s (%s)", reaction.reaction_id, record["error"], stage)
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
    _count_work(record)
    return record
