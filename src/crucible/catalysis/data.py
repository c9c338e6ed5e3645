"""Adsorption-energy datasets: read any supported source, clean into one table + an ASE database.

Three readers give the same :class:`Reaction` records:

* :func:`read_catbench_json` — CatBench's own ``{name}_adsorption.json`` (what its
  ``get_benchmark`` writes): ``{reaction: {"raw": {key: {"stoi", "atoms_json", "energy_ref"}},
  "ref_ads_eng", "adsorbate_indices"}}``; ``.json.gz`` is read too.
* :func:`read_cathub_raw` — Catalysis-Hub's raw reactions (``{"raw_reactions": [...]}``, each
  with ``reactionSystems`` whose ``systems`` carry ``energy``, an ASE-JSON ``InputFile`` and
  optionally ``constraints``; ``reactants``/``products`` give the stoichiometry, products
  positive, reactants negative; ``reactionEnergy`` is the stated reaction energy).
* :func:`read_vasp_tree` — a user's VASP folders (``gas/{X}gas/``, ``{system}/slab/``,
  ``{system}/{adsorbate}/{site}/``, each with CONTCAR + OSZICAR) and a stoichiometry map.
  Selective-Dynamics flags become ``FixAtoms`` through ASE's POSCAR reader. Unlike CatBench's
  preprocessing, which deletes every other file, this only ever opens files for reading.

Structure keys follow CatBench: ``star`` is the clean slab, ``{adsorbate}star`` the adslab, keys
ending in ``gas`` are gas references; E_ads = Σ stoi·E.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from crucible.errors import DataValidationError

log = logging.getLogger(__name__)

FORMATS = ("catbench-json", "cathub-raw", "vasp-tree")
DEFAULT_ENERGY_SOURCE = "DFT, as given by the source"


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

    def energy_sum(self) -> float:
        return float(sum(s.stoi * s.dft_energy for s in self.structures))

    def by_role(self, role: str) -> list[Structure]:
        return [s for s in self.structures if s.role == role]


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
    and for an element the adslab has more of, the extra ones highest along z (our reading of
    CatBench's rule for data without stored indices)."""
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


def _atoms_from_ase_json(text: str, where: str):
    from ase.io import read

    try:
        return read(io.StringIO(text), format="json")
    except Exception as exc:
        raise DataValidationError(f"{where}: cannot read the ASE-JSON structure: {exc}") from exc


def _load_json(path: Path) -> Any:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                return json.load(fh)
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataValidationError(f"{path}: not a readable JSON file: {exc}") from exc


