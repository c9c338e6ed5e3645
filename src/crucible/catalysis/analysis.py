"""CatBench's analysis: raw flags, exclusive anomaly classes, rates, MAEs, ADwT / AMDwT on exact
decimal grids, time per step, and the gas-reference shift.

Source: CatBench 1.1.6 (PyPI ``catbench==1.1.6``; github.com/JinukMoon/CatBench),
``catbench/adsorption/analysis/analysis.py`` and ``catbench/utils/analysis_utils.py``, with the
default thresholds of ``catbench/config.py``.

All comparisons are strict ``>`` except the step check (``steps == n_crit_relax``). Classes, in
priority order: reproduction failure, unphysical relaxation, adsorbate migration, energy
anomaly, normal. Reactions whose calculation raised (e.g. an element the potential does not
know) are kept apart as ``calculation_error``: counted in ``Num_failed``, in no class and in no
statistic.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

CLASSES = ("reproduction_failure", "unphysical_relaxation", "adsorbate_migration", "energy_anomaly", "normal")
SEED_FLAGS = ("ads_eng_seed", "ads_seed", "slab_seed")
UNPHYSICAL_FLAGS = ("ads_conv", "ads_move", "slab_conv", "slab_move")
FAILED = "calculation_error"
TIME_FACTORS = {"s": 1.0, "ms": 1e3, "us": 1e6}


@dataclass(frozen=True)
class Thresholds:
    disp_thrs: float = 0.5
    energy_thrs: float = 2.0
    reproduction_thrs: float = 0.2
    bond_length_change_threshold: float = 0.2
    energy_cutoff: float | None = None
    n_crit_relax: int = 999
    gas_shift_min_n: int = 5
    time_unit: str = "ms"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------------------------
# flags and classes


def raw_flags(record: dict[str, Any], thr: Thresholds, has_slab: bool = True) -> dict[str, bool]:
    seeds = record["seeds"]
    final = record["final"]
    med = seeds[final["median_num"]]
    f = {
        "slab_conv": has_slab and any(s["slab_steps"] == thr.n_crit_relax for s in seeds),
        "ads_conv": any(s["adslab_steps"] == thr.n_crit_relax for s in seeds),
        "slab_move": has_slab and any(s["slab_max_disp"] > thr.disp_thrs for s in seeds),
        "ads_move": med["substrate_displacement"] > thr.disp_thrs,
        "slab_seed": has_slab and final["slab_seed_range"] > thr.reproduction_thrs,
        # OC20 mode keeps no adslab seed range apart from the adsorption energy's (CatBench)
        "ads_seed": has_slab and final["ads_seed_range"] > thr.reproduction_thrs,
        "ads_eng_seed": final["ads_eng_seed_range"] > thr.reproduction_thrs,
        "energy_anomaly": abs(final["ads_eng_median"] - record["dft_ads_eng"]) > thr.energy_thrs,
    }
    structural = f["slab_conv"] or f["ads_conv"] or f["slab_move"] or f["ads_move"]
    f["migration"] = (not structural) and med["max_bond_change"] > 100.0 * thr.bond_length_change_threshold
    return {k: bool(v) for k, v in f.items()}


def classify(seed: bool, unphysical: bool, migration: bool, energy: bool) -> str:
    if seed:
        return "reproduction_failure"
    if unphysical:
        return "unphysical_relaxation"
    if migration:
        return "adsorbate_migration"
    if energy:
        return "energy_anomaly"
    return "normal"


def reaction_table(records: Sequence[dict[str, Any]], thr: Thresholds) -> pd.DataFrame:
    """One row per reaction: energies, class, flags, the median seed's structure measures."""
    ok = [r for r in records if not r.get("error")]
    has_slab = bool(ok) and ok[0]["seeds"][0].get("slab_tot_eng") is not None  # OC20 mode has no slab
    rows = []
    for r in sorted(records, key=lambda r: r["reaction_id"]):
        row = {"reaction_id": r["reaction_id"], "adsorbate": r["adsorbate"], "dft_ads_eng": r["dft_ads_eng"]}
        if r.get("error"):
            row.update(mlip_ads_eng=math.nan, single_ads_eng=math.nan, **{"class": FAILED}, error=r["error"])
            rows.append(row)
            continue
        f = raw_flags(r, thr, has_slab)
        cls = classify(
            any(f[k] for k in SEED_FLAGS), any(f[k] for k in UNPHYSICAL_FLAGS), f["migration"], f["energy_anomaly"]
        )
        med = r["seeds"][r["final"]["median_num"]]
        row.update(
            mlip_ads_eng=r["final"]["ads_eng_median"],
            single_ads_eng=r["single_calculation"]["ads_eng"],
            **{"class": cls},
            error=None,
            **{f"flag_{k}": v for k, v in f.items()},
            median_num=r["final"]["median_num"],
            max_bond_change=med["max_bond_change"],
            substrate_displacement=med["substrate_displacement"],
            slab_seed_range=r["final"]["slab_seed_range"],
            ads_seed_range=r["final"]["ads_seed_range"],
            ads_eng_seed_range=r["final"]["ads_eng_seed_range"],
            time_total=r["time_total_slab"] + r["time_total_adslab"],
            steps_total=r["steps_total_slab"] + r["steps_total_adslab"],
        )
        rows.append(row)
    df = pd.DataFrame(rows)
    if thr.energy_cutoff is not None:
        df = df[~(df["dft_ads_eng"] > thr.energy_cutoff)].reset_index(drop=True)
    return df


