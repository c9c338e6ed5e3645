"""Crystal structures as crucible stores them (pymatgen JSON strings) -> canonical hashes and arrays.

The clean stage keeps each structure as ``Structure.to_json()``. Structure features are cached
per distinct structure, keyed by :func:`structure_hash`: the SHA-256 of a canonical text of
exactly what a featurizer reads, namely the lattice matrix and, site by site in stored order,
the species with occupancies and the fractional coordinates (floats written with Python's
shortest round-trip ``repr``, so the key changes iff one of those numbers changes by a bit).
Everything else in the JSON (the ``@version``, cartesian ``xyz``, labels, site properties such
as ``magmom``, the cached a/b/c/angles) is left out, so two serialisations of the same crystal
share a key. Site order is kept, not sorted: featurizers are permutation-invariant only up to
rounding, and a cache must return what a fresh computation would.

:func:`parse_structure` reads the same fields straight from the JSON (no pymatgen objects);
``Structure.from_dict`` stores ``abc`` and the lattice matrix unchanged, so the arrays equal
``site.frac_coords`` and ``lattice.matrix`` of the pymatgen object bit for bit.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from crucible.core.errors import DataValidationError


@dataclass(frozen=True)
class ParsedStructure:
    lattice: np.ndarray  # (3, 3), rows are the lattice vectors in Å
    frac_coords: np.ndarray  # (n_sites, 3)
    numbers: np.ndarray  # (n_sites,) atomic numbers, int64
    symbols: tuple[str, ...]


class StructureError(DataValidationError):
    """A structure that cannot be read or featurized (names the reason; callers add file/row)."""


@lru_cache(maxsize=None)
def _atomic_number(symbol: str) -> int:
    from pymatgen.core.periodic_table import Element

    try:
        return int(Element(symbol).Z)
    except ValueError:
        raise StructureError(f"unknown element {symbol!r}") from None


def _load(structure_json: str | dict) -> dict:
    if isinstance(structure_json, dict):
        return structure_json
    if not isinstance(structure_json, str):
        raise StructureError(f"not a structure: {type(structure_json).__name__}")
    from crucible.core.strict_json import unique_keys

    try:
        return json.loads(structure_json, object_pairs_hook=unique_keys)
    except ValueError as exc:  # not JSON, or a key given twice
        raise StructureError(f"not JSON: {exc}") from None


def _canonical(d: dict) -> list:
    try:
        lattice = [[float(x) for x in row] for row in d["lattice"]["matrix"]]
        sites = [
            [sorted([sp["element"], float(sp["occu"])] for sp in site["species"]), [float(x) for x in site["abc"]]]
            for site in d["sites"]
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise StructureError(f"not a pymatgen Structure dict (missing or bad {exc})") from None
    if len(lattice) != 3 or any(len(r) != 3 for r in lattice) or not sites:
        raise StructureError("a structure needs a 3x3 lattice and at least one site")
    return [lattice, sites]


def structure_hash(structure_json: str | dict) -> str:
    """SHA-256 (hex) of the canonical lattice + species + fractional coordinates."""
    text = json.dumps(_canonical(_load(structure_json)), separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def parse_structure(structure_json: str | dict) -> ParsedStructure:
    """Lattice, fractional coordinates and atomic numbers of an ordered structure."""
    lattice, sites = _canonical(_load(structure_json))
    symbols = []
    for i, (species, _) in enumerate(sites):
        if len(species) != 1 or species[0][1] != 1.0:
            raise StructureError(f"site {i} is disordered ({species}); only ordered structures are supported")
        symbols.append(species[0][0])
    return ParsedStructure(
        lattice=np.array(lattice, dtype=np.float64),
        frac_coords=np.array([abc for _, abc in sites], dtype=np.float64),
        numbers=np.array([_atomic_number(s) for s in symbols], dtype=np.int64),
        symbols=tuple(symbols),
    )
