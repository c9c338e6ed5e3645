"""Tables and CatBench's Excel workbook for the catalysis benchmark (its figures:
:mod:`crucible.catalysis.figures`).

Input: one analysis JSON per potential (``crucible catalysis score``), holding the MLIP_Data
row, the anomaly row, per-adsorbate rows and the gas-shift block.

Gas-reference shift as CatBench 1.1.6 computes it (:func:`crucible.catalysis.analysis.gas_shift`):
the **median** signed error per adsorbate over Normal + Energy-anomaly reactions (≥
``gas_shift_min_n``), subtracted from all that adsorbate's reactions, energy-anomaly test re-run
on the structure-valid ones only.

The workbook has CatBench 1.1.6's layout (``AdsorptionAnalysis._create_excel_output``): sheets
MLIP_Data, MLIP_Data_shifted, anomaly, anomaly_shifted, Coverage, then one per potential in
case-insensitive name order; potentials in that order on every sheet; per-adsorbate rows by
falling reaction count, then name, with the gas-shift columns beside them.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any, Sequence

import numpy as np
import pandas as pd

from crucible.core.io import InFile

# (column, top header, second header) — CatBench's MLIP_Data sheet (``_create_mlip_data_sheet`` in
# catbench/adsorption/analysis/analysis.py; the layout of 1.1.3, unchanged in 1.1.6).
MLIP_DATA = [
    ("MLIP_name", "MLIP_name", ""),
    ("Normal_rate", "Normal rate (%)", ""),
    ("Adsorbate_migration_rate", "Adsorbate migration rate (%)", ""),
    ("Anomaly_rate_total", "Anomaly rate (%)", "total"),
    ("Anomaly_rate_reproduction_failure", "Anomaly rate (%)", "reproduction failure"),
    ("Anomaly_rate_unphysical_relaxation", "Anomaly rate (%)", "unphysical relaxation"),
    ("Anomaly_rate_energy_anomaly", "Anomaly rate (%)", "energy anomaly"),
    ("MAE_total", "MAE_total (eV)", ""),
    ("MAE_normal", "MAE_normal (eV)", ""),
    ("MAE_single", "MAE_single (eV)", ""),
    ("ADwT", "ADwT (%)", ""),
    ("AMDwT", "AMDwT (%)", ""),
    ("Num_total", "Num_total", ""),
    ("Time_total", "Time_total ({unit})", ""),
    ("Time_per_step", "Time_per_step ({unit})", ""),
    ("Steps_total", "Steps_total", ""),
]
ANOMALY = [
    ("MLIP_name", "MLIP_name", ""),
    ("Num_normal", "Num_normal", ""),
    ("Num_adsorbate_migration", "Num_adsorbate_migration", ""),
    ("Anomaly_total", "Anomaly count", "total"),
    ("Anomaly_reproduction_failure", "Anomaly count", "reproduction failure"),
    ("Anomaly_unphysical_relaxation", "Anomaly count", "unphysical relaxation"),
    ("Anomaly_energy_anomaly", "Anomaly count", "energy anomaly"),
    ("Reproduction_ads_eng_seed", "Reproduction failure", "ads_eng_seed"),
    ("Reproduction_ads_seed", "Reproduction failure", "ads_seed"),
    ("Reproduction_slab_seed", "Reproduction failure", "slab_seed"),
    ("Unphysical_ads_conv", "Unphysical relaxation", "ads_conv"),
    ("Unphysical_ads_move", "Unphysical relaxation", "ads_move"),
    ("Unphysical_slab_conv", "Unphysical relaxation", "slab_conv"),
    ("Unphysical_slab_move", "Unphysical relaxation", "slab_move"),
]
# Timings vary from run to run: the printed tables (csv, md, tex) leave them out, so that two runs
# give byte-identical tables; they stay in each potential's analysis JSON and, as CatBench prints
# them, in its workbook (the xlsx, the peer's own format).
TIMINGS = ("Time_total", "Time_per_step")
MLIP_TABLE = [column for column in MLIP_DATA if column[0] not in TIMINGS]
PER_MLIP = [
    ("Adsorbate_name", "Adsorbate_name", ""),
    ("MAE_total", "MAE_total (eV)", ""),
    ("MAE_normal", "MAE_normal (eV)", ""),
    ("MAE_single", "MAE_single (eV)", ""),
    ("ADwT", "ADwT (%)", ""),
    ("AMDwT", "AMDwT (%)", ""),
    ("Num_total", "Num_total", ""),
    ("Num_normal", "Num_normal", ""),
    ("Num_adsorbate_migration", "Num_adsorbate_migration", ""),
    ("Anomaly_total", "Anomaly count", "total"),
    ("Anomaly_reproduction_failure", "Anomaly count", "reproduction failure"),
    ("Anomaly_unphysical_relaxation", "Anomaly count", "unphysical relaxation"),
    ("Anomaly_energy_anomaly", "Anomaly count", "energy anomaly"),
]
# CatBench puts the gas-shift correction of each adsorbate beside its row, under one header.
GAS_SHIFT = [
    ("shift_eV", "Gas shift correction", "Shift (eV)"),
    ("N_fit", "Gas shift correction", "N_fit"),
    ("MAE_total_shifted", "Gas shift correction", "MAE_total_shifted (eV)"),
    ("MAE_normal_shifted", "Gas shift correction", "MAE_normal_shifted (eV)"),
    ("Num_normal_shifted", "Gas shift correction", "Num_normal_shifted"),
    ("Num_energy_anomaly_shifted", "Gas shift correction", "Num_energy_anomaly_shifted"),
]
PER_MLIP_SHEET = PER_MLIP + GAS_SHIFT
# CatBench's Coverage sheet: one plain header row (pandas' to_excel), then a note under the table.
COVERAGE = [
    "MLIP_name",
    "Num_input",
    "Num_succeeded",
    "Num_failed",
    "Num_not_run",
    "Coverage_pct",
    "Failed_by_stage",
    "catbench_version",
    "dispersion",
    "calculator",
    "device",
    "input_md5",
]
COVERAGE_NOTE = (
    "Num_succeeded counts every computed reaction, including any later excluded "
    "by energy_cutoff, so it can exceed Num_total in MLIP_Data."
)
# Column widths of CatBench's sheets (characters).
_WIDTHS = {
    "MLIP_Data": [25, 18, 30, 15, 20, 25, 18, 18, 18, 18, 15, 15, 15, 18, 18, 15],
    "anomaly": [20, 15, 25, 15, 20, 25, 18, 15, 12, 12, 12, 12, 12, 12],
    "per_mlip": [20, 18, 18, 18, 15, 15, 15, 15, 25, 15, 20, 25, 18, 12, 10, 22, 24, 20, 26],
}
_FORMATS = {"rate": "0.00", "mae": "0.000", "count": "#,##0"}


def _kind(column: str) -> str:
    if (
        column.startswith(
            (
                "Num_",
                "Anomaly_total",
                "Anomaly_rep",
                "Anomaly_unp",
                "Anomaly_ene",
                "Reproduction_",
                "Unphysical_",
                "Steps_",
                "N_fit",
                "Time_total",
            )
        )
        and "rate" not in column
    ):
        return "count"
    if "rate" in column:
        return "rate"
    return "mae"


def flat_headers(spec, unit: str = "ms") -> dict[str, str]:
    return {c: (f"{a.format(unit=unit)}: {b}" if b else a.format(unit=unit)) for c, a, b in spec}


# The workbook keeps CatBench's own names; the printed tables say them in words.
_WORDED = {
    "MLIP_name": "potential",
    "Adsorbate_name": "adsorbate",
    "MAE_total": "MAE, all reactions",
    "MAE_normal": "MAE, normal",
    "MAE_single": "MAE, single point",
    "Num_total": "reactions",
    "Num_normal": "normal",
    "Num_adsorbate_migration": "adsorbate migration",
    "Time_total": "total time",
    "Time_per_step": "time per step",
    "Steps_total": "total steps",
    "ads_eng_seed": "adsorption energy varies with seed",
    "ads_seed": "adslab varies with seed",
    "slab_seed": "slab varies with seed",
    "ads_conv": "adslab not converged",
    "ads_move": "adslab atoms moved",
    "slab_conv": "slab not converged",
    "slab_move": "slab atoms moved",
}


# CatBench's code names as whole words, longest first (``MAE_total`` before ``MAE``-like prefixes)
_CODE_NAME = re.compile(
    r"(?<![A-Za-z_])(" + "|".join(sorted(map(re.escape, _WORDED), key=len, reverse=True)) + r")(?![A-Za-z_])"
)


def worded_headers(spec, unit: str = "ms") -> dict[str, str]:
    """:func:`flat_headers` with CatBench's code names in words, for the Markdown and LaTeX tables."""
    return {
        column: _CODE_NAME.sub(lambda m: _WORDED[m.group(1)], head) for column, head in flat_headers(spec, unit).items()
    }


