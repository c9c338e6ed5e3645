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
from crucible.stage import In, Opt, Out, Stage, json_value

# the potential a job runs: relax and relative
_POTENTIAL = (
    Opt("model", "registered potential (emt, chgnet-0.3.0, sevennet-0, ...) or a custom one"),
    Opt("device", "cpu or cuda (default: cuda when available; built-in ASE potentials: cpu)", default=None),
    Opt("threads", "torch CPU threads (default: torch's own choice)", type=int, default=None),
    Opt(
        "custom_potentials",
        "JSON of config's potentials: section (a user's potential named by --model)",
        type=json_value,
        default=None,
    ),
)

STAGES = (
    Stage(
        "fetch",
        "download a CatBench JSON (refused unless its SHA-256 is pinned)",
        "crucible.catalysis.fetch:fetch_dataset",
        (Opt("dataset"), Opt("url"), Opt("sha256", default=None), Out("out")),
    ),
    Stage(
        "clean",
        "any supported source -> reactions.parquet + ASE db + card",
        "crucible.catalysis.clean:clean_input",
        (
            Opt("format", choices=FORMATS),
            In("input"),
            Opt("coefficients", type=json_value, default=None),
            Opt("filtering", choices=FILTERINGS, default="catbench"),
            Opt("tolerance", type=float, default=None),
            Out("out_catbench", default=None),
            Opt("energy_source", default=DEFAULT_ENERGY_SOURCE),
            Opt("url", default=None),
            Opt("sha256", default=None),
            Out("out"),
            Out("out_db"),
            Out("out_card"),
        ),
    ),
    Stage(
        "relax",
        "K-seed relaxations of one chunk with one potential (resumable)",
        "crucible.catalysis.chunks:relax_chunk",
        (
            In("reactions"),
            In("db"),
            *_POTENTIAL,
            Opt("chunk", type=int, default=0),
            Opt("n_chunks", type=int, default=1),
            Opt("params", type=json_value, default=None),
            Out("out"),
        ),
    ),
    Stage(
        "score",
        "anomaly classes, rates, MAEs, ADwT/AMDwT, gas shift for one potential",
        "crucible.catalysis.analysis:score_calculation_files",
        (
            In("inputs", many=True),
            Opt("model"),
            Opt("thresholds", type=json_value, default=None),
            In("card", default=None),
            Out("out"),
            Out("out_reactions"),
            Out("out_anomaly", default=None),
        ),
    ),
    Stage(
        "tables",
        "MLIP_Data / anomaly / per-adsorbate tables and the Excel workbook",
        "crucible.catalysis.report:write_table_files",
        (In("inputs", many=True), Opt("out_prefix"), Out("out_xlsx", default=None)),
    ),
    Stage(
        "figures",
        "parity and threshold-sensitivity plots",
        "crucible.catalysis.figures:write_figure_files",
        (
            In("inputs", many=True),
            In("reactions", many=True),
            Opt("dataset"),
            Out("out_parity", many=True),
            Out("out_parity_shifted", many=True, default=None),
            Out("out_sensitivity", many=True),
            Out("out_model_parity", many=True, default=None),
        ),
    ),
    Stage(
        "relative",
        "surface or bulk-formation energies with one potential",
        "crucible.catalysis.relative:write_relative_energies",
        (
            Opt("task", choices=RELATIVE_TASKS),
            In("input"),
            Opt("coefficients", type=json_value, default=None),
            *_POTENTIAL,
            Out("out"),
        ),
    ),
    Stage(
        "relative-table",
        "MAE / RMSE / max error per potential",
        "crucible.catalysis.report:write_relative_table",
        (Opt("task", choices=RELATIVE_TASKS), In("inputs", many=True), Opt("out_prefix")),
    ),
    Stage(
        "demo",
        "write the EMT-labelled demo dataset in all three formats",
        "crucible.catalysis.demo:write_demo",
        (Out("out_dir"),),
    ),
)
