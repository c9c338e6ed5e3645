"""``crucible mlip ...``: EOS benchmark and s2ef scoring for interatomic potentials.

crucible mlip models
crucible mlip eos --model chgnet-0.3.0 --elements all --points 7 --volume-range 0.94 1.06 --out results/mlip/eos/chgnet-0.3.0.parquet
crucible mlip eos-table --inputs results/mlip/eos/*.parquet --out-csv t.csv --out-md t.md --out-tex t.tex
crucible mlip eos-figures --inputs results/mlip/eos/*.parquet --out-png d.png --out-pdf d.pdf --out-parity-png p.png --out-parity-pdf p.pdf
crucible mlip s2ef-predict --dataset ase-vasp-testdata --model emt --out results/mlip/s2ef/ase-vasp-testdata/emt.parquet
crucible mlip s2ef-table --inputs results/mlip/s2ef/*/*.parquet --out-csv t.csv --out-md t.md --out-tex t.tex
"""

from __future__ import annotations

import argparse
import logging
import time

log = logging.getLogger(__name__)


def _custom(args) -> dict:
    import json

    return json.loads(args.custom_potentials) if args.custom_potentials else {}


def _cmd_models(args) -> int:
    from crucible.potentials.registry import REGISTRY, available_models

    here = set(available_models())
    for name, spec in sorted(REGISTRY.items()):
        print(
            f"{name:16s} {spec.kind:8s} {'available' if name in here else 'weights not present':20s} {spec.description}"
        )
    return 0


def _cmd_eos(args) -> int:
    from crucible.io import write_parquet
    from crucible.mlip.eos import EOS_FORMAT, EOS_FORMAT_KEY, EOS_SCHEMA, parse_elements, run_eos
    from crucible.potentials.provenance import provenance_metadata
    from crucible.potentials.registry import load_potential

    elements = parse_elements(args.elements)  # fail on a typo before loading a model
    t0 = time.perf_counter()
    potential = load_potential(args.model, device=args.device, threads=args.threads, custom=_custom(args))
    t_load = time.perf_counter() - t0
    df = run_eos(potential, elements, points=args.points, volume_range=tuple(args.volume_range), model=args.model)
    t_total = time.perf_counter() - t0
    metadata = {**provenance_metadata(potential), EOS_FORMAT_KEY: EOS_FORMAT}
    write_parquet(df, args.out, schema=EOS_SCHEMA, metadata=metadata)
    ok = df[df["status"] == "ok"]
    log.info(
        "%s: %d elements, %d not modelled, %d failed, mean Δ %.2f meV/atom, median %.2f; "
        "load %.1f s, total %.1f s on %s -> %s",
        args.model,
        len(df),
        int((df["status"] == "unsupported").sum()),
        int((~df["status"].isin(["ok", "unsupported"])).sum()),
        ok["delta_mev"].mean(),
        ok["delta_mev"].median(),
        t_load,
        t_total,
        potential.device,
        args.out,
    )
    return 0


def _cmd_eos_table(args) -> int:
    from crucible.mlip.eos import eos_summary_table
    from crucible.mlip.report import load_eos_frames, write_eos_table

    frames = load_eos_frames(args.inputs)
    write_eos_table(eos_summary_table(frames), csv=args.out_csv, md=args.out_md, tex=args.out_tex)
    return 0


def _cmd_eos_figures(args) -> int:
    from crucible.mlip.report import b0_parity, delta_periodic_table, load_eos_frames

    frames = load_eos_frames(args.inputs)
    if args.out_png or args.out_pdf:
        delta_periodic_table(frames, png=args.out_png, pdf=args.out_pdf)
    if args.out_parity_png or args.out_parity_pdf:
        b0_parity(frames, png=args.out_parity_png, pdf=args.out_parity_pdf)
    return 0


