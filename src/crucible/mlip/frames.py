"""Structures with reference energies and forces, and an MLIP's predictions on them.

``read_frames`` reads any file ASE can read frame by frame (extended XYZ, an ASE database,
VASP OUTCAR / vasprun.xml, ...) and keeps, per frame, the structure and its reference energy
(ASE's ``energy``, eV) and forces (eV/Å). The name ``ase-vasp-testdata`` stands for the real DFT
frames shipped in ASE's own test data (an Ni18 OUTCAR, C2 and NaCl vasprun.xml files, pinned in
config/sources.yaml and read through crucible.sources.pinned_files.pinned), so that the stage has offline
demonstration data.

``predict_frames`` runs a calculator on the frames and returns a table in the s2ef prediction
schema (``crucible.mlip.s2ef_scoring.S2EF_PREDICTION_SCHEMA``): a frame the model cannot handle keeps
its row, with NaN/null predictions and the reason in ``status``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from crucible.core.errors import DataValidationError

log = logging.getLogger(__name__)

ASE_VASP_TESTDATA = "ase-vasp-testdata"
_ASE_VASP_FILES = ("OUTCAR_example_1", "vasprun_pstress.xml", "vasprun_dfpt.xml")


def prediction_schema() -> pa.Schema:
    """The s2ef prediction table's schema; owned by :mod:`crucible.mlip.s2ef_scoring`."""
    from crucible.mlip.s2ef_scoring import S2EF_PREDICTION_SCHEMA

    return S2EF_PREDICTION_SCHEMA


@dataclass
class Frame:
    frame_id: str
    atoms: object  # ase.Atoms without a calculator
    energy_ref: float
    forces_ref: np.ndarray  # (natoms, 3)


def ase_vasp_testdata_paths() -> list[Path]:
    """The files of the installed ase's test data, each checked against its pin (roles
    ``mlip/s2ef/ase-vasp-testdata/<file>`` of config/sources.yaml)."""
    from crucible.sources.pinned_files import pinned

    return [pinned(f"mlip/s2ef/{ASE_VASP_TESTDATA}/{name}") for name in _ASE_VASP_FILES]


def _frames_from_file(path: Path) -> list[Frame]:
    from ase.io import read

    if not path.exists():
        raise DataValidationError(f"{path}: s2ef dataset file does not exist")
    try:
        images = read(str(path), index=":")
    except Exception as exc:
        raise DataValidationError(f"{path}: ASE could not read it as structures ({type(exc).__name__}: {exc})") from exc
    if not isinstance(images, list):
        images = [images]
    if not images:
        raise DataValidationError(f"{path}: no frames")
    frames = []
    for i, atoms in enumerate(images):
        where = f"{path}, frame {i}"
        try:
            value = atoms.get_potential_energy()
        except Exception as exc:
            raise DataValidationError(f"{where}: no reference energy (field 'energy'): {exc}") from exc
        # ASE reads extended XYZ's energy=T as True, which float() made a reference of 1.0 eV
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise DataValidationError(
                f"{where}: reference energy (field 'energy') {value!r} is a {type(value).__name__}, not a number"
            )
        energy = float(value)
        try:
            forces = np.asarray(atoms.get_forces(), dtype=float)
        except Exception as exc:
            raise DataValidationError(f"{where}: no reference forces (field 'forces'): {exc}") from exc
        if forces.shape != (len(atoms), 3):
            raise DataValidationError(
                f"{where}: reference forces have shape {forces.shape}, expected ({len(atoms)}, 3)"
            )
        if not math.isfinite(energy) or not np.isfinite(forces).all():
            raise DataValidationError(f"{where}: non-finite reference energy or forces")
        clean = atoms.copy()
        clean.calc = None
        frames.append(Frame(f"{path.name}:{i}", clean, energy, forces))
    return frames


def read_frames(path_or_name: str | Path) -> list[Frame]:
    """Frames with reference energy and forces from a file ASE reads (all of its images), or
    the three real VASP calculations in ASE's test data for ``"ase-vasp-testdata"``."""
    if str(path_or_name) == ASE_VASP_TESTDATA:
        paths = ase_vasp_testdata_paths()
    else:
        paths = [Path(path_or_name)]
    frames = [f for p in paths for f in _frames_from_file(p)]
    ids = [f.frame_id for f in frames]
    if len(set(ids)) != len(ids):
        raise DataValidationError(f"{path_or_name}: duplicate frame ids")
    return frames


def predict_frames(frames: Sequence[Frame], calc, progress: bool = True) -> pd.DataFrame:
    """Energy and forces of each frame with ``calc`` (a ``Potential`` or a bare ASE calculator),
    in the s2ef prediction schema.

    A model error or a non-finite energy or force (:func:`crucible.potentials.energies.single_point`)
    becomes ``status`` = the reason, with NaN energy and null forces; forces of the wrong shape
    mean a broken calculator and raise.
    """
    from tqdm.auto import tqdm

    from crucible.potentials.energies import single_point
    from crucible.potentials.spec import NonFiniteError, as_potential

    potential = as_potential(calc)
    name = potential.name
    rows = []
    for frame in tqdm(frames, desc=f"s2ef {name}", unit="frame", disable=not progress):
        natoms = len(frame.atoms)
        row = {
            "frame_id": frame.frame_id,
            "natoms": natoms,
            "energy_ref": float(frame.energy_ref),
            "energy_pred": math.nan,
            "forces_ref": frame.forces_ref.tolist(),
            "forces_pred": None,
            "status": "ok",
        }
        try:
            energy, forces = single_point(potential, frame.atoms)
        except Exception as exc:
            text = str(exc).strip().replace("\n", " ")[:300]
            row["status"] = text if isinstance(exc, NonFiniteError) else f"{type(exc).__name__}: {text}"
            log.warning("%s %s: %s", name, frame.frame_id, row["status"])
            rows.append(row)
            continue
        if forces.shape != (natoms, 3):
            raise DataValidationError(
                f"frame {frame.frame_id}: model {name} returned forces of shape {forces.shape}, expected ({natoms}, 3)"
            )
        row["energy_pred"] = energy
        row["forces_pred"] = forces.tolist()
        rows.append(row)
    schema = prediction_schema()
    return pd.DataFrame(rows, columns=schema.names)
