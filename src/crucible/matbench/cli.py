"""``crucible matbench ...``: the Matbench stages, each runnable without Snakemake."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from crucible.errors import ConfigError
from crucible.io import read_json, read_parquet
from crucible.matbench.cli_report import add_report_commands
from crucible.matbench.cli_scoring import add_scoring_commands


def _clean(args: argparse.Namespace) -> int:
    from crucible.matbench import clean, tasks

    from crucible.sources import verify_pinned

    if args.raw_sha256:
        verify_pinned(args.raw, args.raw_sha256, "raw task file")
    if args.metadata_sha256:
        verify_pinned(args.metadata, args.metadata_sha256, "metadata file")
    metadata = tasks.load_metadata(args.metadata)
    df, card = clean.clean_task(args.task, args.source, args.raw, metadata)
    bad = [kv for kv in args.artifact if "=" not in kv]
    if bad:
        raise ConfigError(f"--artifact takes name=sha256 pairs, got {bad}")
    card["provenance"] = {
        "metadata_file": {"path": Path(args.metadata).name, "sha256": _sha(args.metadata)},
        **({"artifact": dict(kv.split("=", 1) for kv in args.artifact)} if args.artifact else {}),
    }
    clean.write_clean(df, card, args.out_data, args.out_card)
    return 0


def _sha(path: str) -> str:
    from crucible.sources import sha256_file

    return sha256_file(path)


def _folds(args: argparse.Namespace) -> int:
    from crucible.matbench import folds

    from crucible.sources import check_card_pin, verify_pinned

    data = read_parquet(args.data)
    card = read_json(args.card)
    if args.raw_sha256:
        check_card_pin(card, args.card, args.raw_sha256)
    if args.validation_sha256:
        verify_pinned(args.validation, args.validation_sha256, "validation file")
    validation = folds.load_validation(args.validation)
    table = folds.build_folds(data, args.task, card["task_type"], validation, args.inner_fraction,
                              args.inner_seed, validation_source=args.validation)
    folds.write_folds(table, args.out)
    return 0


def _tasks_table(args: argparse.Namespace) -> int:
    from crucible.matbench.tasktable import OVERLAP_TABLE_HEADERS, TASK_TABLE_HEADERS, build_tables
    from crucible.report.tables import write_table

    cards = {Path(p).stem: read_json(p) for p in args.cards}
    datas = {Path(p).stem: read_parquet(p, columns=["mbid", "formula", "structure", "target"]) for p in args.data}
    if set(cards) != set(datas):
        raise ConfigError("tasks-table: --cards and --data name different tasks")
    tasks_df, overlap_df = build_tables(cards, datas)
    write_table(tasks_df, csv=args.out_csv, md=args.out_md, digits=4, headers=TASK_TABLE_HEADERS,
                md_preamble="# Matbench v0.1 tasks (measured from the cleaned data)\n\n")
    write_table(overlap_df, csv=args.out_overlap_csv, md=args.out_overlap_md, digits=1, headers=OVERLAP_TABLE_HEADERS,
                md_preamble="# Tasks that share inputs (distinct reduced formulas in common)\n\n",
                empty_note="No two of the configured tasks share a reduced formula.")
    return 0


def _predict(args: argparse.Namespace) -> int:
    if args.threads:
        # Before the estimator libraries start their thread pools.
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.threads)
    from crucible.matbench.predict import run_predict
    from crucible.models.registry import get_spec

    custom = json.loads(args.custom_models) if args.custom_models else {}
    spec = get_spec(args.model, custom)
    params = json.loads(args.params) if args.params else {}
    if args.element_table:
        if args.element_table_sha256:
            from crucible.sources import verify_pinned

            verify_pinned(args.element_table, args.element_table_sha256, "element table")
        params["element_table"] = args.element_table
    run_predict(spec, args.task, args.fold, args.data, args.folds, read_json(args.card), args.out,
                params=params, features_path=args.features, model_dir=args.model_dir, random_state=args.seed)
    return 0


def _import_predictions(args: argparse.Namespace) -> int:
    from crucible.matbench.predictions import read_predictions, write_predictions

    card = read_json(args.card)
    folds = read_parquet(args.folds, columns=["mbid", "fold"])
    expected = folds.loc[folds["fold"] == args.fold, "mbid"].tolist()
    table = read_predictions(args.predictions, card["task_type"], expected, args.fold)
    write_predictions(table, args.out, card["task_type"])
    return 0


def _checked_task(name: str) -> str:
    from crucible.matbench.tasks import check_task

    try:
        return check_task(name)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _model_help() -> str:
    from crucible.models.registry import builtin_models

    return (f"built-in: {', '.join(builtin_models())}; or a name in --custom-models "
            "(config matbench.custom_models)")


def _task_help() -> str:
    from crucible.matbench.tasks import TASKS

    return f"one of: {', '.join(TASKS)}"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("clean", help="raw source file -> typed, id'd, checked task table + task card")
    p.add_argument("--task", required=True, type=_checked_task)
    p.add_argument("--source", required=True, choices=["composition-mirror", "matminer"])
    p.add_argument("--raw", required=True, help="crabnet CSV (mirror) or matminer .json.gz")
    p.add_argument("--metadata", required=True, help="matbench_v0.1_dataset_metadata.json")
    p.add_argument("--raw-sha256", help="pinned SHA-256 of --raw: refuse the file if it differs")
    p.add_argument("--metadata-sha256", help="pinned SHA-256 of --metadata: refuse the file if it differs")
    p.add_argument("--artifact", nargs="*", default=[], help="provenance as name=sha256 pairs")
    p.add_argument("--out-data", required=True)
    p.add_argument("--out-card", required=True)
    p.set_defaults(func=_clean)

    p = sub.add_parser("folds", help="official folds, checked against a regeneration, plus inner validation")
    p.add_argument("--task", required=True, type=_checked_task)
    p.add_argument("--data", required=True)
    p.add_argument("--card", required=True)
    p.add_argument("--validation", required=True, help="matbench_v0.1_validation.json")
    p.add_argument("--validation-sha256", help="pinned SHA-256 of --validation: refuse the file if it differs")
    p.add_argument("--raw-sha256", help="pinned SHA-256 of the raw file: the card must record exactly this")
    p.add_argument("--inner-fraction", type=float, default=0.25)
    p.add_argument("--inner-seed", type=int, default=7)
    p.add_argument("--out", required=True)
    p.set_defaults(func=_folds)

    p = sub.add_parser("tasks-table", help="the task table and the task-overlap table")
    p.add_argument("--cards", nargs="+", required=True)
    p.add_argument("--data", nargs="+", required=True)
    p.add_argument("--out-csv", required=True)
    p.add_argument("--out-md", required=True)
    p.add_argument("--out-overlap-csv", required=True)
    p.add_argument("--out-overlap-md", required=True)
    p.set_defaults(func=_tasks_table)

    p = sub.add_parser("predict", help="fit a model on one fold's training rows and predict its test rows")
    p.add_argument("--model", required=True, help=_model_help())
    p.add_argument("--task", required=True, type=_checked_task, help=_task_help())
    p.add_argument("--fold", type=int, required=True, choices=range(5))
    p.add_argument("--data", required=True)
    p.add_argument("--card", required=True)
    p.add_argument("--folds", required=True)
    p.add_argument("--features", help="Magpie feature cache (models with input_kind magpie)")
    p.add_argument("--params", help="JSON hyperparameter overrides")
    p.add_argument("--custom-models", help="JSON of config's matbench.custom_models")
    p.add_argument("--element-table", help="element embedding CSV for composition networks")
    p.add_argument("--element-table-sha256", help="pinned SHA-256 of --element-table: refuse the file if it differs")
    p.add_argument("--model-dir", help="where a model with save() writes its trained state")
    p.add_argument("--seed", type=int, default=0,
                   help="random_state for models that take one and do not set it in --params (recorded)")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--out", required=True)
    p.set_defaults(func=_predict)

    p = sub.add_parser("import-predictions", help="validate a user-supplied predictions file and take it in")
    p.add_argument("--task", required=True, type=_checked_task)
    p.add_argument("--fold", type=int, required=True, choices=range(5))
    p.add_argument("--card", required=True)
    p.add_argument("--folds", required=True)
    p.add_argument("--predictions", required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(func=_import_predictions)

    add_scoring_commands(sub)
    add_report_commands(sub)
