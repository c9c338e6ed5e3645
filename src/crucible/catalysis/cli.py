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
    from crucible.catalysis.data import clean, file_md5, read_dataset, tree_sha256

    reactions = read_dataset(args.format, args.input, _json_arg(args.coefficients), args.filtering, args.tolerance)
    source = {"format": args.format, "path": str(args.input), "sha256": tree_sha256(args.input)}
    if file_md5(args.input):
        source["md5"] = file_md5(args.input)  # the input stamp CatBench's Coverage sheet shows
    if args.url:
        source["url"] = args.url
    card = clean(
        reactions,
        args.out,
        args.out_db,
        args.out_card,
        source=source,
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
    from crucible.catalysis.calculation import chunk_ids, run_chunk
    from crucible.catalysis.data import load_reactions
    from crucible.io import read_parquet
    from crucible.mlip.calculators import load_potential
    from crucible.torch_setup import configure_torch

    configure_torch(args.threads)
    table = read_parquet(args.reactions)
    groups = list(table["relax_group"]) if "relax_group" in table else None
    ids = chunk_ids(list(table["reaction_id"]), args.chunk, args.n_chunks, groups)
    reactions = load_reactions(args.reactions, args.db, ids)
    potential = load_potential(args.model, device=args.device)
    run_chunk(reactions, potential.calculator, _json_arg(args.params), args.out, args.model, device=potential.device)
    return 0


def _cmd_score(args) -> int:
    from crucible.catalysis.analysis import CLASSES, Thresholds, shifted_mlip_row, summarize, threshold_sensitivity
    from crucible.io import read_json, write_json, write_parquet

    records, devices = [], set()
    for path in args.inputs:
        chunk = read_json(path)
        records += chunk["reactions"]
        devices.add(str(chunk.get("device", "unknown")))
    thr = Thresholds(**_json_arg(args.thresholds))
    card = read_json(args.card) if args.card else {}
    provenance = {"calculator": args.model, "device": ", ".join(sorted(devices)) or "unknown"}
    provenance["input_md5"] = (card.get("source") or {}).get("md5")
    s = summarize(records, thr, args.model, card.get("n_reactions"), provenance)
    shifted_row = shifted_mlip_row(s["shifted"], s["mlip"])
    shifted_anomaly = dict(s["anomaly"])
    sh = s["shifted"]
    shifted_anomaly.update(
        Num_normal=int((sh["class"] == "normal").sum()),
        Anomaly_energy_anomaly=int((sh["class"] == "energy_anomaly").sum()),
    )
    shifted_anomaly["Anomaly_total"] = (
        shifted_anomaly["Anomaly_reproduction_failure"]
        + shifted_anomaly["Anomaly_unphysical_relaxation"]
        + shifted_anomaly["Anomaly_energy_anomaly"]
    )
    df = s["reactions"]
    sweep = threshold_sensitivity(records, thr)
    detection = {c: sorted(df.loc[df["class"] == c, "reaction_id"]) for c in CLASSES}
    issues = {}
    for row in df[df["class"] == "unphysical_relaxation"].itertuples(index=False):
        issues[row.reaction_id] = [
            k for k in ("ads_conv", "ads_move", "slab_conv", "slab_move") if getattr(row, f"flag_{k}")
        ]
    write_json(
        {
            "model": args.model,
            "thresholds": thr.as_dict(),
            "coverage": s["coverage"],
            "mlip": s["mlip"],
            "anomaly": s["anomaly"],
            "per_adsorbate": s["per_adsorbate"],
            "gas_shift": s["gas_shift"],
            "mlip_shifted": shifted_row,
            "anomaly_shifted": shifted_anomaly,
            "sensitivity": sweep.to_dict(orient="records"),
            "anomaly_detection": {
                **detection,
                "unphysical_issues": issues,
                "calculation_error": sorted(df.loc[df["class"] == "calculation_error", "reaction_id"]),
            },
        },
        args.out,
    )
    if args.out_anomaly:
        write_json(
            {
                "thresholds": thr.as_dict(),
                **detection,
                "unphysical_issues": issues,
                "calculation_error": sorted(df.loc[df["class"] == "calculation_error", "reaction_id"]),
            },
            args.out_anomaly,
        )
    keep = ["reaction_id", "adsorbate", "dft_ads_eng", "mlip_ads_eng", "single_ads_eng", "class"]
    out = df[keep].copy()
    out["model"] = args.model
    out["mlip_ads_eng_shifted"] = sh["mlip_ads_eng"].to_numpy()
    out["class_shifted"] = sh["class"].to_numpy()
    write_parquet(out, args.out_reactions)
    log.info("%s: %s", args.model, {k: s["mlip"][k] for k in ("Num_total", "Normal_rate", "MAE_total", "MAE_normal")})
    return 0


def _cmd_tables(args) -> int:
    from crucible.catalysis.report import write_tables, write_workbook
    from crucible.io import read_json

    analyses = [read_json(p) for p in args.inputs]
    unit = analyses[0]["thresholds"].get("time_unit", "ms") if analyses else "ms"
    write_tables(analyses, args.out_prefix, unit)
    if args.out_xlsx:
        write_workbook(analyses, args.out_xlsx, unit)
    return 0


def _cmd_figures(args) -> int:
    import pandas as pd

    from crucible.catalysis.report import parity_figure, sensitivity_figure, single_parity_figure
    from crucible.io import read_json, read_parquet
    from crucible.report.figures import save_figure

    analyses = [read_json(p) for p in args.inputs]
    reactions = {}
    for p in args.reactions:
        df = read_parquet(p)
        reactions[str(df["model"].iloc[0]) if len(df) else p] = df
    order = [a["model"] for a in analyses]
    reactions = {m: reactions[m] for m in order if m in reactions}
    save_figure(parity_figure(reactions, args.dataset), *args.out_parity)
    if args.out_parity_shifted:
        save_figure(parity_figure(reactions, args.dataset, shifted=True), *args.out_parity_shifted)
    save_figure(
        sensitivity_figure({a["model"]: pd.DataFrame(a["sensitivity"]) for a in analyses}, args.dataset),
        *args.out_sensitivity,
    )
    for model, path in zip(order, args.out_model_parity or []):
        save_figure(single_parity_figure(reactions[model], args.dataset, model), path)
    return 0


def _cmd_relative(args) -> int:
    from crucible.catalysis.relative import read_formation_tree, read_surface_tree, run_relative
    from crucible.io import write_parquet
    from crucible.mlip.calculators import get_calculator

    systems = (
        read_surface_tree(args.input)
        if args.task == "surface"
        else read_formation_tree(args.input, _json_arg(args.coefficients))
    )
    df = run_relative(args.task, systems, get_calculator(args.model, device=args.device), args.model)
    write_parquet(df, args.out)
    return 0


def _cmd_relative_table(args) -> int:
    from crucible.catalysis.relative import UNITS, relative_table
    from crucible.io import read_parquet
    from crucible.report.tables import write_table

    table = relative_table([read_parquet(p) for p in args.inputs])
    unit = UNITS[args.task]
    write_table(
        table,
        csv=f"{args.out_prefix}.csv",
        md=f"{args.out_prefix}.md",
        tex=f"{args.out_prefix}.tex",
        digits=3,
        headers={
            "MAE": f"MAE ({unit})",
            "RMSE": f"RMSE ({unit})",
            "max_error": f"max |error| ({unit})",
            "n_systems": "systems",
            "n_failed": "failed",
        },
    )
    return 0


def _cmd_demo(args) -> int:
    from crucible.catalysis import demo

    return demo.main([args.out_dir])


def configure_parser(parser: argparse.ArgumentParser) -> None:
    from crucible.catalysis.data import DEFAULT_ENERGY_SOURCE, FILTERINGS, FORMATS

    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("fetch", help="download a CatBench JSON (refused unless its SHA-256 is pinned)")
    p.add_argument("--dataset", required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--sha256")
    p.add_argument("--out", required=True)
    p.set_defaults(func=_cmd_fetch)

    p = sub.add_parser("clean", help="any supported source -> reactions.parquet + ASE db + card")
    p.add_argument("--format", required=True, choices=FORMATS)
    p.add_argument("--input", required=True, help="the file or folder (only read)")
    p.add_argument("--coefficients", help="JSON: adsorbate -> {slab, adslab, ...gas} (vasp-tree)")
    p.add_argument(
        "--filtering",
        choices=FILTERINGS,
        default="catbench",
        help="catbench: drop what CatBench 1.1.6 drops and list it in the card; strict: refuse the dataset instead",
    )
    p.add_argument(
        "--tolerance", type=float, help="eV, Σ stoi·E vs stated reaction energy (default 1e-3 catbench, 1e-4 strict)"
    )
    p.add_argument("--out-catbench", help="also write the cleaned reactions as a CatBench dataset file")
    p.add_argument("--energy-source", default=DEFAULT_ENERGY_SOURCE)
    p.add_argument("--url", help="where the input was downloaded from (recorded in the card)")
    p.add_argument("--out", required=True)
    p.add_argument("--out-db", required=True)
    p.add_argument("--out-card", required=True)
    p.set_defaults(func=_cmd_clean)

    p = sub.add_parser("relax", help="K-seed relaxations of one chunk with one potential (resumable)")
    p.add_argument("--reactions", required=True)
    p.add_argument("--db", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--chunk", type=int, default=0)
    p.add_argument("--n-chunks", type=int, default=1)
    p.add_argument("--params", help="JSON: seeds, fmax, max_steps, gas_max_steps, mode, chemical_bond_cutoff")
    p.add_argument("--device")
    p.add_argument("--threads", type=int)
    p.add_argument("--out", required=True)
    p.set_defaults(func=_cmd_relax)

    p = sub.add_parser("score", help="anomaly classes, rates, MAEs, ADwT/AMDwT, gas shift for one potential")
    p.add_argument("--inputs", nargs="+", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--thresholds", help="JSON of analysis thresholds")
    p.add_argument("--card", help="the dataset's card.json: input count and hash for the Coverage row")
    p.add_argument("--out", required=True)
    p.add_argument("--out-reactions", required=True)
    p.add_argument(
        "--out-anomaly", help="CatBench's {mlip}_anomaly_detection.json: thresholds + reaction ids per class"
    )
    p.set_defaults(func=_cmd_score)

    p = sub.add_parser("tables", help="MLIP_Data / anomaly / per-adsorbate tables and the Excel workbook")
    p.add_argument("--inputs", nargs="+", required=True)
    p.add_argument("--out-prefix", required=True)
    p.add_argument("--out-xlsx")
    p.set_defaults(func=_cmd_tables)

    p = sub.add_parser("figures", help="parity and threshold-sensitivity plots")
    p.add_argument("--inputs", nargs="+", required=True)
    p.add_argument("--reactions", nargs="+", required=True)
    p.add_argument("--dataset", required=True)
    p.add_argument("--out-parity", nargs="+", required=True)
    p.add_argument("--out-parity-shifted", nargs="*", help="parity on gas-shift-corrected energies")
    p.add_argument("--out-sensitivity", nargs="+", required=True)
    p.add_argument("--out-model-parity", nargs="*")
    p.set_defaults(func=_cmd_figures)

    p = sub.add_parser("relative", help="surface or bulk-formation energies with one potential")
    p.add_argument("--task", required=True, choices=["surface", "bulk_formation"])
    p.add_argument("--input", required=True)
    p.add_argument("--coefficients", help="JSON: compound -> {bulk: 1, element: -x} (bulk_formation)")
    p.add_argument("--model", required=True)
    p.add_argument("--device")
    p.add_argument("--out", required=True)
    p.set_defaults(func=_cmd_relative)

    p = sub.add_parser("relative-table", help="MAE / RMSE / max error per potential")
    p.add_argument("--task", required=True, choices=["surface", "bulk_formation"])
    p.add_argument("--inputs", nargs="+", required=True)
    p.add_argument("--out-prefix", required=True)
    p.set_defaults(func=_cmd_relative_table)

    p = sub.add_parser("demo", help="write the EMT-labelled demo dataset in all three formats")
    p.add_argument("--out-dir", required=True)
    p.set_defaults(func=_cmd_demo)