def _cmd_s2ef_predict(args) -> int:
    from crucible.io import write_parquet
    from crucible.mlip.frames import predict_frames, prediction_schema, read_frames
    from crucible.potentials.provenance import provenance_metadata
    from crucible.potentials.registry import load_potential

    frames = read_frames(args.dataset)
    potential = load_potential(args.model, device=args.device, threads=args.threads, custom=_custom(args))
    df = predict_frames(frames, potential)
    write_parquet(df, args.out, schema=prediction_schema(), metadata=provenance_metadata(potential))
    log.info(
        "%s on %s: %d frames, %d failed -> %s",
        args.model,
        args.dataset,
        len(df),
        int((df["status"] != "ok").sum()),
        args.out,
    )
    return 0


def _cmd_s2ef_table(args) -> int:
    from crucible.mlip.report import S2EF_TABLE_HEADERS, s2ef_caption, s2ef_title, write_table
    from crucible.mlip.s2ef_scoring import s2ef_table_from_files

    table = s2ef_table_from_files(args.inputs)
    write_table(
        table,
        csv=args.out_csv,
        md=args.out_md,
        tex=args.out_tex,
        digits=4,
        headers=S2EF_TABLE_HEADERS,
        title=s2ef_title(table),
        caption=s2ef_caption(table),
    )
    return 0


def configure_parser(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("models", help="list registered potentials and whether their weights are here")
    p.set_defaults(func=_cmd_models)

    def model_args(p):
        p.add_argument(
            "--model", required=True, help="registered potential (emt, chgnet-0.3.0, sevennet-0, ...) or a custom one"
        )
        p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
        p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
        p.add_argument(
            "--custom-potentials", help="JSON of config's potentials: section (a user's potential named by --model)"
        )

    p = sub.add_parser("eos", help="EOS of the Delta-set elements with one potential")
    model_args(p)
    p.add_argument("--elements", default="all", help="'all' or comma-separated symbols, e.g. Cu,Ag")
    p.add_argument("--points", type=int, default=7, help="volumes sampled per element (default 7)")
    p.add_argument(
        "--volume-range",
        type=float,
        nargs=2,
        default=[0.94, 1.06],
        metavar=("LOW", "HIGH"),
        help="the sampled volumes as fractions of V0, low and high (default 0.94 1.06)",
    )
    p.add_argument("--out", required=True, help="the EOS fits to write: results/mlip/eos/{model}.parquet")
    p.set_defaults(func=_cmd_eos)

    def table_args(p):
        p.add_argument(
            "--inputs",
            nargs="+",
            required=True,
            help="per-model files: results/mlip/eos/{model}.parquet or results/mlip/s2ef/{dataset}/{model}.parquet",
        )
        p.add_argument("--out-csv", help="the table, CSV")
        p.add_argument("--out-md", help="the table, Markdown")
        p.add_argument("--out-tex", help="the table, LaTeX")

    p = sub.add_parser("eos-table", help="per-model EOS summary table")
    table_args(p)
    p.set_defaults(func=_cmd_eos_table)

    p = sub.add_parser("eos-figures", help="Δ periodic table and B0 parity figures")
    p.add_argument(
        "--inputs", nargs="+", required=True, help="EOS fits results/mlip/eos/{model}.parquet, one per potential"
    )
    p.add_argument("--out-png", help="the Δ periodic-table figure, PNG")
    p.add_argument("--out-pdf", help="the Δ periodic-table figure, PDF")
    p.add_argument("--out-parity-png", help="the B0 parity figure (against experiment), PNG")
    p.add_argument("--out-parity-pdf", help="the B0 parity figure, PDF")
    p.set_defaults(func=_cmd_eos_figures)

    p = sub.add_parser("s2ef-predict", help="a potential's energies and forces on a dataset's frames")
    model_args(p)
    p.add_argument(
        "--dataset", required=True, help="extended XYZ / ASE db / any ASE-readable file, or 'ase-vasp-testdata'"
    )
    p.add_argument("--out", required=True, help="the predictions to write: results/mlip/s2ef/{dataset}/{model}.parquet")
    p.set_defaults(func=_cmd_s2ef_predict)

    p = sub.add_parser("s2ef-table", help="s2ef metric table from prediction files .../{dataset}/{model}.parquet")
    table_args(p)
    p.set_defaults(func=_cmd_s2ef_table)
