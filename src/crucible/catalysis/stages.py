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
        (
            Opt("dataset", "the dataset's name in the config (catalysis.datasets), e.g. MamunHighT2019"),
            Opt("url", "where to download the file from"),
            Opt(
                "sha256",
                "64 hex digits the download must match; without it the file is downloaded, its SHA-256 "
                "printed and nothing written (pin it in the config to use it)",
                default=None,
            ),
            Out("out", "the file to write: resources/catalysis/{dataset}/{filename}"),
        ),
    ),
    Stage(
        "clean",
        "any supported source -> reactions.parquet + ASE db + card",
        "crucible.catalysis.clean:clean_input",
        (
            Opt(
                "format",
                "catbench-json: CatBench's {name}_adsorption.json(.gz); cathub-raw: Catalysis-Hub's raw "
                "reactions JSON; vasp-tree: a folder of VASP CONTCAR + OSZICAR runs (needs --coefficients)",
                choices=FORMATS,
            ),
            In("input", "the file or folder (only read)"),
            Opt(
                "coefficients",
                "JSON: adsorbate -> {slab, adslab, ...gas} stoichiometry, e.g. "
                '\'{"H": {"slab": -1, "adslab": 1, "H2gas": -0.5}}\' (vasp-tree only; required there)',
                type=json_value,
                default=None,
            ),
            Opt(
                "filtering",
                "catbench (default): drop what CatBench 1.1.6 drops and list it in the card; strict: refuse "
                "the dataset instead",
                choices=FILTERINGS,
                default="catbench",
            ),
            Opt(
                "tolerance",
                "eV, Σ stoi·E vs stated reaction energy (default 1e-3 catbench, 1e-4 strict)",
                type=float,
                default=None,
            ),
            Out(
                "out_catbench",
                "also write the cleaned reactions as a CatBench dataset file ({name}_adsorption.json)",
                default=None,
            ),
            Opt(
                "energy_source",
                "what the reference energies are, recorded in the card (default: %(default)r)",
                default=DEFAULT_ENERGY_SOURCE,
            ),
            Opt("url", "where the input was downloaded from (recorded in the card)", default=None),
            Opt("sha256", "the dataset's pin: refuse the input if it differs", default=None),
            Out(
                "out",
                "the reaction table to write (parquet, one row per reaction, structures by ASE-db row id): "
                "results/catalysis/{dataset}/reactions.parquet",
            ),
            Out("out_db", "the ASE SQLite database of every structure: results/catalysis/{dataset}/structures.db"),
            Out(
                "out_card",
                "the dataset card to write (JSON: source and hashes, counts, dropped reactions and why, energy check)",
            ),
        ),
    ),
    Stage(
        "relax",
        "K-seed relaxations of one chunk with one potential (resumable)",
        "crucible.catalysis.chunks:relax_chunk",
        (
            In("reactions", "the reaction table clean wrote (reactions.parquet)"),
            In("db", "the ASE database clean wrote beside it (structures.db)"),
            *_POTENTIAL,
            Opt("chunk", "which chunk to relax, 0 .. N-1 of --n-chunks (default 0)", type=int, default=0),
            Opt(
                "n_chunks",
                "slices of the sorted reaction ids, a relaxation group never split (default 1: all in one)",
                type=int,
                default=1,
            ),
            Opt(
                "params",
                "JSON of relaxation settings, each optional: seeds (3), fmax (0.05 eV/Å), max_steps (999), "
                "gas_max_steps (500), mode (basic; oc20: the adslab only), chemical_bond_cutoff (6.0 Å: atom pairs "
                "whose bond change is measured), structure_cache (true: relax each distinct slab/adslab once per "
                "seed)",
                type=json_value,
                default=None,
            ),
            Out(
                "out",
                "the chunk's JSON to write: results/catalysis/{dataset}/calc/{model}/chunk_{chunk}.json "
                "(finished reactions are kept in {out}.parts/ until then, so a killed run resumes)",
            ),
        ),
    ),
    Stage(
        "score",
        "anomaly classes, rates, MAEs, ADwT/AMDwT, gas shift for one potential",
        "crucible.catalysis.analysis:score_calculation_files",
        (
            In("inputs", "every chunk JSON relax wrote for this potential and dataset", many=True),
            Opt("model", "the potential's name, as given to relax (labels the outputs)"),
            Opt(
                "thresholds",
                "JSON of analysis thresholds, each optional: disp_thrs (0.5 Å), energy_thrs (2.0 eV), "
                "reproduction_thrs (0.2 eV, range over seeds), bond_length_change_threshold (0.2, a fraction), "
                "energy_cutoff (eV: reactions whose DFT E_ads is above it are left out; default none), "
                "n_crit_relax (999 steps: a relaxation that used them all did not converge), gas_shift_min_n "
                "(5 reactions of an adsorbate for its gas shift), time_unit (ms; s, ms or us)",
                type=json_value,
                default=None,
            ),
            In("card", "the dataset's card.json: input count and hash for the Coverage row", default=None),
            Out(
                "out",
                "the analysis to write (JSON: rates, MAEs, ADwT/AMDwT, threshold sweeps): "
                "results/catalysis/{dataset}/analysis/{model}.json",
            ),
            Out(
                "out_reactions",
                "the per-reaction table to write (parquet: DFT and potential energies, anomaly class): "
                "results/catalysis/{dataset}/analysis/{model}.parquet",
            ),
            Out(
                "out_anomaly",
                "CatBench's {mlip}_anomaly_detection.json: thresholds + reaction ids per class",
                default=None,
            ),
        ),
    ),
    Stage(
        "tables",
        "MLIP_Data / anomaly / per-adsorbate tables and the Excel workbook",
        "crucible.catalysis.report:write_table_files",
        (
            In(
                "inputs",
                "the analysis JSONs score wrote, one per potential, in table order: .../analysis/{model}.json",
                many=True,
            ),
            Opt(
                "out_prefix",
                "path without suffix: writes {prefix}.{csv,md,tex}, {prefix}_anomaly.*, {prefix}_adsorbates.*, "
                "{prefix}_shifted.*",
            ),
            Out("out_xlsx", "also write CatBench's Excel workbook (.xlsx) here", default=None),
        ),
    ),
    Stage(
        "figures",
        "parity and threshold-sensitivity plots",
        "crucible.catalysis.figures:write_figure_files",
        (
            In(
                "inputs",
                "the analysis JSONs score wrote, one per potential, in plot order: .../analysis/{model}.json",
                many=True,
            ),
            In(
                "reactions",
                "the per-reaction parquets score wrote, one per potential: .../analysis/{model}.parquet",
                many=True,
            ),
            Opt("dataset", "the dataset's name, printed in the figure titles"),
            Out(
                "out_parity",
                "the parity plot of every potential, one file per format by suffix (e.g. a.png a.pdf)",
                many=True,
            ),
            Out(
                "out_parity_shifted",
                "parity on gas-shift-corrected energies, one file per format (default: not drawn)",
                many=True,
                default=None,
            ),
            Out(
                "out_sensitivity",
                "anomaly shares against the displacement and bond-length thresholds, one file per format",
                many=True,
            ),
            Out(
                "out_model_parity",
                "one parity plot per potential, in the order of --inputs (default: none)",
                many=True,
                default=None,
            ),
        ),
    ),
    Stage(
        "relative",
        "surface or bulk-formation energies with one potential",
        "crucible.catalysis.relative:write_relative_energies",
        (
            Opt(
                "task",
                "surface: γ in J/m² from {material}/bulk + {material}/slab; bulk_formation: eV/atom from "
                "bulk_compounds/{compound} + elements/{element}",
                choices=RELATIVE_TASKS,
            ),
            In("input", "the folder of VASP runs (CONTCAR + OSZICAR) in the task's layout (only read)"),
            Opt(
                "coefficients",
                'JSON: compound -> {bulk: 1, element: -x}, e.g. \'{"Cu3Pt": {"bulk": 1, "Cu": -3, "Pt": -1}}\' '
                "(bulk_formation only; its compounds are the ones computed)",
                type=json_value,
                default=None,
            ),
            *_POTENTIAL,
            Out(
                "out",
                "the energies to write (parquet, one row per system, potential's provenance in its metadata): "
                "results/catalysis/relative/{dataset}/{model}.parquet",
            ),
        ),
    ),
    Stage(
        "relative-table",
        "MAE / RMSE / max error per potential",
        "crucible.catalysis.report:write_relative_table",
        (
            Opt(
                "task",
                "which energies the inputs hold: sets the unit (J/m² surface, eV/atom bulk_formation)",
                choices=RELATIVE_TASKS,
            ),
            In("inputs", "the parquets relative wrote, one per potential, in table order", many=True),
            Opt("out_prefix", "path without suffix: writes {prefix}.csv, .md and .tex"),
        ),
    ),
    Stage(
        "demo",
        "write the EMT-labelled demo dataset in all three formats",
        "crucible.catalysis.demo:write_demo",
        (
            Out(
                "out_dir",
                "folder to write into (created): the demo set as CatBench JSON, Catalysis-Hub raw and a VASP "
                "tree, plus surface and formation trees",
            ),
        ),
    ),
)
