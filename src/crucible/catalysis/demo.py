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

from crucible.catalysis.adsorption import Reaction, Structure, detect_adsorbate_indices

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


def write_catbench_json(reactions: list[Reaction], path: str | os.PathLike, dedup: bool = True) -> Path:
    """CatBench's dataset file: the deduplicated layout of CatBench >= 1.1.1, or with
    ``dedup=False`` the earlier one (``atoms_json`` inline)."""
    from crucible.catalysis.catbench_files import write_catbench_json as write

    return write(reactions, path, dedup=dedup)


def _equation(r: Reaction) -> str:
    def term(coefficient, name):
        return name if coefficient == 1 else f"{coefficient:g}{name}"

    gases = " + ".join(term(-s.stoi, f"{s.key[:-3]}(g)") for s in r.structures if s.role == "gas")
    return f"{gases} + * -> {r.adsorbate}*"


def _cathub_system(s, energy_correction: float = 0.0, keep_constraints: bool = True) -> dict:
    from crucible.catalysis.catbench_files import ase_json

    atoms = s.atoms.copy()
    fixed = sorted(int(i) for c in atoms.constraints for i in c.get_indices())
    atoms.set_constraint()  # constraints travel in their own field, as on Catalysis-Hub
    constraints = None
    if fixed and keep_constraints:
        constraints = json.dumps([{"name": "FixAtoms", "kwargs": {"indices": fixed}}])
    return {
        "name": s.key,
        "energyCorrection": energy_correction,
        "systems": {"energy": s.dft_energy, "InputFile": ase_json(atoms), "constraints": constraints},
    }


def cathub_node(r: Reaction, node_id: str | None = None) -> dict:
    """One reaction as Catalysis-Hub's GraphQL API returns it (and as CatBench caches it in
    ``raw_data/{name}.json``): reactants and products as JSON text (reactants with positive
    coefficients), each system's structure as ASE-JSON text and its FixAtoms as JSON text."""
    reactants = {s.key: -s.stoi for s in r.structures if s.stoi < 0}
    products = {s.key: s.stoi for s in r.structures if s.stoi > 0}
    return {
        "id": node_id or r.reaction_id,
        "Equation": _equation(r),
        "surfaceComposition": r.system,
        "reactants": json.dumps(reactants),
        "products": json.dumps(products),
        "reactionEnergy": r.dft_ads_eng,
        "reactionSystems": [_cathub_system(s) for s in r.structures],
    }


def write_cathub_raw(reactions: list[Reaction], path: str | os.PathLike) -> Path:
    return _write_raw([cathub_node(r) for r in reactions], path)


def _write_raw(nodes: list[dict], path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"raw_reactions": nodes}, indent=1), encoding="utf-8")
    return path


