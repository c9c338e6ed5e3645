"""``crucible catalysis ...``: adsorption energies with CatBench's semantics, and relative energies.

crucible catalysis fetch --dataset MamunHighT2019 --url URL [--sha256 HEX] --out resources/catalysis/...
crucible catalysis clean --format catbench-json --input raw.json --out reactions.parquet --out-db structures.db --out-card card.json [--filtering strict] [--out-catbench clean_adsorption.json]
crucible catalysis relax --reactions reactions.parquet --db structures.db --model emt --chunk 0 --n-chunks 1 --params '{}' --out chunk_0.json
crucible catalysis score --inputs chunk_0.json ... --model emt --thresholds '{}' --out analysis.json --out-reactions reactions.parquet
crucible catalysis tables --inputs analysis/*.json --out-prefix results/tables/catalysis_X --out-xlsx results/tables/catalysis_X.xlsx
crucible catalysis figures --inputs analysis/*.json --reactions analysis/*.parquet --dataset X --out-parity a.png a.pdf --out-sensitivity s.png s.pdf --out-model-parity m1.png ...
crucible catalysis relative --task surface --input DIR --model emt --out rel.parquet
crucible catalysis relative-table --inputs rel/*.parquet --out-prefix results/tables/catalysis_surface_X
crucible catalysis demo --out-dir DIR
"""

from __future__ import annotations

from crucible.catalysis import DEFAULT_ENERGY_SOURCE, FILTERINGS, FORMATS, RELATIVE_TASKS
from crucible.stages.declaration import Opt, Stage, json_value

HELP = "adsorption, surface and formation energies (CatBench semantics)"  # the group's line in `crucible --help`
STAGES = (
    Stage(
        "fetch",
        "download a CatBench JSON (refused unless its SHA-256 is pinned)",
        ".fetch:fetch_dataset",
        Opt("sha256", default=None),
    ),
    Stage(
        "clean",
        "any supported source -> reactions.parquet + ASE db + card",
        ".clean:clean_input",
        Opt("format", choices=FORMATS),
        Opt("filtering", choices=FILTERINGS, default="catbench"),
        Opt("energy_source", default=DEFAULT_ENERGY_SOURCE),
    ),
    Stage(
        "relax",
        "K-seed relaxations of one chunk with one potential (resumable)",
        ".chunks:relax_chunk",
        Opt("chunk", type=int, default=0),
        Opt("n_chunks", type=int, default=1),
        Opt("params", type=json_value, default=None),
    ),
    Stage(
        "score",
        "anomaly classes, rates, MAEs, ADwT/AMDwT, gas shift for one potential",
        ".scoring:score_calculation_files",
        Opt("thresholds", type=json_value, default=None),
    ),
    Stage(
        "tables",
        "MLIP_Data / anomaly / per-adsorbate tables and the Excel workbook",
        ".report:write_table_files",
        Opt("out_prefix"),
    ),
    Stage("figures", "parity and threshold-sensitivity plots", ".figures:write_figure_files"),
    Stage(
        "relative",
        "surface or bulk-formation energies with one potential",
        ".relative:write_relative_energies",
        Opt("task", choices=RELATIVE_TASKS),
    ),
    Stage(
        "relative-table",
        "MAE / RMSE / max error per potential",
        ".report:write_relative_table",
        Opt("task", choices=RELATIVE_TASKS),
        Opt("out_prefix"),
    ),
    Stage("demo", "write the EMT-labelled demo dataset in all three formats", ".demo:write_demo"),
)