def _float(value: Any, where: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise DataValidationError(f"{where}: not a number: {value!r}") from None
    if not math.isfinite(out):
        raise DataValidationError(f"{where}: not finite: {value!r}")
    return out


def _finish(
    rid: str,
    structures: list[Structure],
    dft: float,
    stated: float | None,
    system: str,
    indices: list[int] | None,
    where: str,
) -> Reaction:
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
    structures = sorted(structures, key=lambda s: ({"slab": 0, "adslab": 1, "gas": 2}[s.role], s.key))
    return Reaction(rid, adsorbate, system, dft, stated, structures, [int(i) for i in indices])


# ---------------------------------------------------------------------------------------------
# readers


def read_catbench_json(path: str | os.PathLike) -> list[Reaction]:
    path = Path(path)
    doc = _load_json(path)
    if not isinstance(doc, dict):
        raise DataValidationError(f"{path}: expected an object of reactions, got {type(doc).__name__}")
    out = []
    for rid in sorted(doc):
        entry = doc[rid]
        where = f"{path} reaction {rid!r}"
        raw = entry.get("raw") if isinstance(entry, dict) else None
        if not isinstance(raw, dict) or not raw:
            raise DataValidationError(f"{where}: field 'raw' missing or empty")
        structures = []
        for key in sorted(raw):
            item = raw[key]
            try:
                role = role_of(key)
            except ValueError as exc:
                raise DataValidationError(f"{where}: {exc}") from None
            for needed in ("stoi", "energy_ref", "atoms_json"):
                if needed not in item:
                    raise DataValidationError(f"{where} structure {key!r}: field {needed!r} missing")
            structures.append(
                Structure(
                    key,
                    role,
                    _float(item["stoi"], f"{where} {key}.stoi"),
                    _float(item["energy_ref"], f"{where} {key}.energy_ref"),
                    _atoms_from_ase_json(item["atoms_json"], f"{where} {key}.atoms_json"),
                )
            )
        if "ref_ads_eng" not in entry:
            raise DataValidationError(f"{where}: field 'ref_ads_eng' missing")
        ref = _float(entry["ref_ads_eng"], f"{where} ref_ads_eng")
        out.append(_finish(rid, structures, ref, ref, rid.split("_")[0], entry.get("adsorbate_indices"), where))
    return out


def _stoichiometry(value: Any, where: str) -> dict[str, float]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise DataValidationError(f"{where}: not a JSON object: {value!r}") from None
    if not isinstance(value, dict):
        raise DataValidationError(f"{where}: expected name → coefficient, got {value!r}")
    return {str(k): _float(v, f"{where}.{k}") for k, v in value.items()}


def _cathub_constraints(atoms, constraints: Any, where: str) -> None:
    from ase.constraints import FixAtoms

    if constraints in (None, [], ""):
        return
    if isinstance(constraints, str):
        constraints = json.loads(constraints)
    fixed: list[int] = []
    for c in constraints if isinstance(constraints, list) else [constraints]:
        if isinstance(c, int):
            fixed.append(c)
        elif isinstance(c, dict) and c.get("name") == "FixAtoms":
            fixed.extend(int(i) for i in c.get("kwargs", {}).get("indices", []))
        else:
            raise DataValidationError(f"{where}: constraint {c!r} not understood (FixAtoms or atom indices)")
    if fixed:
        atoms.set_constraint(FixAtoms(indices=sorted(set(fixed))))


def read_cathub_raw(path: str | os.PathLike) -> list[Reaction]:
    path = Path(path)
    doc = _load_json(path)
    reactions = doc.get("raw_reactions") if isinstance(doc, dict) else None
    if not isinstance(reactions, list):
        raise DataValidationError(f"{path}: field 'raw_reactions' (a list) missing")
    out = []
    seen: Counter = Counter()
    for row, item in enumerate(reactions):
        node = item.get("node", item) if isinstance(item, dict) else None
        where = f"{path} raw_reactions[{row}]"
        if not isinstance(node, dict):
            raise DataValidationError(f"{where}: not an object")
        stoi = _stoichiometry(node.get("reactants", {}), f"{where}.reactants")
        stoi = {k: -v for k, v in stoi.items()}
        for k, v in _stoichiometry(node.get("products", {}), f"{where}.products").items():
            stoi[k] = stoi.get(k, 0.0) + v
        systems = node.get("reactionSystems")
        if not isinstance(systems, list) or not systems:
            raise DataValidationError(f"{where}: field 'reactionSystems' missing or empty")
        structures = []
        for sys_ in systems:
            name = sys_.get("name")
            swhere = f"{where} reactionSystems {name!r}"
            if name not in stoi:
                raise DataValidationError(f"{swhere}: not in the reaction's reactants/products {sorted(stoi)}")
            body = sys_.get("systems") or {}
            if "InputFile" not in body or "energy" not in body:
                raise DataValidationError(f"{swhere}: systems.InputFile and systems.energy are required")
            atoms = _atoms_from_ase_json(body["InputFile"], swhere)
            _cathub_constraints(atoms, body.get("constraints"), swhere)
            energy = _float(body["energy"], f"{swhere}.energy") + _float(
                sys_.get("energyCorrection", 0.0) or 0.0, f"{swhere}.energyCorrection"
            )
            try:
                role = role_of(name)
            except ValueError as exc:
                raise DataValidationError(f"{swhere}: {exc}") from None
            structures.append(Structure(name, role, stoi[name], energy, atoms))
        missing = sorted(set(stoi) - {s.key for s in structures})
        if missing:
            raise DataValidationError(f"{where}: no reactionSystems entry for {missing}")
        stated = node.get("reactionEnergy")
        stated = None if stated is None else _float(stated, f"{where}.reactionEnergy")
        dft = stated if stated is not None else float(sum(s.stoi * s.dft_energy for s in structures))
        system = str(node.get("surfaceComposition") or node.get("chemicalComposition") or "")
        base = str(node.get("id") or f"{system or 'reaction'}_{row}")
        seen[base] += 1
        rid = base if seen[base] == 1 else f"{base}_{seen[base] - 1}"
        out.append(_finish(rid, structures, dft, stated, system, node.get("adsorbate_indices"), where))
    return sorted(out, key=lambda r: r.reaction_id)


def read_oszicar_energy(path: str | os.PathLike) -> float:
    """E0 of the last ionic step (the last line carrying ``E0=``)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise DataValidationError(f"{path}: cannot read: {exc}") from exc
    for n, line in reversed(list(enumerate(lines, 1))):
        if "E0=" in line:
            token = line.split("E0=")[1].split()[0]
            return _float(token, f"{path} line {n} E0")
    raise DataValidationError(f"{path}: no line with 'E0=' (not a finished VASP OSZICAR?)")


def _read_vasp_dir(folder: Path):
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


def read_vasp_tree(root: str | os.PathLike, coefficients: dict[str, dict[str, float]]) -> list[Reaction]:
    root = Path(root)
    if not root.is_dir():
        raise DataValidationError(f"{root}: not a folder")
    check_coefficients(coefficients)
    gas: dict[str, tuple] = {}
    if (root / "gas").is_dir():
        for d in sorted(p for p in (root / "gas").iterdir() if p.is_dir()):
            if not d.name.endswith("gas"):
                raise DataValidationError(f"{d}: gas-reference folders must end with 'gas'")
            gas[d.name] = _read_vasp_dir(d)
    out = []
    for system_dir in sorted(p for p in root.iterdir() if p.is_dir() and p.name != "gas"):
        if not (system_dir / "slab").is_dir():
            raise DataValidationError(f"{system_dir}: no 'slab' folder")
        slab_atoms, slab_e = _read_vasp_dir(system_dir / "slab")
        for ads_dir in sorted(p for p in system_dir.iterdir() if p.is_dir() and p.name != "slab"):
            ads = ads_dir.name
            if ads not in coefficients:
                raise DataValidationError(
                    f"{ads_dir}: adsorbate {ads!r} has no entry in coefficients (known: {sorted(coefficients)})"
                )
            coeff = coefficients[ads]
            sites = sorted({p.parent for p in ads_dir.rglob("CONTCAR")})
            if not sites:
                raise DataValidationError(f"{ads_dir}: no CONTCAR below it")
            for site in sites:
                atoms, energy = _read_vasp_dir(site)
                structures = [
                    Structure("star", "slab", float(coeff["slab"]), slab_e, slab_atoms.copy()),
                    Structure(f"{ads}star", "adslab", float(coeff["adslab"]), energy, atoms),
                ]
                for key in sorted(k for k in coeff if k.endswith("gas")):
                    if key not in gas:
                        raise DataValidationError(
                            f"{root / 'gas' / key}: gas reference {key!r} (needed by {ads}) missing"
                        )
                    g_atoms, g_e = gas[key]
                    structures.append(Structure(key, "gas", float(coeff[key]), g_e, g_atoms.copy()))
                rid = "_".join([system_dir.name, ads, *site.relative_to(ads_dir).parts])
                dft = float(sum(s.stoi * s.dft_energy for s in structures))
                out.append(_finish(rid, structures, dft, None, system_dir.name, None, str(site)))
    if not out:
        raise DataValidationError(f"{root}: no reactions found")
    return out


def read_dataset(
    fmt: str, path: str | os.PathLike, coefficients: dict | None = None, sha256: str | None = None
) -> list[Reaction]:
    """The reactions of a dataset; one with a pin (``catalysis.datasets.<name>.sha256``) is
    checked against it first, so a file or folder changed after its fetch stops here."""
    if sha256:
        check_pin(path, sha256)
    if fmt == "catbench-json":
        return read_catbench_json(path)
    if fmt == "cathub-raw":
        return read_cathub_raw(path)
    if fmt == "vasp-tree":
        if not coefficients:
            raise DataValidationError("vasp-tree datasets need 'coefficients' (adsorbate → {slab, adslab, ...gas})")
        return read_vasp_tree(path, coefficients)
    raise DataValidationError(f"unknown dataset format {fmt!r}; known: {', '.join(FORMATS)}")


def tree_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a file, or of a folder's sorted (relative path, file SHA-256) list."""
    from crucible.sources import sha256_file

    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    digest = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(f"{f.relative_to(path).as_posix()}\0{sha256_file(f)}\n".encode())
    return digest.hexdigest()


def check_pin(path: str | os.PathLike, sha256: str) -> str:
    """:func:`tree_sha256` of ``path``, which must equal the dataset's pin."""
    from crucible.errors import HashMismatchError

    actual = tree_sha256(path)
    if actual != sha256.lower():
        raise HashMismatchError(
            f"{path}: SHA-256 {actual} differs from the pin {sha256.lower()} of this catalysis dataset in the config "
            "(catalysis.datasets.<name>.sha256); it changed after it was fetched: delete it and rerun, so that it "
            "is fetched again (or pin the new hash if you changed it on purpose)"
        )
    return actual


# ---------------------------------------------------------------------------------------------
# clean: one table + an ASE database, and a card


REACTION_COLUMNS = [
    "reaction_id",
    "adsorbate",
    "system",
    "dft_ads_eng",
    "stated_energy",
    "structures",
    "adsorbate_indices",
]


def _schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("reaction_id", pa.string()),
            ("adsorbate", pa.string()),
            ("system", pa.string()),
            ("dft_ads_eng", pa.float64()),
            ("stated_energy", pa.float64()),
            ("structures", pa.string()),
            ("adsorbate_indices", pa.string()),
        ]
    )