# per table of :func:`write_tables`: (what it is, what it shows)
_TABLE_TOPICS = {
    "": (
        "adsorption energies",
        "rates of CatBench's classes (normal, adsorbate migration, anomalies), MAE "
        "against the reference (eV), ADwT/AMDwT and relaxation steps (timings, which vary between runs, are in "
        "the workbook and the analysis files)",
    ),
    "_anomaly": ("anomaly counts", "reactions per CatBench class and per anomaly criterion"),
    "_adsorbates": ("adsorption energies by adsorbate", "MAE (eV), ADwT/AMDwT and class counts per adsorbate"),
    "_shifted": (
        "adsorption energies, gas-phase shift applied",
        "as the main table, on energies after CatBench's per-adsorbate gas-shift correction",
    ),
}


def _table_caption(dataset: str, suffix: str, analyses: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """(title, caption) of one of :func:`write_tables`' tables."""
    n = max((int(a["mlip"].get("Num_total") or 0) for a in analyses), default=0)
    topic, shows = _TABLE_TOPICS[suffix]
    caption = (
        f"Per potential, over up to {n} adsorption reactions of {dataset} (all of them: no split): {shows}; "
        "reactions a potential failed on are counted as failed, not classified."
    )
    return f"CatBench {topic} on {dataset}", caption


def frame(rows: Sequence[dict[str, Any]], spec) -> pd.DataFrame:
    cols = [c for c, _, _ in spec]
    return pd.DataFrame([{c: r.get(c) for c in cols} for r in rows], columns=cols)


def _excel_value(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    return v


def _write_block(ws, df: pd.DataFrame, spec, start_row: int, unit: str, widths: Sequence[int] = ()) -> int:
    """Two header rows (top merged across its sub-columns, single headers merged vertically)."""
    from openpyxl.styles import Alignment, Font

    col = 1
    i = 0
    while i < len(spec):
        _, top, sub = spec[i]
        j = i
        while j + 1 < len(spec) and spec[j + 1][1] == top and sub:
            j += 1
        cell = ws.cell(row=start_row, column=col, value=top.format(unit=unit))
        cell.font = Font(bold=True)
        cell.alignment = Alignment(horizontal="center", vertical="center", wrap_text=True)
        if sub:
            for k in range(i, j + 1):
                c = ws.cell(row=start_row + 1, column=col + k - i, value=spec[k][2])
                c.font = Font(bold=True)
                c.alignment = Alignment(horizontal="center")
            if j > i:
                ws.merge_cells(start_row=start_row, start_column=col, end_row=start_row, end_column=col + j - i)
        else:
            ws.merge_cells(start_row=start_row, start_column=col, end_row=start_row + 1, end_column=col)
        col += j - i + 1
        i = j + 1
    for r, row in enumerate(df.itertuples(index=False), start=start_row + 2):
        for c, ((name, _, _), value) in enumerate(zip(spec, row), start=1):
            cell = ws.cell(row=r, column=c, value=_excel_value(value))
            if name not in ("MLIP_name", "Adsorbate_name"):
                cell.number_format = _FORMATS[_kind(name)]
    from openpyxl.utils import get_column_letter

    for c in range(1, len(spec) + 1):
        ws.column_dimensions[get_column_letter(c)].width = widths[c - 1] if c <= len(widths) else 16
    for r in range(start_row, start_row + 2 + len(df)):
        ws.row_dimensions[r].height = 25
    return start_row + 2 + len(df)


_FIXED_SHEETS = ("MLIP_Data", "MLIP_Data_shifted", "anomaly", "anomaly_shifted", "Coverage")


def _sheet_title(name: str, used: set[str]) -> str:
    title = "".join(ch if ch not in "[]:*?/\\" else "_" for ch in name)[:31]
    base, n = title, 1
    while title in used or title in _FIXED_SHEETS:
        title = f"{base[:28]}_{n}"
        n += 1
    used.add(title)
    return title


def per_adsorbate_sheet_rows(analysis: dict[str, Any]) -> list[dict[str, Any]]:
    """A potential's per-adsorbate rows with the gas-shift columns beside them, most reactions
    first (ties by name), as CatBench orders them."""
    shift = {b["Adsorbate_name"]: b for b in analysis.get("gas_shift", [])}
    rows = []
    for row in analysis["per_adsorbate"]:
        g = shift.get(row["Adsorbate_name"], {})
        rows.append(
            {
                **row,
                "shift_eV": g.get("shift_eV", math.nan),
                "N_fit": g.get("N_fit", 0),
                "MAE_total_shifted": g.get("MAE_total_shifted", math.nan),
                "MAE_normal_shifted": g.get("MAE_normal_shifted", math.nan),
                "Num_normal_shifted": g.get("Num_normal_shifted", 0),
                "Num_energy_anomaly_shifted": g.get("Num_energy_anomaly_shifted", 0),
            }
        )
    return sorted(rows, key=lambda r: (-int(r["Num_total"]), r["Adsorbate_name"]))


def _write_coverage(ws, rows: Sequence[dict[str, Any]]) -> None:
    from openpyxl.styles import Alignment, Border, Font, Side

    thin = Side(style="thin")
    for c, name in enumerate(COVERAGE, start=1):
        cell = ws.cell(row=1, column=c, value=name)
        cell.font = Font(bold=True)
        cell.alignment = Alignment(horizontal="center", vertical="top")
        cell.border = Border(left=thin, right=thin, top=thin, bottom=thin)
    for r, row in enumerate(rows, start=2):
        for c, name in enumerate(COVERAGE, start=1):
            ws.cell(row=r, column=c, value=_excel_value(row.get(name)))
    ws.cell(row=len(rows) + 3, column=1, value=COVERAGE_NOTE)


def write_workbook(analyses: Sequence[dict[str, Any]], path: str | os.PathLike, unit: str = "ms") -> None:
    """CatBench 1.1.6's workbook: MLIP_Data, MLIP_Data_shifted, anomaly, anomaly_shifted,
    Coverage, then one sheet per potential (per-adsorbate rows, gas-shift columns beside them).
    Written with fixed document properties so the bytes do not depend on the clock."""
    import datetime

    from openpyxl import Workbook

    from crucible.core.io import atomic_path

    analyses = sorted(analyses, key=lambda a: a["mlip"]["MLIP_name"].lower())
    wb = Workbook()
    fixed = datetime.datetime(2000, 1, 1)
    wb.properties.created = fixed
    wb.properties.modified = fixed
    wb.properties.creator = "crucible"
    ws = wb.active
    ws.title = "MLIP_Data"
    _write_block(ws, frame([a["mlip"] for a in analyses], MLIP_DATA), MLIP_DATA, 1, unit, _WIDTHS["MLIP_Data"])
    ws = wb.create_sheet("MLIP_Data_shifted")
    rows = [a["mlip_shifted"] for a in analyses]
    _write_block(ws, frame(rows, MLIP_DATA), MLIP_DATA, 1, unit, _WIDTHS["MLIP_Data"])
    ws = wb.create_sheet("anomaly")
    _write_block(ws, frame([a["anomaly"] for a in analyses], ANOMALY), ANOMALY, 1, unit, _WIDTHS["anomaly"])
    ws = wb.create_sheet("anomaly_shifted")
    rows = [a["anomaly_shifted"] for a in analyses]
    _write_block(ws, frame(rows, ANOMALY), ANOMALY, 1, unit, _WIDTHS["anomaly"])
    _write_coverage(wb.create_sheet("Coverage"), [a["coverage"] for a in analyses if "coverage" in a])
    used: set[str] = set()
    for a in analyses:
        ws = wb.create_sheet(_sheet_title(a["mlip"]["MLIP_name"], used))
        rows = per_adsorbate_sheet_rows(a)
        _write_block(ws, frame(rows, PER_MLIP_SHEET), PER_MLIP_SHEET, 1, unit, _WIDTHS["per_mlip"])
    with atomic_path(path, ".xlsx") as tmp:
        wb.save(tmp)
    _normalise_zip(path)


def _normalise_zip(path) -> None:
    """Rewrite the xlsx zip with fixed member timestamps and document dates (openpyxl stamps the
    current time on both when saving)."""
    import zipfile

    from crucible.core.io import atomic_path

    with zipfile.ZipFile(path) as zin:
        members = [(info, zin.read(info.filename)) for info in zin.infolist()]
    with atomic_path(path, ".xlsx") as tmp:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout:
            for info, data in members:
                if info.filename == "docProps/core.xml":
                    data = re.sub(rb"(<dcterms:(?:created|modified)[^>]*>)[^<]*", rb"\g<1>2000-01-01T00:00:00Z", data)
                zi = zipfile.ZipInfo(info.filename, date_time=(2000, 1, 1, 0, 0, 0))
                zi.compress_type = zipfile.ZIP_DEFLATED
                zout.writestr(zi, data)


def write_tables(analyses: Sequence[dict[str, Any]], prefix: str, unit: str = "ms") -> list[str]:
    """``{prefix}.{csv,md,tex}`` (MLIP_Data without its timings, :data:`TIMINGS`),
    ``{prefix}_anomaly.*``, ``{prefix}_adsorbates.*``, ``{prefix}_shifted.*`` (MLIP_Data on
    gas-shifted energies)."""
    from crucible.report.tables import write_table

    written = []
    dataset = os.path.basename(prefix).removeprefix("catalysis_")
    per_ads = [{"MLIP_name": a["mlip"]["MLIP_name"], **row} for a in analyses for row in a["per_adsorbate"]]
    ads_spec = [("MLIP_name", "MLIP_name", "")] + PER_MLIP
    for suffix, rows, spec in (
        ("", [a["mlip"] for a in analyses], MLIP_TABLE),
        ("_anomaly", [a["anomaly"] for a in analyses], ANOMALY),
        ("_adsorbates", per_ads, ads_spec),
        ("_shifted", [a["mlip_shifted"] for a in analyses], MLIP_TABLE),
    ):
        df = frame(rows, spec)
        if suffix in ("", "_shifted"):
            df["Num_failed"] = [a["mlip"].get("Num_failed", 0) for a in analyses]
        heads = {**worded_headers(spec, unit), "Num_failed": "failed (not classified)"}
        base = f"{prefix}{suffix}"
        title, caption = _table_caption(dataset, suffix, analyses)
        write_table(
            df,
            csv=f"{base}.csv",
            md=f"{base}.md",
            tex=f"{base}.tex",
            digits=3,
            headers=heads,
            title=title,
            caption=caption,
        )
        written += [f"{base}.{e}" for e in ("csv", "md", "tex")]
    return written


# ---------------------------------------------------------------------------------------------
# from the stage's files (what `crucible catalysis tables|relative-table` write)


def write_table_files(
    inputs: Sequence[InFile], out_prefix: str, out_xlsx: str | os.PathLike | None = None
) -> list[str]:
    """:func:`write_tables` (and the workbook) of the potentials' analysis JSONs, in the time
    unit the analyses were made with.

    Args:
        inputs: the analysis JSONs score wrote, one per potential, in table order: .../analysis/{model}.json
        out_prefix: path without suffix: writes {prefix}.{csv,md,tex}, {prefix}_anomaly.*,
            {prefix}_adsorbates.*, {prefix}_shifted.*
        out_xlsx: also write CatBench's Excel workbook (.xlsx) here
    """
    from crucible.core.io import read_json

    analyses = [read_json(p) for p in inputs]
    unit = analyses[0]["thresholds"].get("time_unit", "ms") if analyses else "ms"
    written = write_tables(analyses, out_prefix, unit)
    if out_xlsx:
        write_workbook(analyses, out_xlsx, unit)
        written.append(str(out_xlsx))
    return written


def write_relative_table(inputs: Sequence[InFile], task: str, out_prefix: str) -> None:
    """``{out_prefix}.{csv,md,tex}``: MAE / RMSE / max error per potential of a relative-energy task.

    Args:
        inputs: the parquets relative wrote, one per potential, in table order
        task: which energies the inputs hold: sets the unit (J/m² surface, eV/atom bulk_formation)
        out_prefix: path without suffix: writes {prefix}.csv, .md and .tex
    """
    from crucible.catalysis.relative import UNITS, relative_table
    from crucible.core.io import read_parquet
    from crucible.potentials.provenance import provenance_text, read_provenance
    from crucible.report.tables import write_table

    unit = UNITS[task]
    table = relative_table([read_parquet(p) for p in inputs])
    # what ran, as stored with each potential's energies (one file per potential, in table order)
    table["potential"] = [provenance_text(read_provenance(p)) for p in inputs]
    write_table(
        table,
        csv=f"{out_prefix}.csv",
        md=f"{out_prefix}.md",
        tex=f"{out_prefix}.tex",
        digits=3,
        title=f"Relative energies: {task}",
        caption=f"Per potential, over the {int(table['n_systems'].max()) if len(table) else 0} systems of the "
        f"{task} task (all of them: no split): MAE, RMSE and largest error against the reference ({unit}); "
        "systems a potential failed on are counted, not scored.",
        headers={
            "MAE": f"MAE ({unit})",
            "RMSE": f"RMSE ({unit})",
            "max_error": f"max |error| ({unit})",
            "n_systems": "systems",
            "n_failed": "failed",
            "potential": "potential (class, params, version)",
        },
    )
