"""When two stored structures are the same structure: the equivalence behind the relaxation cache.

CatBench 1.1.6 (``catbench/utils/structure_dedup.py``, ``reuse_key`` and
``structures_equivalent``) relaxes a clean slab once per seed and reuses the result for every
reaction whose slab is the same structure: the same stored reference energy (to 1e-6 eV) and the
same atoms up to a lattice translation and a reordering, within 1e-3 Å, in the same cell (to
0.01 Å). Catalysis-Hub stores each copy of a slab in its own frame, so a byte comparison would
miss most of them. This module implements that criterion (our own code), and is stricter in one
point: the fixed atoms must correspond too, since a slab with other FixAtoms relaxes to another
energy.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

import numpy as np

POSITION_TOL = 1e-3  # Å: CatBench's structures_equivalent tolerance
CELL_TOL = 0.01  # Å: largest difference of any cell-matrix element


def fixed_set(atoms) -> frozenset[int]:
    from ase.constraints import FixAtoms

    out: set[int] = set()
    for c in atoms.constraints:
        if isinstance(c, FixAtoms):
            out.update(int(i) for i in c.get_indices())
    return frozenset(out)


def signature(atoms, energy: float | None) -> tuple:
    """A cheap bucket key: structures with different signatures are never the same."""
    e = None if energy is None or not np.isfinite(energy) else round(float(energy), 6)
    counts = tuple(sorted(Counter(atoms.get_chemical_symbols()).items()))
    return (e, counts, len(fixed_set(atoms)))


def same_structure(a, b, tol: float = POSITION_TOL) -> bool:
    """True when ``b`` is ``a`` moved by one translation and with its atoms reordered (each atom
    within ``tol`` of its partner, minimum image where periodic), in the same cell, with fixed
    atoms matched to fixed atoms."""
    from ase.geometry import get_distances

    if len(a) != len(b):
        return False
    if len(a) == 0:
        return True
    sa, sb = np.asarray(a.get_chemical_symbols()), np.asarray(b.get_chemical_symbols())
    if sorted(sa.tolist()) != sorted(sb.tolist()):
        return False
    if np.abs(np.asarray(a.cell) - np.asarray(b.cell)).max() > CELL_TOL:
        return False
    fa, fb = fixed_set(a), fixed_set(b)
    if len(fa) != len(fb):
        return False
    pa, pb = a.get_positions(), b.get_positions()
    periodic = bool(np.any(a.pbc))
    for j in np.flatnonzero(sb == sa[0]):
        shifted = pa + (pb[j] - pa[0])
        if periodic:
            _, dist = get_distances(shifted, pb, cell=a.cell, pbc=a.pbc)
        else:
            dist = np.linalg.norm(shifted[:, None, :] - pb[None, :, :], axis=2)
        used: set[int] = set()
        for i in range(len(a)):
            partner = None
            for k in np.argsort(dist[i], kind="stable"):
                if dist[i, k] > tol:
                    break
                if k in used or sb[k] != sa[i] or ((i in fa) != (int(k) in fb)):
                    continue
                partner = int(k)
                break
            if partner is None:
                break
            used.add(partner)
        if len(used) == len(a):
            return True
    return False


class StructureIndex:
    """Representatives of the distinct structures seen so far, each with a payload."""

    def __init__(self) -> None:
        self._buckets: dict[tuple, list[tuple[Any, Any]]] = {}

    def find(self, atoms, energy: float | None, extra: Any = None):
        """The payload stored for the same structure (and the same ``extra``), else None."""
        for rep, payload in self._buckets.get((signature(atoms, energy), extra), []):
            if same_structure(atoms, rep):
                return payload
        return None

    def add(self, atoms, energy: float | None, payload: Any, extra: Any = None) -> None:
        self._buckets.setdefault((signature(atoms, energy), extra), []).append((atoms, payload))


def relaxation_groups(reactions: Iterable) -> dict[str, int]:
    """Group number per reaction id: reactions that share a clean slab, or an adslab with the
    same adsorbate atoms, are in one group (numbered in sorted-id order), so that chunking by
    group keeps every reuse of a relaxation inside one job."""
    reactions = sorted(reactions, key=lambda r: r.reaction_id)
    parent = list(range(len(reactions)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    slabs, adslabs = StructureIndex(), StructureIndex()
    for n, r in enumerate(reactions):
        for s in r.structures:
            if s.role == "gas":
                continue
            index, extra = (slabs, None) if s.role == "slab" else (adslabs, tuple(r.adsorbate_indices))
            other = index.find(s.atoms, s.dft_energy, extra)
            if other is None:
                index.add(s.atoms, s.dft_energy, n, extra)
            else:
                parent[root(n)] = root(other)
    numbers: dict[int, int] = {}
    out = {}
    for n, r in enumerate(reactions):
        out[r.reaction_id] = numbers.setdefault(root(n), len(numbers))
    return out
