"""Small adsorption datasets with **EMT** reference energies, in every format crucible reads.

None of the real sets (MamunHighT2019 etc.) can be reached offline, so tests and the demo config
use these: H, O and CO on fcc(111) slabs of Cu, Pt and Ni from ``ase.build``, relaxed with ASE's
EMT; the "reference" energies are EMT energies, not DFT, and every card built from them says so
(:data:`ENERGY_SOURCE`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from crucible.catalysis.data import Reaction, Structure, detect_adsorbate_indices

ENERGY_SOURCE = "EMT (ASE), not DFT: crucible demo fixture"
METALS = ("Cu", "Pt", "Ni")
ADSORBATES = ("H", "O", "CO")
# Stoichiometry as CatBench writes it: slab -1, adslab +1, gas references (names end in "gas").
COEFFICIENTS = {
    "H": {"slab": -1, "adslab": 1, "H2gas": -0.5},
    "O": {"slab": -1, "adslab": 1, "O2gas": -0.5},
    "CO": {"slab": -1, "adslab": 1, "COgas": -1},
}
_SITES = {"H": "fcc", "O": "fcc", "CO": "ontop"}


def _relaxed(atoms, fmax=0.1, steps=300):
    # Loose on purpose: a potential (EMT included) then still takes a few LBFGS steps at
    # fmax 0.05, so that time per step is measured on the demo too.
    from ase.calculators.emt import EMT
    from ase.optimize import BFGS

    atoms = atoms.copy()
    atoms.calc = EMT()
    BFGS(atoms, logfile=None).run(fmax=fmax, steps=steps)
    energy = float(atoms.get_potential_energy())
    atoms.calc = None
    return atoms, energy


def _gas(name):
    from ase import Atoms

    geometry = {
        "H2gas": Atoms("H2", [(0, 0, 0), (0, 0, 0.74)]),
        "O2gas": Atoms("O2", [(0, 0, 0), (0, 0, 1.21)]),
        "COgas": Atoms("CO", [(0, 0, 0), (0, 0, 1.13)]),
    }[name]
    geometry.set_cell([10.0, 10.5, 11.0])
    geometry.center()
    geometry.pbc = True
    return _relaxed(geometry)


def _slab(metal):
    from ase.build import fcc111
    from ase.constraints import FixAtoms

    slab = fcc111(metal, size=(2, 2, 3), vacuum=6.0)
    slab.set_constraint(FixAtoms(indices=[a.index for a in slab if a.tag == 3]))
    return slab


def build_reactions(metals=METALS, adsorbates=ADSORBATES) -> list[Reaction]:
    """One reaction per (metal, adsorbate), all energies from EMT."""
    from ase.build import add_adsorbate, molecule

    gases = {name: _gas(name) for name in sorted({k for a in adsorbates for k in COEFFICIENTS[a] if k.endswith("gas")})}
    out = []
    for metal in metals:
        slab, e_slab = _relaxed(_slab(metal))
        for ads in adsorbates:
            adslab = slab.copy()
            if ads == "CO":
                co = molecule("CO")
                co.rotate(180, "x")  # C down
                add_adsorbate(adslab, co, 1.9, _SITES[ads])
            else:
                add_adsorbate(adslab, ads, 1.2 if ads == "H" else 1.3, _SITES[ads])
            adslab, e_adslab = _relaxed(adslab)
            coeff = COEFFICIENTS[ads]
            structures = [
                Structure("star", "slab", coeff["slab"], e_slab, slab.copy()),
                Structure(f"{ads}star", "adslab", coeff["adslab"], e_adslab, adslab),
            ]
            for key in sorted(k for k in coeff if k.endswith("gas")):
                atoms, energy = gases[key]
                structures.append(Structure(key, "gas", coeff[key], energy, atoms.copy()))
            e_ads = sum(s.stoi * s.dft_energy for s in structures)
            out.append(
                Reaction(
                    f"{metal}111_{ads}",
                    ads,
                    f"{metal}111",
                    e_ads,
                    e_ads,
                    structures,
                    detect_adsorbate_indices(slab, adslab),
                )
            )
    return out


def _ase_json(atoms) -> str:
    import io

    from ase.io import write

    buf = io.StringIO()
    write(buf, atoms, format="json")
    return buf.getvalue()


def write_catbench_json(reactions: list[Reaction], path: str | os.PathLike) -> Path:
    doc = {
        r.reaction_id: {
            "raw": {
                s.key: {"stoi": s.stoi, "energy_ref": s.dft_energy, "atoms_json": _ase_json(s.atoms)}
                for s in r.structures
            },
            "ref_ads_eng": r.dft_ads_eng,
            "adsorbate_indices": r.adsorbate_indices,
        }
        for r in reactions
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, sort_keys=True), encoding="utf-8")
    return path


def write_cathub_raw(reactions: list[Reaction], path: str | os.PathLike) -> Path:
    rows = []
    for r in reactions:
        reactants = {s.key: -s.stoi for s in r.structures if s.stoi < 0}
        products = {s.key: s.stoi for s in r.structures if s.stoi > 0}
        gas_terms = " + ".join(f"{-s.stoi:g}{s.key[:-3]}(g)" for s in r.structures if s.role == "gas")
        systems = []
        for s in r.structures:
            atoms = s.atoms.copy()
            fixed = sorted(int(i) for c in atoms.constraints for i in c.get_indices())
            atoms.set_constraint()  # constraints travel in their own field, as on Catalysis-Hub
            systems.append(
                {
                    "name": s.key,
                    "energyCorrection": 0.0,
                    "systems": {"energy": s.dft_energy, "InputFile": _ase_json(atoms), "constraints": fixed},
                }
            )
        rows.append(
            {
                "node": {
                    "id": r.reaction_id,
                    "Equation": f"{gas_terms} + * -> {r.adsorbate}*",
                    "surfaceComposition": r.system,
                    "reactants": json.dumps(reactants),
                    "products": json.dumps(products),
                    "reactionEnergy": r.dft_ads_eng,
                    "reactionSystems": systems,
                }
            }
        )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"raw_reactions": rows}, indent=1, sort_keys=True), encoding="utf-8")
    return path


def _write_vasp_dir(folder: Path, atoms, energy: float) -> None:
    from ase.io import write

    folder.mkdir(parents=True, exist_ok=True)
    write(str(folder / "CONTCAR"), atoms, format="vasp", direct=True)
    (folder / "OSZICAR").write_text(
        "       N       E                     dE             d eps       ncg     rms          rms(c)\n"
        f"   1 F= {energy - 0.01:.8E} E0= {energy:.8E}  d E =-0.1E+00\n",
        encoding="utf-8",
    )
    (folder / "OUTCAR").write_text("crucible demo: a file CatBench's preprocessing would delete\n", encoding="utf-8")


def write_vasp_tree(reactions: list[Reaction], root: str | os.PathLike) -> Path:
    """``gas/{X}gas/``, ``{system}/slab/``, ``{system}/{adsorbate}/site_0/``, CONTCAR + OSZICAR
    (+ an OUTCAR that must survive reading)."""
    root = Path(root)
    for r in reactions:
        for s in r.structures:
            if s.role == "slab":
                _write_vasp_dir(root / r.system / "slab", s.atoms, s.dft_energy)
            elif s.role == "adslab":
                _write_vasp_dir(root / r.system / r.adsorbate / "site_0", s.atoms, s.dft_energy)
            else:
                _write_vasp_dir(root / "gas" / s.key, s.atoms, s.dft_energy)
    return root


FORMATION_COEFFICIENTS = {"Cu3Pt": {"bulk": 1, "Cu": -3, "Pt": -1}, "CuNi3": {"bulk": 1, "Cu": -1, "Ni": -3}}


def _energy(atoms) -> float:
    from ase.calculators.emt import EMT

    work = atoms.copy()
    work.calc = EMT()
    return float(work.get_potential_energy())


def write_surface_tree(root: str | os.PathLike, metals=METALS) -> Path:
    """``{metal}111/bulk`` (one-atom fcc cell) and ``{metal}111/slab`` (fcc(111), 4 layers)."""
    from ase.build import bulk, fcc111

    root = Path(root)
    for metal in metals:
        b = bulk(metal, "fcc")
        slab = fcc111(metal, size=(1, 1, 4), vacuum=7.0, a=b.cell.lengths()[0] * 2**0.5)
        _write_vasp_dir(root / f"{metal}111" / "bulk", b, _energy(b))
        _write_vasp_dir(root / f"{metal}111" / "slab", slab, _energy(slab))
    return root


def write_formation_tree(root: str | os.PathLike) -> Path:
    """``bulk_compounds/{Cu3Pt, CuNi3}`` (L1₂ cells) and ``elements/{Cu, Ni, Pt}`` (fcc)."""
    from ase.build import bulk

    root = Path(root)
    for element in ("Cu", "Ni", "Pt"):
        b = bulk(element, "fcc")
        _write_vasp_dir(root / "elements" / element, b, _energy(b))
    for name, host, guest in (("Cu3Pt", "Cu", "Pt"), ("CuNi3", "Ni", "Cu")):
        cell = bulk(host, "fcc", a=3.7, cubic=True)
        symbols = cell.get_chemical_symbols()
        symbols[0] = guest
        cell.set_chemical_symbols(symbols)
        _write_vasp_dir(root / "bulk_compounds" / name, cell, _energy(cell))
    return root


def main(argv=None) -> int:
    """``python -m crucible.catalysis.demo OUT_DIR``: the demo set in all three formats."""
    import sys

    out = Path((argv or sys.argv[1:])[0])
    reactions = build_reactions()
    write_catbench_json(reactions, out / "emt-demo_adsorption.json")
    write_cathub_raw(reactions, out / "emt-demo_cathub.json")
    write_vasp_tree(reactions, out / "emt-demo_vasp")
    write_surface_tree(out / "emt-demo_surface")
    write_formation_tree(out / "emt-demo_formation")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