def clean(
    reactions: list[Reaction],
    out_parquet: str | os.PathLike,
    out_db: str | os.PathLike,
    out_card: str | os.PathLike,
    *,
    source: dict[str, Any],
    tolerance: float = 1e-4,
    energy_source: str = DEFAULT_ENERGY_SOURCE,
) -> dict[str, Any]:
    """Write ``reactions.parquet`` (structures referenced by ASE-db row id), the ASE database and
    the card; fail when Σ stoi·E differs from a stated reaction energy by more than ``tolerance``."""
    import ase.db
    import pandas as pd

    from crucible.io import atomic_path, write_json, write_parquet

    ids = [r.reaction_id for r in reactions]
    dup = sorted(k for k, n in Counter(ids).items() if n > 1)
    if dup:
        raise DataValidationError(f"{source.get('path')}: duplicate reaction ids {dup[:5]}")
    worst, worst_id = 0.0, None
    for r in reactions:
        if r.stated_energy is None:
            continue
        diff = abs(r.energy_sum() - r.stated_energy)
        if diff > worst:
            worst, worst_id = diff, r.reaction_id
    if worst > tolerance:
        raise DataValidationError(
            f"{source.get('path')}: reaction {worst_id!r}: Σ stoi·E = {next(r.energy_sum() for r in reactions if r.reaction_id == worst_id):.6f} eV "
            f"differs from the stated reaction energy by {worst:.6g} eV (tolerance {tolerance})"
        )
    rows = []
    with atomic_path(out_db, ".db") as tmp:
        tmp.unlink()
        with ase.db.connect(str(tmp), type="db", append=True) as db:
            for r in sorted(reactions, key=lambda r: r.reaction_id):
                refs = []
                for s in r.structures:
                    db_id = db.write(s.atoms, reaction_id=r.reaction_id, key=s.key)
                    refs.append(
                        {"key": s.key, "role": s.role, "stoi": s.stoi, "dft_energy": s.dft_energy, "db_id": db_id}
                    )
                rows.append(
                    {
                        "reaction_id": r.reaction_id,
                        "adsorbate": r.adsorbate,
                        "system": r.system,
                        "dft_ads_eng": r.dft_ads_eng,
                        "stated_energy": np.nan if r.stated_energy is None else r.stated_energy,
                        "structures": json.dumps(refs, sort_keys=True),
                        "adsorbate_indices": json.dumps(r.adsorbate_indices),
                    }
                )
    df = pd.DataFrame(rows, columns=REACTION_COLUMNS)
    write_parquet(df, out_parquet, schema=_schema())
    card = {
        "n_reactions": len(df),
        "reactions_per_adsorbate": {k: int(v) for k, v in sorted(Counter(df["adsorbate"]).items())},
        "energy_source": energy_source,
        "source": source,
        "energy_check": {
            "n_checked": int(sum(r.stated_energy is not None for r in reactions)),
            "worst_abs_difference_eV": worst,
            "worst_reaction": worst_id,
            "tolerance_eV": tolerance,
        },
        "dft_ads_eng": {
            "min": float(df["dft_ads_eng"].min()) if len(df) else None,
            "max": float(df["dft_ads_eng"].max()) if len(df) else None,
        },
    }
    write_json(card, out_card)
    return card