# ---------------------------------------------------------------------------------------------
# ADwT / AMDwT


def decimal_thresholds(n: int) -> np.ndarray:
    """t_i = round(0.010 + 0.001·i, 3), i = 0…n−1: exact decimals, no arange drift."""
    return np.array([round(0.010 + 0.001 * i, 3) for i in range(n)])


ADWT_THRESHOLDS = decimal_thresholds(490)  # 0.010 … 0.499
AMDWT_THRESHOLDS = decimal_thresholds(1490)  # 0.010 … 1.499


def within_threshold_percent(values: Iterable[float], thresholds: np.ndarray) -> float:
    """Mean over thresholds of the percentage of values strictly below each threshold."""
    v = np.asarray([x for x in values if x is not None], dtype=float)
    if v.size == 0:
        return math.nan
    counts = (v[None, :] < thresholds[:, None]).sum(axis=1)
    return float(np.mean(100.0 * counts / v.size))


def displacement_pools(
    records: Sequence[dict[str, Any]], included: set[str], adsorbate: str | None = None, has_slab: bool = True
) -> tuple[list[float], list[float]]:
    """(mean-displacement pool, max-displacement pool): one value per structure per seed."""
    mae, mx = [], []
    for r in records:
        if r.get("error") or r["reaction_id"] not in included:
            continue
        if adsorbate is not None and r["adsorbate"] != adsorbate:
            continue
        for s in r["seeds"]:
            if has_slab:
                mae.append(s["slab_pos_mae"])
                mx.append(s["slab_max_disp"])
            mae.append(s["adslab_pos_mae"])
            mx.append(s["adslab_max_disp"])
    return mae, mx


# ---------------------------------------------------------------------------------------------
# summaries


def _mae(a: pd.Series, b: pd.Series) -> float:
    return float(np.mean(np.abs(a.to_numpy(float) - b.to_numpy(float)))) if len(a) else math.nan


def class_counts(df: pd.DataFrame) -> dict[str, int]:
    return {c: int((df["class"] == c).sum()) for c in CLASSES}


def _group_stats(df: pd.DataFrame, records, thr: Thresholds, adsorbate: str | None, has_slab: bool) -> dict[str, Any]:
    ok = df[df["class"] != FAILED]
    counts = class_counts(ok)
    total = sum(counts.values())
    anomaly = counts["reproduction_failure"] + counts["unphysical_relaxation"] + counts["energy_anomaly"]
    normal = ok[ok["class"] == "normal"]
    pools = displacement_pools(records, set(ok["reaction_id"]), adsorbate, has_slab)
    return {
        "Num_total": total,
        "Num_failed": int((df["class"] == FAILED).sum()),
        "Num_normal": counts["normal"],
        "Num_adsorbate_migration": counts["adsorbate_migration"],
        "Anomaly_total": anomaly,
        "Anomaly_reproduction_failure": counts["reproduction_failure"],
        "Anomaly_unphysical_relaxation": counts["unphysical_relaxation"],
        "Anomaly_energy_anomaly": counts["energy_anomaly"],
        "MAE_total": _mae(ok["mlip_ads_eng"], ok["dft_ads_eng"]),
        "MAE_normal": _mae(normal["mlip_ads_eng"], normal["dft_ads_eng"]),
        "MAE_single": _mae(ok["single_ads_eng"], ok["dft_ads_eng"]),
        "ADwT": within_threshold_percent(pools[0], ADWT_THRESHOLDS),
        "AMDwT": within_threshold_percent(pools[1], AMDWT_THRESHOLDS),
    }


def _rate(n: int, total: int) -> float:
    return 100.0 * n / total if total else math.nan


