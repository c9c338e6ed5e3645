"""Relative energies with CatBench's layouts: surface energies and bulk formation energies.

Both are single-point calculations with one potential (CatBench runs no seeds here):

* surface (``{material}/bulk/`` + ``{material}/slab/``, CONTCAR + OSZICAR):
  γ = (E_slab − n·E_bulk) / (2A), n = N_slab / N_bulk, A = |a × b| of the slab cell;
  reported in J/m² (1 eV/Å² = 16.021766 J/m²).
* bulk formation (``bulk_compounds/{compound}/`` + ``elements/{element}/`` and a coefficient map
  ``{compound: {"bulk": 1, element: -x, ...}}``): E_f = Σ coeff·E / N_atoms(compound), eV/atom.

The analysis is CatBench's for these tasks: MAE, RMSE and max |error| per potential; a system
whose calculation raises is counted as failed, never dropped. Folders are only read.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from crucible.catalysis import RELATIVE_TASKS
from crucible.catalysis.vasp_tree import read_vasp_dir, refuse_links
from crucible.core.errors import DataValidationError
from crucible.core.io import InFile

EV_PER_A2_TO_J_PER_M2 = 16.021766208
UNITS = {"surface": "J/m²", "bulk_formation": "eV/atom"}


def read_surface_tree(root: str | os.PathLike) -> list[dict[str, Any]]:
    root = Path(root)
    if not root.is_dir():
        raise DataValidationError(f"{root}: not a folder")
    refuse_links(root)
    out = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        bulk, e_bulk = read_vasp_dir(d / "bulk")
        slab, e_slab = read_vasp_dir(d / "slab")
        out.append({"system": d.name, "parts": [("slab", 1.0, slab, e_slab), ("bulk", None, bulk, e_bulk)]})
    if not out:
        raise DataValidationError(f"{root}: no material folders")
    return out


def read_formation_tree(root: str | os.PathLike, coefficients: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    root = Path(root)
    if not root.is_dir():
        raise DataValidationError(f"{root}: not a folder")
    refuse_links(root)
    for sub in ("bulk_compounds", "elements"):
        if not (root / sub).is_dir():
            raise DataValidationError(f"{root}: folder {sub!r} missing")
    out = []
    for compound, coeff in sorted(coefficients.items()):
        if "bulk" not in coeff:
            raise DataValidationError(f"coefficients.{compound}: key 'bulk' is required")
        atoms, energy = read_vasp_dir(root / "bulk_compounds" / compound)
        parts = [("bulk", float(coeff["bulk"]), atoms, energy)]
        for element in sorted(k for k in coeff if k != "bulk"):
            e_atoms, e_energy = read_vasp_dir(root / "elements" / element)
            parts.append((element, float(coeff[element]), e_atoms, e_energy))
        out.append({"system": compound, "parts": parts})
    return out


def _surface_value(parts, energies) -> float:
    (_, _, slab, _), (_, _, bulk, _) = parts
    n = len(slab) / len(bulk)
    area = float(np.linalg.norm(np.cross(slab.cell[0], slab.cell[1])))
    return (energies[0] - n * energies[1]) / (2.0 * area) * EV_PER_A2_TO_J_PER_M2


def _formation_value(parts, energies) -> float:
    n_atoms = len(parts[0][2])
    return sum(coeff * e for (_, coeff, _, _), e in zip(parts, energies)) / n_atoms


def run_relative(task: str, systems: Sequence[dict[str, Any]], calc, model: str) -> pd.DataFrame:
    from crucible.potentials.energies import single_energy

    if task not in RELATIVE_TASKS:
        raise DataValidationError(f"relative task {task!r}: one of {RELATIVE_TASKS}")
    value = _surface_value if task == "surface" else _formation_value
    rows = []
    for s in systems:
        ref = value(s["parts"], [p[3] for p in s["parts"]])
        try:
            mlip = value(s["parts"], [single_energy(calc, p[2]) for p in s["parts"]])
            error = None
        except Exception as exc:  # recorded, never dropped
            mlip, error = math.nan, f"{type(exc).__name__}: {str(exc).strip()[:300]}"
        rows.append(
            {
                "model": model,
                "system": s["system"],
                "reference": ref,
                "mlip": mlip,
                "abs_error": abs(mlip - ref) if error is None else math.nan,
                "error": error,
            }
        )
    return pd.DataFrame(rows, columns=["model", "system", "reference", "mlip", "abs_error", "error"])


def relative_table(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    rows = []
    for df in frames:
        ok = df[df["error"].isna()]
        err = ok["abs_error"].to_numpy(float)
        rows.append(
            {
                "model": df["model"].iloc[0] if len(df) else "?",
                "n_systems": len(df),
                "n_failed": int(df["error"].notna().sum()),
                "MAE": float(err.mean()) if err.size else math.nan,
                "RMSE": float(np.sqrt(np.mean(err**2))) if err.size else math.nan,
                "max_error": float(err.max()) if err.size else math.nan,
            }
        )
    return pd.DataFrame(rows)


def write_relative_energies(
    task: str,
    input: InFile,
    model: str,
    out: str | os.PathLike,
    coefficients: dict[str, dict[str, float]] | None = None,
    device: str | None = None,
    threads: int | None = None,
    custom_potentials: dict[str, Any] | None = None,
) -> pd.DataFrame:
    """The ``task``'s energies of the VASP tree ``input`` with the potential ``model``, written to
    ``out`` (parquet, the potential's provenance in its metadata); ``coefficients``: the compounds
    of a bulk_formation tree.

    Args:
        task: surface: γ in J/m² from {material}/bulk + {material}/slab; bulk_formation: eV/atom from
            bulk_compounds/{compound} + elements/{element}
        input: the folder of VASP runs (CONTCAR + OSZICAR) in the task's layout (only read)
        out: the energies to write (parquet, one row per system, potential's provenance in its metadata):
            results/catalysis/relative/{dataset}/{model}.parquet
        coefficients: JSON: compound -> {bulk: 1, element: -x}, e.g. '{"Cu3Pt": {"bulk": 1, "Cu": -3, "Pt":
            -1}}' (bulk_formation only; its compounds are the ones computed)
        model: as in :func:`crucible.mlip.run.write_eos`
        device: as in :func:`crucible.catalysis.chunks.relax_chunk`
        threads: as in :func:`crucible.catalysis.chunks.relax_chunk`
        custom_potentials: as in :func:`crucible.catalysis.chunks.relax_chunk`
    """
    from crucible.catalysis import potential as potentials
    from crucible.core.io import write_parquet
    from crucible.potentials.provenance import provenance_metadata

    systems = read_surface_tree(input) if task == "surface" else read_formation_tree(input, coefficients or {})
    loaded = potentials.load(model, device, threads, custom_potentials)
    frame = run_relative(task, systems, loaded.calculator, model)
    write_parquet(frame, out, metadata=provenance_metadata(loaded))
    return frame