def load_reactions(
    parquet: str | os.PathLike, db_path: str | os.PathLike, ids: Iterable[str] | None = None
) -> list[Reaction]:
    """Reactions back from ``reactions.parquet`` + the ASE database (constraints included)."""
    import ase.db

    from crucible.io import read_parquet

    df = read_parquet(parquet)
    if ids is not None:
        wanted = set(ids)
        df = df[df["reaction_id"].isin(wanted)]
    out = []
    with ase.db.connect(str(db_path), type="db") as db:
        for row in df.itertuples(index=False):
            structures = [
                Structure(s["key"], s["role"], s["stoi"], s["dft_energy"], db.get_atoms(id=s["db_id"]))
                for s in json.loads(row.structures)
            ]
            stated = None if math.isnan(row.stated_energy) else row.stated_energy
            out.append(
                Reaction(
                    row.reaction_id,
                    row.adsorbate,
                    row.system,
                    row.dft_ads_eng,
                    stated,
                    structures,
                    json.loads(row.adsorbate_indices),
                )
            )
    return out


def clean_input(
    fmt: str,
    path: str | os.PathLike,
    out_parquet: str | os.PathLike,
    out_db: str | os.PathLike,
    out_card: str | os.PathLike,
    *,
    coefficients: dict | None = None,
    url: str | None = None,
    sha256: str | None = None,
    tolerance: float = 1e-4,
    energy_source: str = DEFAULT_ENERGY_SOURCE,
) -> dict[str, Any]:
    """Read a dataset in any supported format and :func:`clean` it, recording where it came from
    (format, path, SHA-256 of the file or tree, and the download URL when given) in the card.
    ``sha256``: the dataset's pin, checked before anything is read."""
    reactions = read_dataset(fmt, path, coefficients, sha256=sha256)
    source: dict[str, Any] = {"format": fmt, "path": str(path), "sha256": tree_sha256(path)}
    if url:
        source["url"] = url
    return clean(
        reactions,
        out_parquet,
        out_db,
        out_card,
        source=source,
        tolerance=tolerance,
        energy_source=energy_source,
    )
