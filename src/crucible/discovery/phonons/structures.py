"""The 103 phononDB crystals with their phono3py settings (pinned role
``discovery/phonons/structures``), each frame checked before any job uses it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from crucible.core.errors import ConfigError, DataValidationError
from crucible.core.io import InFile

STRUCTURES_ROLE = "discovery/phonons/structures"
REFERENCE_ROLE = "discovery/phonons/pbe-reference"
PUBLISHED_CHGNET_ROLE = "discovery/phonons/chgnet-published"
REQUIRED = ("fc2_supercell", "fc3_supercell", "q_mesh", "mp_id")
# the benchmark names a polymorph by its space group: rock salt, zinc blende, wurtzite
STRUCTURE_TYPES = {225: "rs", 216: "zb", 186: "wz"}


@dataclass(frozen=True)
class Material:
    """One crystal of the set, its phono3py settings checked."""

    mp_id: str
    name: str
    spacegroup: int | None
    atoms: Any  # ase.Atoms, info kept
    fc2_supercell: tuple[tuple[int, ...], ...]
    fc3_supercell: tuple[tuple[int, ...], ...]
    q_mesh: tuple[int, int, int]

    @property
    def structure_type(self) -> str:
        return STRUCTURE_TYPES.get(self.spacegroup or 0, "other")

    @property
    def desc(self) -> str:
        """The benchmark's label, e.g. ``MgO-rs``."""
        return f"{self.name}-{self.structure_type}"


def _matrix(value: Any, where: str, field: str) -> tuple[tuple[int, ...], ...]:
    arr = np.asarray(value)
    if arr.shape != (3, 3) or not np.issubdtype(arr.dtype, np.integer):
        raise DataValidationError(f"{where}: field {field!r} must be a 3×3 integer matrix, got {value!r}")
    if round(abs(float(np.linalg.det(arr)))) < 1:
        raise DataValidationError(f"{where}: field {field!r} is singular: {value!r}")
    return tuple(tuple(int(x) for x in row) for row in arr)


def material_of(atoms: Any, index: int, source: str) -> Material:
    """The :class:`Material` of frame ``index`` of ``source``; a missing or malformed setting is
    refused naming the frame and the field."""
    info = atoms.info
    where = f"{source}: frame {index}" + (f" ({info['mp_id']})" if info.get("mp_id") else "")
    missing = [key for key in REQUIRED if info.get(key) is None]
    if missing:
        raise DataValidationError(f"{where}: missing field(s) {', '.join(missing)}")
    mesh = np.asarray(info["q_mesh"])
    if mesh.shape != (3,) or not np.issubdtype(mesh.dtype, np.integer) or (mesh < 1).any():
        raise DataValidationError(f"{where}: field 'q_mesh' must be three positive integers, got {info['q_mesh']!r}")
    spg = info.get("symm.no")
    return Material(
        mp_id=str(info["mp_id"]),
        name=str(info.get("name") or atoms.get_chemical_formula()),
        spacegroup=int(spg) if spg is not None else None,
        atoms=atoms,
        fc2_supercell=_matrix(info["fc2_supercell"], where, "fc2_supercell"),
        fc3_supercell=_matrix(info["fc3_supercell"], where, "fc3_supercell"),
        q_mesh=tuple(int(x) for x in mesh),
    )


def read_structures(path: InFile, check_pin: bool = True) -> list[Material]:
    """Every frame of the structures file, validated; read through its pin unless ``check_pin``
    is off (a test's own file)."""
    import ase.io

    if check_pin:
        from crucible.sources.pinned_files import pinned

        path = pinned(STRUCTURES_ROLE, path)
    try:
        frames = ase.io.read(str(path), index=":", format="extxyz")
    except Exception as exc:  # noqa: BLE001 - the parser's own message, with the file named
        raise DataValidationError(f"{path}: not a readable extended XYZ file: {exc}") from None
    materials = [material_of(atoms, i, str(path)) for i, atoms in enumerate(frames)]
    seen: dict[str, int] = {}
    for i, m in enumerate(materials):
        if m.mp_id in seen:
            raise DataValidationError(f"{path}: frame {i}: mp_id {m.mp_id!r} repeats frame {seen[m.mp_id]}")
        seen[m.mp_id] = i
    return materials


def select(materials: list[Material], wanted: str | list[str]) -> list[Material]:
    """``all``, or the materials named by mp id (``mp-1265``), label (``MgO-rs``) or name (``ZnS``:
    every polymorph), in the file's order; an unknown name is a config error."""
    if isinstance(wanted, str):
        if wanted.strip().lower() == "all":
            return list(materials)
        wanted = [w.strip() for w in wanted.split(",") if w.strip()]
    chosen: set[str] = set()
    for w in wanted:
        hits = [m.mp_id for m in materials if w in (m.mp_id, m.desc, m.name)]
        if not hits:
            raise ConfigError(f"discovery.phonons.materials: {w!r} is no mp id, label (MgO-rs) or name of the set")
        chosen.update(hits)
    return [m for m in materials if m.mp_id in chosen]


def by_id(materials: list[Material], mp_id: str) -> Material:
    for m in materials:
        if m.mp_id == mp_id:
            return m
    raise ConfigError(f"material {mp_id!r} is not in the structures file")
