"""Adsorption reactions as every dataset reader gives them: the records and the rules they share.

A reader (:mod:`~crucible.catalysis.catbench_files` for CatBench's own files,
:mod:`~crucible.catalysis.cathub` for Catalysis-Hub's raw reactions,
:mod:`~crucible.catalysis.vasp_tree` for a user's VASP folders) returns :class:`Reactions`: one
:class:`Reaction` per adsorption energy, each with its :class:`Structure` list, sorted by id, and
what it dropped and why. :mod:`~crucible.catalysis.clean` writes them as one table + an ASE
database.

Structure keys follow CatBench: ``star`` is the clean slab, ``{adsorbate}star`` the adslab, keys
ending in ``gas`` are gas references; E_ads = Σ stoi·E.

Filtering (``filtering``): ``catbench`` (default) drops what CatBench drops, for CatBench's
reasons, and lists every dropped reaction with its reason (CatBench only logs them);
``strict`` refuses the whole dataset instead, checks Σ stoi·E to 1e-4 eV without CatBench's
adslab-coefficient retry, and adds Catalysis-Hub's ``energyCorrection`` to each energy, as
crucible did before.
"""

from __future__ import annotations

import io
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from crucible.catalysis import FILTERINGS
from crucible.core import formats
from crucible.core.errors import DataValidationError

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


def check_filtering(filtering: str) -> None:
    if filtering not in FILTERINGS:
        raise DataValidationError(f"filtering {filtering!r}: one of {', '.join(FILTERINGS)}")


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


def has_fixed_atoms(atoms) -> bool:
    from ase.constraints import FixAtoms

    return any(isinstance(c, FixAtoms) and len(c.get_indices()) > 0 for c in atoms.constraints)


def atoms_from_ase_json(text: str, where: str):
    from ase.io import read

    try:
        return read(io.StringIO(text), format="json")
    except Exception as exc:
        raise DataValidationError(f"{where}: cannot read the ASE-JSON structure: {exc}") from exc


def finite_float(value: Any, where: str) -> float:
    """``value`` as a finite float, or an error naming ``where``."""
    # crucible.core.formats' rule for numbers in text: a number written in other digits is refused
    if isinstance(value, bool) or (isinstance(value, str) and formats.non_ascii_digits(value)):
        raise DataValidationError(f"{where}: not a number: {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise DataValidationError(f"{where}: not a number: {value!r}") from None
    if not math.isfinite(out):
        raise DataValidationError(f"{where}: not finite: {value!r}")
    return out


def assemble_reaction(
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
    """The :class:`Reaction` of one clean slab at most and exactly one adslab; its adsorbate
    atoms detected when the source does not give them (:func:`detect_adsorbate_indices`),
    checked to be atoms of the adslab when it does; structures slab, adslab, gases by key."""
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


def strict_refusal(path: Path, dropped: list[dict[str, Any]]) -> DataValidationError:
    """The error of ``filtering: strict`` for a dataset with reactions CatBench would drop."""
    lines = [f"  {d['where']}: {d['reason']}" for d in dropped[:10]]
    more = f"\n  ... and {len(dropped) - 10} more" if len(dropped) > 10 else ""
    return DataValidationError(
        f"{path}: {len(dropped)} reaction(s) cannot be used as they are (filtering: strict refuses the "
        f"dataset; filtering: catbench would drop them and list them in the card):\n" + "\n".join(lines) + more
    )
