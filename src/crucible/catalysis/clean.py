"""The clean stage: a dataset in any supported format → one reaction table + an ASE database.

:func:`read_dataset` reads ``catbench-json`` (:mod:`~crucible.catalysis.catbench_files`),
``cathub-raw`` (:mod:`~crucible.catalysis.cathub`) or ``vasp-tree``
(:mod:`~crucible.catalysis.vasp_tree`), after checking the dataset's pin
(``catalysis.datasets.<name>.sha256``) through :func:`crucible.sources.pinned_files.verify_pinned`;
:func:`clean` writes ``reactions.parquet`` (structures referenced by ASE-db row id), the
database and the card; :func:`load_reactions` reads them back for the relaxations.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from crucible.catalysis import DEFAULT_ENERGY_SOURCE, FORMATS
from crucible.catalysis.adsorption import TOLERANCE, Reaction, Reactions, Structure, check_filtering
from crucible.catalysis.catbench_files import read_catbench_json, write_catbench_json
from crucible.catalysis.cathub import read_cathub_raw
from crucible.catalysis.vasp_tree import read_vasp_tree
from crucible.core.errors import DataValidationError
from crucible.core.io import InFile
from crucible.sources import pinned_files

log = logging.getLogger(__name__)
PIN_WHERE = "the config (catalysis.datasets.<name>.sha256)"


def read_dataset(
    fmt: str,
    path: str | os.PathLike,
    coefficients: dict | None = None,
    filtering: str = "catbench",
    tolerance: float | None = None,
    sha256: str | None = None,
) -> Reactions:
    """The reactions of a dataset, read with ``filtering``'s rules; one with a pin
    (``catalysis.datasets.<name>.sha256``) is checked against it first, so a file or folder
    changed after its fetch stops here."""
    check_filtering(filtering)
    if sha256:
        pinned_files.verify_pinned(path, sha256, "catalysis dataset", PIN_WHERE, digest=pinned_files.dataset_sha256)
    if fmt == "catbench-json":
        return read_catbench_json(path, filtering)
    if fmt == "cathub-raw":
        return read_cathub_raw(path, filtering, tolerance)
    if fmt == "vasp-tree":
        if not coefficients:
            raise DataValidationError("vasp-tree datasets need 'coefficients' (adsorbate → {slab, adslab, ...gas})")
        return read_vasp_tree(path, coefficients)
    raise DataValidationError(f"unknown dataset format {fmt!r}; known: {', '.join(FORMATS)}")


def file_md5(path: str | os.PathLike) -> str | None:
    """MD5 of a file (what CatBench stamps as ``input_md5``), None for a folder."""
    path = Path(path)
    if not path.is_file():
        return None
    digest = hashlib.md5()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


REACTION_COLUMNS = [
    "reaction_id",
    "adsorbate",
    "system",
    "dft_ads_eng",
    "stated_energy",
    "structures",
    "adsorbate_indices",
    "cathub_id",
    "constraint_source",
    "relax_group",
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
            ("cathub_id", pa.string()),
            ("constraint_source", pa.string()),
            ("relax_group", pa.int64()),
        ]
    )


def _energy_check(reactions: list[Reaction], source: dict[str, Any], tolerance: float) -> tuple[float, str | None]:
    """(worst |Σ stoi·E − stated energy|, its reaction) after refusing duplicate ids and a
    difference above ``tolerance``."""
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
    return worst, worst_id


def _write_structures(reactions: list[Reaction], out_db: str | os.PathLike, groups: dict[str, int]) -> list[dict]:
    """Every structure into the ASE database at ``out_db`` (written atomically); the table's
    rows, which point to them by row id."""
    import ase.db

    from crucible.core.io import atomic_path

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
                        "cathub_id": r.cathub_id,
                        "constraint_source": r.constraint_source,
                        "relax_group": groups[r.reaction_id],
                    }
                )
    return rows


def clean(
    reactions: list[Reaction],
    out_parquet: str | os.PathLike,
    out_db: str | os.PathLike,
    out_card: str | os.PathLike,
    *,
    source: dict[str, Any],
    tolerance: float | None = None,
    filtering: str = "catbench",
    energy_source: str = DEFAULT_ENERGY_SOURCE,
    out_catbench: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Write ``reactions.parquet`` (structures referenced by ASE-db row id), the ASE database, the
    card and, with ``out_catbench``, the same reactions as a CatBench dataset file; fail when
    Σ stoi·E differs from a stated reaction energy by more than ``tolerance`` (default: 1e-3 eV
    with CatBench's filtering, 1e-4 eV strict). ``reactions`` may be a reader's
    :class:`~crucible.catalysis.adsorption.Reactions`: what it dropped and noted goes into the card."""
    import pandas as pd

    from crucible.catalysis.equivalence import relaxation_groups
    from crucible.core.io import write_json, write_parquet

    check_filtering(filtering)
    tolerance = TOLERANCE[filtering] if tolerance is None else float(tolerance)
    worst, worst_id = _energy_check(reactions, source, tolerance)
    groups = relaxation_groups(reactions)
    rows = _write_structures(reactions, out_db, groups)
    df = pd.DataFrame(rows, columns=REACTION_COLUMNS)
    write_parquet(df, out_parquet, schema=_schema())
    if out_catbench is not None:
        write_catbench_json(reactions, out_catbench)
    dropped = [{k: v for k, v in d.items() if k != "where"} for d in getattr(reactions, "dropped", [])]
    notes = dict(getattr(reactions, "notes", {}))
    card = {
        "n_reactions": len(df),
        "reactions_per_adsorbate": {k: int(v) for k, v in sorted(Counter(df["adsorbate"]).items())},
        "energy_source": energy_source,
        "source": source,
        "filtering": filtering,
        "n_input": int(notes.pop("n_input", len(df) + len(dropped))),
        "n_dropped": len(dropped),
        "dropped_by_rule": dict(sorted(Counter(d["rule"] for d in dropped).items())),
        "dropped": dropped,
        "notes": notes,
        "n_relaxation_groups": len(set(groups.values())),
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

    from crucible.core.io import read_parquet

    df = read_parquet(parquet)
    if ids is not None:
        wanted = set(ids)
        df = df[df["reaction_id"].isin(wanted)]
    out = []
    with ase.db.connect(str(db_path), type="db") as db:
        for row in df.to_dict(orient="records"):
            structures = [
                Structure(s["key"], s["role"], s["stoi"], s["dft_energy"], db.get_atoms(id=s["db_id"]))
                for s in json.loads(row["structures"])
            ]
            stated = None if math.isnan(row["stated_energy"]) else row["stated_energy"]
            out.append(
                Reaction(
                    row["reaction_id"],
                    row["adsorbate"],
                    row["system"],
                    row["dft_ads_eng"],
                    stated,
                    structures,
                    json.loads(row["adsorbate_indices"]),
                    row.get("cathub_id"),
                    row.get("constraint_source"),
                )
            )
    return out


def clean_input(
    format: str,
    input: InFile,
    out: str | os.PathLike,
    out_db: str | os.PathLike,
    out_card: str | os.PathLike,
    *,
    coefficients: dict | None = None,
    url: str | None = None,
    filtering: str = "catbench",
    tolerance: float | None = None,
    sha256: str | None = None,
    energy_source: str = DEFAULT_ENERGY_SOURCE,
    out_catbench: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Read a dataset in any supported ``format`` with ``filtering``'s rules and :func:`clean` it
    to ``out`` (the reaction table) and its companions, recording where it came from (format,
    path, SHA-256 of the file or tree, the MD5 that CatBench stamps as ``input_md5``, and the
    download URL when given) in the card; log what was kept and what dropped, and why. ``sha256``:
    the dataset's pin, checked before anything is read.

    Args:
        format: catbench-json: CatBench's {name}_adsorption.json(.gz); cathub-raw: Catalysis-Hub's raw
            reactions JSON; vasp-tree: a folder of VASP CONTCAR + OSZICAR runs (needs --coefficients)
        input: the file or folder (only read)
        out: the reaction table to write (parquet, one row per reaction, structures by ASE-db row id):
            results/catalysis/{dataset}/reactions.parquet
        out_db: the ASE SQLite database of every structure: results/catalysis/{dataset}/structures.db
        out_card: the dataset card to write (JSON: source and hashes, counts, dropped reactions and why,
            energy check)
        coefficients: JSON: adsorbate -> {slab, adslab, ...gas} stoichiometry, e.g. '{"H": {"slab": -1,
            "adslab": 1, "H2gas": -0.5}}' (vasp-tree only; required there)
        url: where the input was downloaded from (recorded in the card)
        filtering: catbench (default): drop what CatBench 1.1.6 drops and list it in the card; strict: refuse
            the dataset instead
        tolerance: eV, Σ stoi·E vs stated reaction energy (default 1e-3 catbench, 1e-4 strict)
        sha256: the dataset's pin: refuse the input if it differs
        energy_source: what the reference energies are, recorded in the card (default: %(default)r)
        out_catbench: also write the cleaned reactions as a CatBench dataset file ({name}_adsorption.json)
    """
    reactions = read_dataset(format, input, coefficients, filtering, tolerance, sha256=sha256)
    source: dict[str, Any] = {"format": format, "path": str(input), "sha256": pinned_files.dataset_sha256(input)}
    if file_md5(input):
        source["md5"] = file_md5(input)
    if url:
        source["url"] = url
    card = clean(
        reactions,
        out,
        out_db,
        out_card,
        source=source,
        tolerance=tolerance,
        filtering=filtering,
        energy_source=energy_source,
        out_catbench=out_catbench,
    )
    log.info(
        "%d of %d reactions kept (%s); dropped by rule %s; worst |Σ stoi·E − stated| = %.3g eV",
        card["n_reactions"],
        card["n_input"],
        card["reactions_per_adsorbate"],
        card["dropped_by_rule"],
        card["energy_check"]["worst_abs_difference_eV"],
    )
    for d in card["dropped"]:
        log.info("dropped %s (Catalysis-Hub id %s): %s", d["reaction_id"], d.get("cathub_id"), d["reason"])
    return card
