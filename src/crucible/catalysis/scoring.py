"""One potential's analysis record, what `crucible catalysis score` writes: its calculation
chunks read and checked to come from one potential, CatBench's analysis
(:mod:`crucible.catalysis.analysis`) run over them, and the analysis JSON, the per-reaction
table and CatBench's anomaly-detection file written."""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Sequence

import pandas as pd

from crucible.catalysis.analysis import (
    CLASSES,
    FAILED,
    UNPHYSICAL_FLAGS,
    Thresholds,
    shifted_mlip_row,
    summarize,
    threshold_sensitivity,
)
from crucible.core.errors import DataValidationError
from crucible.core.io import InFile

log = logging.getLogger(__name__)


def shifted_anomaly_row(anomaly_row: dict[str, Any], shifted: pd.DataFrame) -> dict[str, Any]:
    """The anomaly row after the gas shift: only the energy test was re-run, so only the normal
    and energy-anomaly counts (and the anomaly total) change."""
    row = dict(anomaly_row)
    row.update(
        Num_normal=int((shifted["class"] == "normal").sum()),
        Anomaly_energy_anomaly=int((shifted["class"] == "energy_anomaly").sum()),
    )
    row["Anomaly_total"] = (
        row["Anomaly_reproduction_failure"] + row["Anomaly_unphysical_relaxation"] + row["Anomaly_energy_anomaly"]
    )
    return row


def anomaly_detection(df: pd.DataFrame) -> dict[str, Any]:
    """CatBench's ``{mlip}_anomaly_detection.json`` lists: reaction ids per class, the issues of
    each unphysical relaxation, and (ours) the reactions whose calculation failed."""
    detection: dict[str, Any] = {c: sorted(df.loc[df["class"] == c, "reaction_id"]) for c in CLASSES}
    detection["unphysical_issues"] = {
        row.reaction_id: [k for k in UNPHYSICAL_FLAGS if getattr(row, f"flag_{k}")]
        for row in df[df["class"] == "unphysical_relaxation"].itertuples(index=False)
    }
    detection[FAILED] = sorted(df.loc[df["class"] == FAILED, "reaction_id"])
    return detection


REACTION_COLUMNS = ["reaction_id", "adsorbate", "dft_ads_eng", "mlip_ads_eng", "single_ads_eng", "class"]


def analyse(
    records: Sequence[dict[str, Any]],
    thr: Thresholds,
    model: str,
    n_input: int | None = None,
    provenance: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """(the analysis record of one potential, its per-reaction table with shifted energies);
    ``n_input`` and ``provenance`` go into the Coverage row (:func:`coverage_row`)."""
    s = summarize(records, thr, model, n_input, provenance)
    df, sh = s["reactions"], s["shifted"]
    record = {
        "model": model,
        "thresholds": thr.as_dict(),
        "coverage": s["coverage"],
        "mlip": s["mlip"],
        "anomaly": s["anomaly"],
        "per_adsorbate": s["per_adsorbate"],
        "gas_shift": s["gas_shift"],
        "mlip_shifted": shifted_mlip_row(sh, s["mlip"]),
        "anomaly_shifted": shifted_anomaly_row(s["anomaly"], sh),
        "sensitivity": threshold_sensitivity(records, thr).to_dict(orient="records"),
        "anomaly_detection": anomaly_detection(df),
    }
    reactions = df[REACTION_COLUMNS].copy()
    reactions["model"] = model
    reactions["mlip_ads_eng_shifted"] = sh["mlip_ads_eng"].to_numpy()
    reactions["class_shifted"] = sh["class"].to_numpy()
    return record, reactions


def score_calculation_files(
    inputs: Sequence[InFile],
    thresholds: dict[str, Any] | None,
    model: str,
    out: str | os.PathLike,
    out_reactions: str | os.PathLike,
    out_anomaly: str | os.PathLike | None = None,
    card: InFile | None = None,
) -> dict[str, Any]:
    """Analyse a potential's calculation chunks (``relax`` outputs): the analysis JSON, the
    per-reaction parquet and, when asked, CatBench's anomaly-detection JSON; log its headline
    numbers and return the record. The dataset's ``card`` (when given) supplies the input count
    and hash of the Coverage row; ``thresholds`` not given are the defaults.

    Args:
        inputs: every chunk JSON relax wrote for this potential and dataset
        thresholds: JSON of analysis thresholds, each optional: disp_thrs (0.5 Å), energy_thrs (2.0 eV),
            reproduction_thrs (0.2 eV, range over seeds), bond_length_change_threshold (0.2, a fraction),
            energy_cutoff (eV: reactions whose DFT E_ads is above it are left out; default none), n_crit_relax
            (999 steps: a relaxation that used them all did not converge), gas_shift_min_n (5 reactions of an
            adsorbate for its gas shift), time_unit (ms; s, ms or us)
        model: the potential's name, as given to relax (labels the outputs)
        out: the analysis to write (JSON: rates, MAEs, ADwT/AMDwT, threshold sweeps):
            results/catalysis/{dataset}/analysis/{model}.json
        out_reactions: the per-reaction table to write (parquet: DFT and potential energies, anomaly class):
            results/catalysis/{dataset}/analysis/{model}.parquet
        out_anomaly: CatBench's {mlip}_anomaly_detection.json: thresholds + reaction ids per class
        card: the dataset's card.json: input count and hash for the Coverage row
    """
    from crucible.core.io import read_json, write_json, write_parquet
    from crucible.potentials.provenance import provenance_text

    records: list[dict[str, Any]] = []
    devices, potentials = set(), {}
    for path in inputs:
        chunk = read_json(path)
        records += chunk["reactions"]
        devices.add(str(chunk.get("device", "unknown")))
        identity = {k: v for k, v in (chunk.get("potential") or {}).items() if k != "device"}
        potentials[json.dumps(identity, sort_keys=True)] = identity
    if len(potentials) > 1:
        raise DataValidationError(
            f"{', '.join(map(str, inputs))}: chunks of {model!r} were computed by different potentials "
            f"({'; '.join(provenance_text(p) for p in potentials.values())}); rerun the relaxations"
        )
    potential = next(iter(potentials.values()), {})
    info = read_json(card) if card else {}
    provenance = {
        # CatBench's calculator stamp: the class (here with its params and package version)
        "calculator": provenance_text(potential) or model,
        "device": ", ".join(sorted(devices)) or "unknown",
        "input_md5": (info.get("source") or {}).get("md5"),
    }
    record, reactions = analyse(records, Thresholds(**(thresholds or {})), model, info.get("n_reactions"), provenance)
    record["potential"] = potential
    write_json(record, out)
    if out_anomaly:
        write_json({"thresholds": record["thresholds"], **record["anomaly_detection"]}, out_anomaly)
    write_parquet(reactions, out_reactions)
    mlip = record["mlip"]
    log.info("%s: %s", model, {k: mlip[k] for k in ("Num_total", "Normal_rate", "MAE_total", "MAE_normal")})
    return record