def coverage_row(
    records: Sequence[dict[str, Any]], mlip_name: str, n_input: int | None = None, **provenance: Any
) -> dict[str, Any]:
    """CatBench's ``Coverage`` row (1.1.5+): how many of the input reactions were computed,
    failed (a calculation error, counted whatever the energy cutoff) or were not run, the failures
    by stage, and where the numbers come from (``provenance``: calculator, device, input_md5 ...)."""
    from collections import Counter

    failed = [r for r in records if r.get("error")]
    n_ok = len(records) - len(failed)
    n_input = len(records) if n_input is None else int(n_input)
    stages = Counter(r.get("stage", "unknown") for r in sorted(failed, key=lambda r: r["reaction_id"]))
    return {
        "MLIP_name": mlip_name,
        "Num_input": n_input,
        "Num_succeeded": n_ok,
        "Num_failed": len(failed),
        "Num_not_run": max(n_input - n_ok - len(failed), 0),
        "Coverage_pct": round(100.0 * n_ok / n_input, 2) if n_input else None,
        "Failed_by_stage": "; ".join(f"{k}: {v}" for k, v in stages.most_common()),
        "catbench_version": provenance.get("catbench_version", "none: crucible (CatBench 1.1.6 semantics)"),
        "dispersion": provenance.get("dispersion", "none"),
        "calculator": provenance.get("calculator", mlip_name),
        "device": provenance.get("device", "unknown"),
        "input_md5": provenance.get("input_md5") or "unknown",
    }