def cathub_filter_cases(reactions: list[Reaction]) -> list[dict]:
    """The demo's reactions as Catalysis-Hub rows, followed by one row per rule of CatBench's
    preprocessing (``catbench/adsorption/data/cathub.py``), each named ``<demo id>~<case>``:

    kept: ``within_tolerance`` (reactionEnergy off by 5e-4 eV), ``adslab_coefficient`` (adslab
    coefficient 2 where the energies fit 1), ``extra_system`` (a system that is no reactant or
    product), ``no_constraints`` (FixAtoms missing, inferred from geometry), ``second_site``
    (same surface and equation as a reaction dropped for its energy: CatBench gives the id back);
    dropped: ``mismatch`` (reactionEnergy off by 0.05 eV), ``multi`` (two adsorbates),
    ``vacancy`` (FixAtoms missing and the adslab lacks a slab atom, so nothing can be inferred),
    ``duplicate`` (a Catalysis-Hub id seen before), ``energy_correction`` (a stated energy that
    includes a correction CatBench never reads), ``no_reaction_energy``."""
    by_id = {r.reaction_id: r for r in reactions}
    rows = [cathub_node(r) for r in reactions]

    def case(base: str, name: str) -> dict:
        return cathub_node(by_id[base], f"{base}~{name}")

    row = case("Cu111_H", "within_tolerance")
    row["reactionEnergy"] += 5e-4
    rows.append(row)

    row = case("Pt111_O", "adslab_coefficient")
    row["products"] = json.dumps({"Ostar": 2})
    rows.append(row)

    row = case("Ni111_CO", "mismatch")
    row["reactionEnergy"] += 0.05
    rows.append(row)
    rows.append(case("Ni111_CO", "second_site"))

    h, o = by_id["Cu111_H"], by_id["Cu111_O"]
    multi = {
        "id": "Cu111_H+O~multi",
        "Equation": "0.5H2(g) + 0.5O2(g) + 2* -> H* + O*",
        "surfaceComposition": "Cu111",
        "reactants": json.dumps({"star": 2, "H2gas": 0.5, "O2gas": 0.5}),
        "products": json.dumps({"Hstar": 1, "Ostar": 1}),
        "reactionEnergy": h.dft_ads_eng + o.dft_ads_eng,
        "reactionSystems": [_cathub_system(s) for s in h.structures]
        + [_cathub_system(o.structures[1])]
        + [_cathub_system(o.structures[2])],
    }
    rows.append(multi)

    row = case("Cu111_O", "extra_system")
    row["reactionSystems"].append({**_cathub_system(by_id["Cu111_H"].structures[2]), "name": "N2gas"})
    rows.append(row)

    row = cathub_node(by_id["Pt111_H"], "Pt111_H~no_constraints")
    row["reactionSystems"] = [_cathub_system(s, keep_constraints=False) for s in by_id["Pt111_H"].structures]
    rows.append(row)

    ni_h = by_id["Ni111_H"]
    slab, adslab = ni_h.structures[0], ni_h.structures[1]
    holed = adslab.atoms.copy()
    del holed[[i for i in range(len(holed)) if i not in ni_h.adsorbate_indices][-1]]  # a top-layer Ni
    row = cathub_node(ni_h, "Ni111_H~vacancy")
    row["reactionSystems"] = [
        _cathub_system(slab, keep_constraints=False),
        _cathub_system(
            type(adslab)(adslab.key, adslab.role, adslab.stoi, adslab.dft_energy, holed), keep_constraints=False
        ),
        _cathub_system(ni_h.structures[2]),
    ]
    rows.append(row)

    rows.append(cathub_node(by_id["Cu111_H"]))  # the same Catalysis-Hub id again

    pt_co = by_id["Pt111_CO"]
    row = cathub_node(pt_co, "Pt111_CO~energy_correction")
    row["reactionSystems"] = [
        _cathub_system(s, energy_correction=0.2 if s.role == "gas" else 0.0) for s in pt_co.structures
    ]
    row["reactionEnergy"] = pt_co.dft_ads_eng - 0.2  # COgas enters with coefficient −1
    rows.append(row)

    row = case("Cu111_CO", "no_reaction_energy")
    row["reactionEnergy"] = None
    rows.append(row)
    return rows


def write_cathub_filter_cases(reactions: list[Reaction], path: str | os.PathLike) -> Path:
    return _write_raw(cathub_filter_cases(reactions), path)


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


def write_demo(out_dir: str | os.PathLike) -> Path:
    """The demo set in all three formats under ``out_dir``, the Catalysis-Hub rows that exercise
    each filtering rule, and a surface and a formation tree.

    Args:
        out_dir: folder to write into (created): the demo set as CatBench JSON, Catalysis-Hub raw and a VASP
            tree, plus surface and formation trees
    """
    out = Path(out_dir)
    reactions = build_reactions()
    write_catbench_json(reactions, out / "emt-demo_adsorption.json")
    write_cathub_raw(reactions, out / "emt-demo_cathub.json")
    write_cathub_filter_cases(reactions, out / "emt-demo-filters_cathub.json")
    write_vasp_tree(reactions, out / "emt-demo_vasp")
    write_surface_tree(out / "emt-demo_surface")
    write_formation_tree(out / "emt-demo_formation")
    return out


def main(argv=None) -> int:
    """``python -m crucible.catalysis.demo OUT_DIR``: :func:`write_demo`."""
    import sys

    write_demo((argv or sys.argv[1:])[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
