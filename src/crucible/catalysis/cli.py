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

import argparse
import json
import logging

log = logging.getLogger(__name__)


def _json_arg(text: str | None) -> dict:
    return json.loads(text) if text else {}


def _cmd_fetch(args) -> int:
    from crucible.catalysis.fetch import fetch_dataset

    fetch_dataset(args.dataset, args.url, args.sha256 or None, args.out)
    return 0


def _cmd_clean(args) -> int:
    from crucible.catalysis.clean import clean_input

    card = clean_input(
        args.format,
        args.input,
        args.out,
        args.out_db,
        args.out_card,
        coefficients=_json_arg(args.coefficients),
        url=args.url,
        sha256=args.sha256 or None,
        tolerance=args.tolerance,
        filtering=args.filtering,
        energy_source=args.energy_source,
        out_catbench=args.out_catbench,
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
    return 0


def _cmd_relax(args) -> int:
    from crucible.catalysis.chunks import chunk_ids, run_chunk
    from crucible.catalysis.clean import load_reactions
    from crucible.io import read_parquet
    from crucible.potentials.registry import load_potential

    table = read_parquet(args.reactions)
    groups = list(table["relax_group"]) if "relax_group" in table else None
    ids = chunk_ids(list(table["reaction_id"]), args.chunk, args.n_chunks, groups)
    reactions = load_reactions(args.reactions, args.db, ids)
    potential = load_potential(
        args.model, device=args.device, threads=args.threads, custom=_json_arg(args.custom_potentials)
    )
    run_chunk(
        reactions,
        potential.calculator,
        _json_arg(args.params),
        args.out,
        args.model,
        device=potential.device,
        potential=dict(potential.provenance),
    )
    return 0


def _cmd_score(args) -> int:
    from crucible.catalysis.analysis import score_calculation_files

    record = score_calculation_files(
        args.inputs,
        _json_arg(args.thresholds),
        args.model,
        args.out,
        args.out_reactions,
        args.out_anomaly,
        card=args.card,
    )
    mlip = record["mlip"]
    log.info("%s: %s", args.model, {k: mlip[k] for k in ("Num_total", "Normal_rate", "MAE_total", "MAE_normal")})
    return 0


def _cmd_tables(args) -> int:
    from crucible.catalysis.report import write_table_files

    write_table_files(args.inputs, args.out_prefix, args.out_xlsx)
    return 0


def _cmd_figures(args) -> int:
    from crucible.catalysis.figures import write_figure_files

    write_figure_files(
        args.inputs,
        args.reactions,
        args.dataset,
        parity=args.out_parity,
        sensitivity=args.out_sensitivity,
        parity_shifted=args.out_parity_shifted or (),
        model_parity=args.out_model_parity or (),
    )
    return 0


def _cmd_relative(args) -> int:
    from crucible.catalysis.relative import read_formation_tree, read_surface_tree, run_relative
    from crucible.io import write_parquet
    from crucible.potentials.provenance import provenance_metadata
    from crucible.potentials.registry import load_potential

    systems = (
        read_surface_tree(args.input)
        if args.task == "surface"
        else read_formation_tree(args.input, _json_arg(args.coefficients))
    )
    potential = load_potential(
        args.model, device=args.device, threads=args.threads, custom=_json_arg(args.custom_potentials)
    )
    df = run_relative(args.task, systems, potential.calculator, args.model)
    write_parquet(df, args.out, metadata=provenance_metadata(potential))
    return 0


def _cmd_relative_table(args) -> int:
    from crucible.catalysis.report import write_relative_table

    write_relative_table(args.inputs, args.task, args.out_prefix)
    return 0


def _cmd_demo(args) -> int:
    from crucible.catalysis import demo

    return demo.main([args.out_dir])


def configure_parser(parser: argparse.ArgumentParser) -> None:
    from crucible.catalysis.adsorption import FILTERINGS
    from crucible.catalysis.clean import DEFAULT_ENERGY_SOURCE, FORMATS

    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def model_args(p):
        p.add_argument(
            "--model", required=True, help="registered potential (emt, chgnet-0.3.0, sevennet-0, ...) or a custom one"
        )
        p.add_argument("--device", help="cpu or cuda (default: cuda when available; built-in ASE potentials: cpu)")
        p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's own choice)")
        p.add_argument(
            "--custom-potentials", help="JSON of config's potentials: section (a user's potential named by --model)"
        )

    p = sub.add_parser("fetch", help="download a CatBench JSON (refused unless its SHA-256 is pinned)")
    p.add_argument(
        "--dataset", required=True, help="the dataset's name in the config (catalysis.datasets), e.g. MamunHighT2019"
    )
    p.add_argument("--url", required=True, help="where to download the file from")
    p.add_argument(
        "--sha256",
        help="64 hex digits the download must match; without it the file is downloaded, its SHA-256 "
        "printed and nothing written (pin it in the config to use it)",
    )
    p.add_argument("--out", required=True, help="the file to write: resources/catalysis/{dataset}/{filename}")
    p.set_defaults(func=_cmd_fetch)

    p = sub.add_parser("clean", help="any supported source -> reactions.parquet + ASE db + card")
    p.add_argument(
        "--format",
        required=True,
        choices=FORMATS,
        help="catbench-json: CatBench's {name}_adsorption.json(.gz); cathub-raw: Catalysis-Hub's raw "
        "reactions JSON; vasp-tree: a folder of VASP CONTCAR + OSZICAR runs (needs --coefficients)",
    )
    p.add_argument("--input", required=True, help="the file or folder (only read)")
    p.add_argument(
        "--coefficients",
        help="JSON: adsorbate -> {slab, adslab, ...gas} stoichiometry, e.g. "
        '\'{"H": {"slab": -1, "adslab": 1, "H2gas": -0.5}}\' (vasp-tree only; required there)',
    )
    p.add_argument(
        "--filtering",
        choices=FILTERINGS,
        default="catbench",
        help="catbench (default): drop what CatBench 1.1.6 drops and list it in the card; strict: refuse the dataset instead",
    )
    p.add_argument(
        "--tolerance", type=float, help="eV, Σ stoi·E vs stated reaction energy (default 1e-3 catbench, 1e-4 strict)"
    )
    p.add_argument(
        "--out-catbench", help="also write the cleaned reactions as a CatBench dataset file ({name}_adsorption.json)"
    )
    p.add_argument(
        "--energy-source",
        default=DEFAULT_ENERGY_SOURCE,
        help="what the reference energies are, recorded in the card (default: %(default)r)",
    )
    p.add_argument("--url", help="where the input was downloaded from (recorded in the card)")
    p.add_argument("--sha256", help="the dataset's pin: refuse the input if it differs")
    p.add_argument(
        "--out",
        required=True,
        help="the reaction table to write (parquet, one row per reaction, structures by ASE-db row id): "
        "results/catalysis/{dataset}/reactions.parquet",
    )
    p.add_argument(
        "--out-db",
        required=True,
        help="the ASE SQLite database of every structure: results/catalysis/{dataset}/structures.db",
    )
    p.add_argument(
        "--out-card",
        required=True,
        help="the dataset card to write (JSON: source and hashes, counts, dropped reactions and why, energy check)",
    )
    p.set_defaults(func=_cmd_clean)

    p = sub.add_parser("relax", help="K-seed relaxations of one chunk with one potential (resumable)")
    p.add_argument("--reactions", required=True, help="the reaction table clean wrote (reactions.parquet)")
    p.add_argument("--db", required=True, help="the ASE database clean wrote beside it (structures.db)")
    model_args(p)
    p.add_argument("--chunk", type=int, default=0, help="which chunk to relax, 0 .. N-1 of --n-chunks (default 0)")
    p.add_argument(
        "--n-chunks",
        type=int,
        default=1,
        help="slices of the sorted reaction ids, a relaxation group never split (default 1: all in one)",
    )
    p.add_argument(
        "--params",
        help="JSON of relaxation settings, each optional: seeds (3), fmax (0.05 eV/Å), max_steps (999), "
        "gas_max_steps (500), mode (basic; oc20: the adslab only), chemical_bond_cutoff (6.0 Å: atom pairs "
        "whose bond change is measured), structure_cache (true: relax each distinct slab/adslab once per seed)",
    )
    p.add_argument(
        "--out",
        required=True,
        help="the chunk's JSON to write: results/catalysis/{dataset}/calc/{model}/chunk_{chunk}.json "
        "(finished reactions are kept in {out}.parts/ until then, so a killed run resumes)",
    )
    p.set_defaults(func=_cmd_relax)

    p = sub.add_parser("score", help="anomaly classes, rates, MAEs, ADwT/AMDwT, gas shift for one potential")
    p.add_argument(
        "--inputs", nargs="+", required=True, help="every chunk JSON relax wrote for this potential and dataset"
    )
    p.add_argument("--model", required=True, help="the potential's name, as given to relax (labels the outputs)")
    p.add_argument(
        "--thresholds",
        help="JSON of analysis thresholds, each optional: disp_thrs (0.5 Å), energy_thrs (2.0 eV), "
        "reproduction_thrs (0.2 eV, range over seeds), bond_length_change_threshold (0.2, a fraction), "
        "energy_cutoff (eV: reactions whose DFT E_ads is above it are left out; default none), n_crit_relax "
        "(999 steps: a relaxation that used them all did not converge), gas_shift_min_n (5 reactions of an "
        "adsorbate for its gas shift), time_unit (ms; s, ms or us)",
    )
    p.add_argument("--card", help="the dataset's card.json: input count and hash for the Coverage row")
    p.add_argument(
        "--out",
        required=True,
        help="the analysis to write (JSON: rates, MAEs, ADwT/AMDwT, threshold sweeps): "
        "results/catalysis/{dataset}/analysis/{model}.json",
    )
    p.add_argument(
        "--out-reactions",
        required=True,
        help="the per-reaction table to write (parquet: DFT and potential energies, anomaly class): "
        "results/catalysis/{dataset}/analysis/{model}.parquet",
    )
    p.add_argument(
        "--out-anomaly", help="CatBench's {mlip}_anomaly_detection.json: thresholds + reaction ids per class"
    )
    p.set_defaults(func=_cmd_score)

    p = sub.add_parser("tables", help="MLIP_Data / anomaly / per-adsorbate tables and the Excel workbook")
    p.add_argument(
        "--inputs",
        nargs="+",
        required=True,
        help="the analysis JSONs score wrote, one per potential, in table order: .../analysis/{model}.json",
    )
    p.add_argument(
        "--out-prefix",
        required=True,
        help="path without suffix: writes {prefix}.{csv,md,tex}, {prefix}_anomaly.*, {prefix}_adsorbates.*, "
        "{prefix}_shifted.*",
    )
    p.add_argument("--out-xlsx", help="also write CatBench's Excel workbook (.xlsx) here")
    p.set_defaults(func=_cmd_tables)

    p = sub.add_parser("figures", help="parity and threshold-sensitivity plots")
    p.add_argument(
        "--inputs",
        nargs="+",
        required=True,
        help="the analysis JSONs score wrote, one per potential, in plot order: .../analysis/{model}.json",
    )
    p.add_argument(
        "--reactions",
        nargs="+",
        required=True,
        help="the per-reaction parquets score wrote, one per potential: .../analysis/{model}.parquet",
    )
    p.add_argument("--dataset", required=True, help="the dataset's name, printed in the figure titles")
    p.add_argument(
        "--out-parity",
        nargs="+",
        required=True,
        help="the parity plot of every potential, one file per format by suffix (e.g. a.png a.pdf)",
    )
    p.add_argument(
        "--out-parity-shifted",
        nargs="*",
        help="parity on gas-shift-corrected energies, one file per format (default: not drawn)",
    )
    p.add_argument(
        "--out-sensitivity",
        nargs="+",
        required=True,
        help="anomaly shares against the displacement and bond-length thresholds, one file per format",
    )
    p.add_argument(
        "--out-model-parity",
        nargs="*",
        help="one parity plot per potential, in the order of --inputs (default: none)",
    )
    p.set_defaults(func=_cmd_figures)

    p = sub.add_parser("relative", help="surface or bulk-formation energies with one potential")
    p.add_argument(
        "--task",
        required=True,
        choices=["surface", "bulk_formation"],
        help="surface: γ in J/m² from {material}/bulk + {material}/slab; bulk_formation: eV/atom from "
        "bulk_compounds/{compound} + elements/{element}",
    )
    p.add_argument(
        "--input", required=True, help="the folder of VASP runs (CONTCAR + OSZICAR) in the task's layout (only read)"
    )
    p.add_argument(
        "--coefficients",
        help='JSON: compound -> {bulk: 1, element: -x}, e.g. \'{"Cu3Pt": {"bulk": 1, "Cu": -3, "Pt": -1}}\' '
        "(bulk_formation only; its compounds are the ones computed)",
    )
    model_args(p)
    p.add_argument(
        "--out",
        required=True,
        help="the energies to write (parquet, one row per system, potential's provenance in its metadata): "
        "results/catalysis/relative/{dataset}/{model}.parquet",
    )
    p.set_defaults(func=_cmd_relative)

    p = sub.add_parser("relative-table", help="MAE / RMSE / max error per potential")
    p.add_argument(
        "--task",
        required=True,
        choices=["surface", "bulk_formation"],
        help="which energies the inputs hold: sets the unit (J/m² surface, eV/atom bulk_formation)",
    )
    p.add_argument(
        "--inputs",
        nargs="+",
        required=True,
        help="the parquets relative wrote, one per potential, in table order",
    )
    p.add_argument("--out-prefix", required=True, help="path without suffix: writes {prefix}.csv, .md and .tex")
    p.set_defaults(func=_cmd_relative_table)

    p = sub.add_parser("demo", help="write the EMT-labelled demo dataset in all three formats")
    p.add_argument(
        "--out-dir",
        required=True,
        help="folder to write into (created): the demo set as CatBench JSON, Catalysis-Hub raw and a VASP tree, "
        "plus surface and formation trees",
    )
    p.set_defaults(func=_cmd_demo)
