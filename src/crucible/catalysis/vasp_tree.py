"""A user's VASP folders as adsorption reactions.

The tree holds ``gas/{X}gas/``, ``{system}/slab/`` and ``{system}/{adsorbate}/{site}/``, each
with CONTCAR + OSZICAR; a stoichiometry map (``coefficients``: adsorbate → {slab, adslab,
...gas}) says how each adsorption energy is summed. Selective-Dynamics flags become ``FixAtoms``
through ASE's POSCAR reader. Unlike CatBench's preprocessing, which deletes every other file,
this only ever opens files for reading, and it reads no symbolic link, as the tree's pin
(:func:`crucible.sources.pinned_files.dataset_sha256`) hashes none.
"""

from __future__ import annotations

import os
from pathlib import Path

from crucible.catalysis.adsorption import Reaction, Reactions, Structure, assemble_reaction, finite_float
from crucible.core import reading
from crucible.core.errors import DataValidationError


def read_oszicar_energy(path: str | os.PathLike) -> float:
    """E0 of the last ionic step (the last line carrying ``E0=``)."""
    path = Path(path)
    lines = reading.read_bytes(path).decode("utf-8", errors="replace").splitlines()
    for n, line in reversed(list(enumerate(lines, 1))):
        if "E0=" in line:
            token = line.split("E0=")[1].split()[0]
            return finite_float(token, f"{path} line {n} E0")
    raise DataValidationError(f"{path}: no line with 'E0=' (not a finished VASP OSZICAR?)")


def read_vasp_dir(folder: Path):
    """(atoms from CONTCAR, the final energy from OSZICAR) of one VASP calculation folder."""
    from ase.io import read

    contcar, oszicar = folder / "CONTCAR", folder / "OSZICAR"
    for f in (contcar, oszicar):
        if not f.is_file():
            raise DataValidationError(f"{folder}: {f.name} missing")
    try:
        atoms = read(str(contcar), format="vasp")
    except Exception as exc:
        raise DataValidationError(f"{contcar}: cannot read: {exc}") from exc
    return atoms, read_oszicar_energy(oszicar)


def check_coefficients(coefficients: dict[str, dict[str, float]], where: str = "coefficients") -> None:
    for ads, coeff in sorted(coefficients.items()):
        for needed in ("slab", "adslab"):
            if needed not in coeff:
                raise DataValidationError(f"{where}.{ads}: key {needed!r} is required")
        bad = [k for k in coeff if k not in ("slab", "adslab") and not k.endswith("gas")]
        if bad:
            raise DataValidationError(f"{where}.{ads}: keys other than slab/adslab must end with 'gas': {bad}")


def refuse_links(root: Path) -> None:
    """A VASP folder is read without links, as its pin hashes it: a link anywhere below it is an
    error naming the link."""
    from crucible.core.fingerprint import tree_files

    tree_files(root, links="refuse")


def _gas_references(root: Path) -> dict[str, tuple]:
    """``{X}gas`` → (atoms, energy) of every folder under ``gas/``."""
    gas: dict[str, tuple] = {}
    if (root / "gas").is_dir():
        for d in sorted(p for p in (root / "gas").iterdir() if p.is_dir()):
            if not d.name.endswith("gas"):
                raise DataValidationError(f"{d}: gas-reference folders must end with 'gas'")
            gas[d.name] = read_vasp_dir(d)
    return gas


def _site_reactions(root: Path, system_dir: Path, ads_dir: Path, coeff, slab: tuple, gas) -> list[Reaction]:
    """One reaction per site folder (one with a CONTCAR) below ``{system}/{adsorbate}/``."""
    ads = ads_dir.name
    slab_atoms, slab_e = slab
    sites = sorted({p.parent for p in ads_dir.rglob("CONTCAR")})
    if not sites:
        raise DataValidationError(f"{ads_dir}: no CONTCAR below it")
    out = []
    for site in sites:
        atoms, energy = read_vasp_dir(site)
        structures = [
            Structure("star", "slab", float(coeff["slab"]), slab_e, slab_atoms.copy()),
            Structure(f"{ads}star", "adslab", float(coeff["adslab"]), energy, atoms),
        ]
        for key in sorted(k for k in coeff if k.endswith("gas")):
            if key not in gas:
                raise DataValidationError(f"{root / 'gas' / key}: gas reference {key!r} (needed by {ads}) missing")
            g_atoms, g_e = gas[key]
            structures.append(Structure(key, "gas", float(coeff[key]), g_e, g_atoms.copy()))
        rid = "_".join([system_dir.name, ads, *site.relative_to(ads_dir).parts])
        dft = float(sum(s.stoi * s.dft_energy for s in structures))
        out.append(assemble_reaction(rid, structures, dft, None, system_dir.name, None, str(site)))
    return out


def read_vasp_tree(root: str | os.PathLike, coefficients: dict[str, dict[str, float]]) -> Reactions:
    root = Path(root)
    if not root.is_dir():
        raise DataValidationError(f"{root}: not a folder")
    refuse_links(root)
    check_coefficients(coefficients)
    gas = _gas_references(root)
    out = []
    for system_dir in sorted(p for p in root.iterdir() if p.is_dir() and p.name != "gas"):
        if not (system_dir / "slab").is_dir():
            raise DataValidationError(f"{system_dir}: no 'slab' folder")
        slab = read_vasp_dir(system_dir / "slab")
        for ads_dir in sorted(p for p in system_dir.iterdir() if p.is_dir() and p.name != "slab"):
            if ads_dir.name not in coefficients:
                raise DataValidationError(
                    f"{ads_dir}: adsorbate {ads_dir.name!r} has no entry in coefficients (known: {sorted(coefficients)})"
                )
            out += _site_reactions(root, system_dir, ads_dir, coefficients[ads_dir.name], slab, gas)
    if not out:
        raise DataValidationError(f"{root}: no reactions found")
    return Reactions(out, [], {"n_input": len(out)})
