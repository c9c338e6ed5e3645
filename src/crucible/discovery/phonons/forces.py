"""Displaced supercells and their force sets, in files a job each.

Every job rebuilds the same phono3py object from the relaxation file and the material's settings
(the displacement dataset is a pure function of them); a digest of the dataset travels in every
force file and is checked where the files are put together, so a chunk made from another
relaxation is refused rather than mixed in. Force files are JSON: shape and dtype stated, values
float64, written atomically; a chunk is ``fc3`` displacements ``[start, stop)``.
"""

from __future__ import annotations

import hashlib
import warnings
from typing import Any

import numpy as np

from crucible.core.errors import DataValidationError
from crucible.core.io import InFile, read_json, write_json
from crucible.discovery.phonons.protocol import PHONONS_FORMAT, PROTOCOL
from crucible.discovery.phonons.relaxation import atoms_of


class NonFiniteForce(ValueError):
    """The potential returned a NaN or infinite force."""


def build_phono3py(atoms: Any, fc2_supercell, fc3_supercell, q_mesh, displacements: bool = True):
    """phono3py on ``atoms`` with the material's supercells and mesh, displacements generated."""
    from phono3py import Phono3py
    from phonopy.structure.atoms import PhonopyAtoms

    unitcell = PhonopyAtoms(
        symbols=list(atoms.get_chemical_symbols()), cell=np.asarray(atoms.cell), positions=atoms.positions
    )
    with warnings.catch_warnings():
        # phonopy 4 says at every call that "auto" was not v3's default; it is the benchmark's
        warnings.filterwarnings("ignore", message="(?s).*differs from phonopy v3")
        ph3 = _phono3py(Phono3py, unitcell, fc2_supercell, fc3_supercell)
    ph3.mesh_numbers = list(q_mesh)
    if displacements:
        ph3.generate_displacements(distance=PROTOCOL["displacement_distance"])
    return ph3


def _phono3py(Phono3py, unitcell, fc2_supercell, fc3_supercell):
    return Phono3py(
        unitcell,
        supercell_matrix=np.asarray(fc3_supercell),
        phonon_supercell_matrix=np.asarray(fc2_supercell),
        primitive_matrix="auto",
        symprec=PROTOCOL["symprec"],
        log_level=0,
    )


def phono3py_of(relaxation: dict, material) -> Any:
    return build_phono3py(atoms_of(relaxation), material.fc2_supercell, material.fc3_supercell, material.q_mesh)


def dataset_digest(ph3) -> str:
    """SHA-256 of the displaced positions of both sets, rounded to 1e-8 Å."""
    h = hashlib.sha256()
    for cells in (ph3.phonon_supercells_with_displacements, ph3.supercells_with_displacements):
        for cell in cells:
            h.update(b"-" if cell is None else np.round(cell.positions, 8).tobytes())
    return h.hexdigest()


def supercells(ph3, order: int, start: int = 0, stop: int | None = None) -> list[Any]:
    """ASE atoms of the displaced supercells of ``order`` (2 or 3), ``[start, stop)``; None where
    phono3py skips a displacement pair."""
    from ase import Atoms

    cells = ph3.phonon_supercells_with_displacements if order == 2 else ph3.supercells_with_displacements
    out = []
    for cell in cells[start:stop]:
        out.append(None if cell is None else Atoms(cell.symbols, cell=cell.cell, positions=cell.positions, pbc=True))
    return out


def count(ph3, order: int) -> int:
    return len(ph3.phonon_supercells_with_displacements if order == 2 else ph3.supercells_with_displacements)


def forces_of(potential: Any, atoms_list: list[Any]) -> np.ndarray:
    """Forces (n, atoms, 3), float64, of each structure, through the potentials service's batched
    evaluation (:func:`crucible.potentials.batch.evaluate`: the model's own batched pass where it
    has one, its ASE calculator one by one otherwise); a None entry (a displacement phono3py skips)
    gives zeros. A non-finite or misshapen force raises :class:`NonFiniteForce` naming the
    structure.
    """
    from crucible.potentials.batch import evaluate

    shapes = [len(a) for a in atoms_list if a is not None]
    out = np.zeros((len(atoms_list), shapes[0] if shapes else 0, 3))
    todo = [i for i, atoms in enumerate(atoms_list) if atoms is not None]
    if not todo:
        return out
    # a pass's memory grows with its atoms (CHGNet on a CPU: ~0.6 GB per 64-atom cell): about 512
    # atoms a pass, so fc3's 64-atom cells go 8 at a time and fc2's 512-atom ones alone
    batch_size = max(1, 512 // max(shapes))
    results = evaluate(potential, [atoms_list[i].copy() for i in todo], batch_size=batch_size, errors="record")
    for i, result in zip(todo, results):
        if result.reason is not None:
            raise NonFiniteForce(f"structure {i}: {result.reason}")
        f = np.asarray(result.forces, dtype=float)
        if f.shape != (len(atoms_list[i]), 3):
            raise NonFiniteForce(f"structure {i}: forces of shape {f.shape}, expected {(len(atoms_list[i]), 3)}")
        out[i] = f
    return out


def write_forces(
    path: str,
    *,
    mp_id: str,
    potential: str,
    order: int,
    start: int,
    stop: int,
    total: int,
    digest: str,
    forces: np.ndarray | None,
    failure: str | None,
    cpu_s: float,
) -> None:
    doc = {
        "format": PHONONS_FORMAT,
        "mp_id": mp_id,
        "potential": potential,
        "order": order,
        "start": start,
        "stop": stop,
        "total": total,
        "dataset_sha256": digest,
        "failure": failure,
        "cpu_s": round(cpu_s, 3),
        "dtype": "float64",
        "shape": None if forces is None else list(forces.shape),
        "forces": None if forces is None else forces.tolist(),
    }
    write_json(doc, path, indent=None)


def read_forces(path: InFile, digest: str) -> dict:
    """A force file, checked: its dataset digest, and the forces' shape and finiteness."""
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("format") != PHONONS_FORMAT:
        raise DataValidationError(f"{path}: not a force file of format {PHONONS_FORMAT}")
    if doc["dataset_sha256"] != digest:
        raise DataValidationError(f"{path}: made from another displacement set (dataset_sha256 differs); rerun it")
    if doc["forces"] is not None:
        arr = np.asarray(doc["forces"], dtype=np.float64)
        if list(arr.shape) != doc["shape"] or arr.shape[0] != doc["stop"] - doc["start"]:
            raise DataValidationError(f"{path}: field 'forces' of shape {arr.shape}, the file says {doc['shape']}")
        doc["forces"] = arr
    return doc


def chunks(total: int, size: int) -> list[tuple[int, int]]:
    return [(s, min(s + size, total)) for s in range(0, total, size)]