def summarize(
    records: Sequence[dict[str, Any]],
    thr: Thresholds,
    mlip_name: str,
    n_input: int | None = None,
    provenance: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The MLIP_Data row, the anomaly row, per-adsorbate rows, the Coverage row and the
    per-reaction table."""
    df = reaction_table(records, thr)
    ok_records = [r for r in records if not r.get("error")]
    has_slab = bool(ok_records) and ok_records[0]["seeds"][0].get("slab_tot_eng") is not None
    g = _group_stats(df, records, thr, None, has_slab)
    ok = df[df["class"] != FAILED]
    factor = TIME_FACTORS[thr.time_unit]
    time_total = float(ok["time_total"].sum()) if len(ok) else math.nan
    steps_total = int(ok["steps_total"].sum()) if len(ok) else 0
    mlip_row = {
        "MLIP_name": mlip_name,
        "Normal_rate": _rate(g["Num_normal"], g["Num_total"]),
        "Adsorbate_migration_rate": _rate(g["Num_adsorbate_migration"], g["Num_total"]),
        "Anomaly_rate_total": _rate(g["Anomaly_total"], g["Num_total"]),
        "Anomaly_rate_reproduction_failure": _rate(g["Anomaly_reproduction_failure"], g["Num_total"]),
        "Anomaly_rate_unphysical_relaxation": _rate(g["Anomaly_unphysical_relaxation"], g["Num_total"]),
        "Anomaly_rate_energy_anomaly": _rate(g["Anomaly_energy_anomaly"], g["Num_total"]),
        "MAE_total": g["MAE_total"],
        "MAE_normal": g["MAE_normal"],
        "MAE_single": g["MAE_single"],
        "ADwT": g["ADwT"],
        "AMDwT": g["AMDwT"],
        "Num_total": g["Num_total"],
        "Num_failed": g["Num_failed"],
        "Time_total": time_total * factor,
        "Time_per_step": time_total * factor / steps_total if steps_total else math.nan,
        "Steps_total": steps_total,
    }
    anomaly_row = {
        "MLIP_name": mlip_name,
        "Num_normal": g["Num_normal"],
        "Num_adsorbate_migration": g["Num_adsorbate_migration"],
        **{
            k: g[k]
            for k in (
                "Anomaly_total",
                "Anomaly_reproduction_failure",
                "Anomaly_unphysical_relaxation",
                "Anomaly_energy_anomaly",
            )
        },
    }
    repro = ok[ok["class"] == "reproduction_failure"]
    unphys = ok[ok["class"] == "unphysical_relaxation"]
    for k in SEED_FLAGS:
        anomaly_row[f"Reproduction_{k}"] = int(repro[f"flag_{k}"].sum()) if len(repro) else 0
    for k in UNPHYSICAL_FLAGS:
        anomaly_row[f"Unphysical_{k}"] = int(unphys[f"flag_{k}"].sum()) if len(unphys) else 0
    per_ads = []
    for ads in sorted(df["adsorbate"].unique()):
        sub = df[df["adsorbate"] == ads]
        ga = _group_stats(sub, records, thr, ads, has_slab)
        per_ads.append(
            {
                "Adsorbate_name": ads,
                **{
                    k: ga[k]
                    for k in (
                        "MAE_total",
                        "MAE_normal",
                        "MAE_single",
                        "ADwT",
                        "AMDwT",
                        "Num_total",
                        "Num_normal",
                        "Num_adsorbate_migration",
                        "Anomaly_total",
                        "Anomaly_reproduction_failure",
                        "Anomaly_unphysical_relaxation",
                        "Anomaly_energy_anomaly",
                        "Num_failed",
                    )
                },
            }
        )
    shifted, shift_block = gas_shift(df, thr)
    return {
        "coverage": coverage_row(records, mlip_name, n_input, **(provenance or {})),
        "mlip": mlip_row,
        "anomaly": anomaly_row,
        "per_adsorbate": per_ads,
        "reactions": df,
        "shifted": shifted,
        "gas_shift": shift_block,
        "has_slab": has_slab,
    }


# ---------------------------------------------------------------------------------------------
# gas-reference shift (CatBench 1.1.6 ``_compute_gas_shift_data``)


def gas_shift(df: pd.DataFrame, thr: Thresholds) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Per adsorbate: the median signed error (MLIP − DFT) over the structure-valid reactions
    (Normal + Energy anomaly), when there are at least ``gas_shift_min_n``, is subtracted from
    every energy of that adsorbate, single points included; only the energy-anomaly test is run
    again, on the structure-valid ones (Normal when |error| ≤ ``energy_thrs``)."""
    out = df.copy()
    block = []
    for ads in sorted(out["adsorbate"].unique()):
        mask = out["adsorbate"] == ads
        valid = mask & out["class"].isin(["normal", "energy_anomaly"])
        n_fit = int(valid.sum())
        applied = n_fit >= thr.gas_shift_min_n
        shift = float(np.median(out.loc[valid, "mlip_ads_eng"] - out.loc[valid, "dft_ads_eng"])) if applied else 0.0
        out.loc[mask, "mlip_ads_eng"] = out.loc[mask, "mlip_ads_eng"] - shift
        out.loc[mask, "single_ads_eng"] = out.loc[mask, "single_ads_eng"] - shift
        err = (out.loc[valid, "mlip_ads_eng"] - out.loc[valid, "dft_ads_eng"]).abs()
        out.loc[valid, "class"] = np.where(err > thr.energy_thrs, "energy_anomaly", "normal")
        sub = out[mask & (out["class"] != FAILED)]
        normal = sub[sub["class"] == "normal"]
        block.append(
            {
                "Adsorbate_name": ads,
                "shift_eV": shift if applied else math.nan,
                "N_fit": n_fit,
                "applied": applied,
                "MAE_total_shifted": _mae(sub["mlip_ads_eng"], sub["dft_ads_eng"]),
                "MAE_normal_shifted": _mae(normal["mlip_ads_eng"], normal["dft_ads_eng"]),
                "Num_normal_shifted": int((out.loc[valid, "class"] == "normal").sum()),
                "Num_energy_anomaly_shifted": int((out.loc[valid, "class"] == "energy_anomaly").sum()),
            }
        )
    return out, block


def shifted_mlip_row(shifted: pd.DataFrame, base_row: dict[str, Any]) -> dict[str, Any]:
    """The MLIP_Data row recomputed on shifted energies and re-evaluated energy classes."""
    ok = shifted[shifted["class"] != FAILED]
    counts = class_counts(ok)
    total = sum(counts.values())
    anomaly = counts["reproduction_failure"] + counts["unphysical_relaxation"] + counts["energy_anomaly"]
    normal = ok[ok["class"] == "normal"]
    row = dict(base_row)
    row.update(
        {
            "Normal_rate": _rate(counts["normal"], total),
            "Adsorbate_migration_rate": _rate(counts["adsorbate_migration"], total),
            "Anomaly_rate_total": _rate(anomaly, total),
            "Anomaly_rate_energy_anomaly": _rate(counts["energy_anomaly"], total),
            "MAE_total": _mae(ok["mlip_ads_eng"], ok["dft_ads_eng"]),
            "MAE_normal": _mae(normal["mlip_ads_eng"], normal["dft_ads_eng"]),
            "MAE_single": _mae(ok["single_ads_eng"], ok["dft_ads_eng"]),
        }
    )
    return row


# ---------------------------------------------------------------------------------------------
# threshold sensitivity


DISP_GRID = [round(0.1 * i, 1) for i in range(21)]  # 0.0 … 2.0
BOND_GRID = [round(0.025 * i, 3) for i in range(21)]  # 0 … 0.5


def threshold_sensitivity(records: Sequence[dict[str, Any]], thr: Thresholds) -> pd.DataFrame:
    """Class rates (%) while one threshold varies over CatBench's grid and the other stays."""
    rows = []
    for name, grid in (("disp_thrs", DISP_GRID), ("bond_length_change_threshold", BOND_GRID)):
        for value in grid:
            t = Thresholds(**{**thr.as_dict(), name: value})
            df = reaction_table(records, t)
            counts = class_counts(df[df["class"] != FAILED])
            total = sum(counts.values())
            rows.append({"threshold": name, "value": value, **{c: _rate(n, total) for c, n in counts.items()}})
    return pd.DataFrame(rows)
