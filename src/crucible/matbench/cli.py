"""``crucible matbench ...``: the Matbench stages, each runnable without Snakemake.

    crucible matbench clean --task T --source composition-mirror --raw R.csv --metadata M.json \\
        --out-data results/matbench/data/T.parquet --out-card results/matbench/data/T.json
    crucible matbench folds --task T --data D --card C --validation V --out results/matbench/folds/T.parquet
    crucible matbench predict --model M --task T --fold K --data D --card C --folds F --out P.parquet
        (cheap models: --fold 0 1 2 3 4 --out P0 .. P4 fits the five folds in one process)
    crucible matbench score --task T --card C --data D --folds F --predictions P0 .. P4 --model M --out S.json
    crucible matbench results-file --model M --tasks T1 T2 --data D1 D2 --folds F1 F2 \\
        --predictions (five per task, in task then fold order) --out-results R.json.gz --out-info I.json
    crucible matbench leaderboard --scores S1 S2 .. --published P.yaml --out-csv .. --out-png ..
    crucible matbench user-fetch|user-clean|user-folds|user-predict|user-score|user-table ...
        (user datasets, see crucible.matbench.cli_user)

Every input file is named on the command line (no root directories re-expanded here), every
output flag is ``--out`` or ``--out-<what>``. The handlers only parse and call the library.
Heavy libraries are imported inside the handlers: parsing must stay fast (one process per job).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from crucible.errors import ConfigError, DataValidationError
from crucible.io import read_json, read_parquet
from crucible.matbench.cli_predict import add_predict_arguments
from crucible.matbench.cli_user import add_user_commands
from crucible.matbench.tasks import N_FOLDS, TASK_TYPES


def _cmd_clean(args: argparse.Namespace) -> int:
    from crucible.matbench import clean, tasks
    from crucible.sources import verify_pinned

    if args.raw_sha256 and args.source == "matminer":  # clean_task checks the mirror's table by its role
        verify_pinned(args.raw, args.raw_sha256, "raw task file", "matminer's catalogue (or matbench.matminer.sha256)")
    metadata = tasks.load_metadata(args.metadata)
    df, card = clean.clean_task(args.task, args.source, args.raw, metadata)
    card["provenance"] = clean.provenance(args.metadata, args.artifact)
    clean.write_clean(df, card, args.out_data, args.out_card)
    return 0


def _cmd_folds(args: argparse.Namespace) -> int:
    from crucible.matbench import folds
    from crucible.sources import check_card_pin

    data = read_parquet(args.data)
    card = read_json(args.card)
    if args.raw_sha256:
        check_card_pin(card, args.card, args.raw_sha256)
    validation = folds.load_validation(args.validation)
    table = folds.build_folds(
        data,
        args.task,
        card["task_type"],
        validation,
        args.inner_fraction,
        args.inner_seed,
        validation_source=args.validation,
    )
    folds.write_folds(table, args.out)
    return 0


def _cmd_tasks_table(args: argparse.Namespace) -> int:
    from crucible.matbench.tasktable import OVERLAP_TABLE_HEADERS, TASK_TABLE_HEADERS, build_tables
    from crucible.report.tables import write_table

    cards = {Path(p).stem: read_json(p) for p in args.cards}
    datas = {Path(p).stem: read_parquet(p, columns=["mbid", "formula", "structure", "target"]) for p in args.data}
    if set(cards) != set(datas):
        raise ConfigError("tasks-table: --cards and --data name different tasks")
    tasks_df, overlap_df = build_tables(cards, datas)
    write_table(
        tasks_df,
        csv=args.out_csv,
        md=args.out_md,
        digits=4,
        headers=TASK_TABLE_HEADERS,
        md_preamble="# Matbench v0.1 tasks (measured from the cleaned data)\n\n",
    )
    write_table(
        overlap_df,
        csv=args.out_overlap_csv,
        md=args.out_overlap_md,
        digits=1,
        headers=OVERLAP_TABLE_HEADERS,
        md_preamble="# Tasks that share inputs (distinct reduced formulas in common)\n\n",
        empty_note="No two of the configured tasks share a reduced formula.",
    )
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    from crucible.matbench.cli_predict import run_predict_command

    return run_predict_command(args, args.task)


def _cmd_import_predictions(args: argparse.Namespace) -> int:
    from crucible.matbench.prediction_files import read_predictions, write_predictions

    card = read_json(args.card)
    folds = read_parquet(args.folds, columns=["mbid", "fold"])
    expected = folds.loc[folds["fold"] == args.fold, "mbid"].tolist()
    table = read_predictions(args.predictions, card["task_type"], expected, args.fold)
    write_predictions(table, args.out, card["task_type"])
    return 0


def _cmd_score(args: argparse.Namespace) -> int:
    from crucible.matbench.scoring import write_scores
    from crucible.matbench.taskdata import card_values, score_prediction_files

    task_type, mad = args.task_type, args.mad
    if args.card:
        card_type, card_mad = card_values(read_json(args.card), args.task, args.card)
        task_type = task_type or card_type
        mad = card_mad if mad is None else mad
    elif task_type is None or mad is None:
        raise DataValidationError("score needs --card, or both --task-type and --mad")
    record = score_prediction_files(
        args.task,
        args.data,
        args.folds,
        args.predictions,
        task_type=task_type,
        mad=mad,
        model=args.model,
        inputs_given=args.input_kind,
    )
    write_scores(record, args.out)
    return 0


def _per_task(flag: str, paths: list[str], tasks: list[str], per_task: int = 1) -> dict[str, list[str]]:
    """Split an explicit file list into the tasks' shares, checking counts (and names when a
    file is called after its task)."""
    if len(paths) != per_task * len(tasks):
        raise DataValidationError(
            f"{flag} needs {per_task} file(s) per task ({per_task * len(tasks)}), got {len(paths)}"
        )
    out = {t: paths[i * per_task : (i + 1) * per_task] for i, t in enumerate(tasks)}
    for task, share in out.items():
        for p in share:
            named = Path(p).stem if per_task == 1 else Path(p).parent.name
            if named.startswith("matbench_") and named != task:
                raise DataValidationError(f"{flag}: {p} is given for task {task} but named after {named}")
    return out


def _cmd_results_file(args: argparse.Namespace) -> int:
    from crucible.matbench.resultsfile import (
        DEFAULT_BIBTEX,
        requirements,
        user_metadata,
        write_info_json,
        write_results_file,
    )
    from crucible.matbench.taskdata import results_file_tasks

    tasks = list(args.tasks)
    predictions = _per_task("--predictions", args.predictions, tasks, N_FOLDS)
    data = {t: ps[0] for t, ps in _per_task("--data", args.data, tasks).items()}
    folds = {t: ps[0] for t, ps in _per_task("--folds", args.folds, tasks).items()}
    fold_dicts, input_text = results_file_tasks(predictions, data, folds, args.store_probabilities)
    input_text = args.input or input_text
    write_results_file(
        args.out_results, args.model, fold_dicts, user_metadata(args.model, input_text, args.store_probabilities)
    )
    if args.out_info:
        from crucible import __version__

        write_info_json(
            args.out_info,
            algorithm=args.algorithm or args.model,
            algorithm_long=args.algorithm_long or f"{args.model}, run by crucible {__version__}; inputs: {input_text}.",
            authors=args.authors,
            bibtex_refs=args.bibtex_refs or DEFAULT_BIBTEX,
            notes=args.notes,
            requirements=requirements(),
        )
    return 0


def _cmd_leaderboard(args: argparse.Namespace) -> int:
    from crucible.matbench import leaderboard as lb
    from crucible.report.figures import save_figure, scaled_error_figure
    from crucible.report.tables import write_table

    records = [read_json(p) for p in args.scores]
    published = lb.load_published(args.published)
    table = lb.leaderboard(records, published)
    write_table(table, csv=args.out_csv)
    display = lb.leaderboard_display(table, published)
    write_table(
        display,
        md=args.out_md,
        tex=args.out_tex,
        md_preamble=lb.leaderboard_preamble(published),
        caption="Matbench v0.1: mean ± std over the official folds; published numbers for reference.",
    )
    write_table(lb.folds_table(records), csv=args.out_folds_csv)
    save_figure(scaled_error_figure(table, lb.PUBLISHED_COLUMNS), args.out_png, args.out_pdf)
    return 0


def _cmd_figures(args: argparse.Namespace) -> int:
    from crucible.matbench.figures import model_figure
    from crucible.report.figures import save_figure

    fig = model_figure(args.model, read_json(args.card), args.data, args.predictions)
    save_figure(fig, args.out_png, args.out_pdf)
    return 0


def _checked_task(name: str) -> str:
    from crucible.matbench.tasks import check_task

    try:
        return check_task(name)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _task_help() -> str:
    from crucible.matbench.tasks import TASKS

    return f"one of: {', '.join(TASKS)}"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("clean", help="raw source file -> typed, id'd, checked task table + task card")
    p.add_argument("--task", required=True, type=_checked_task)
    p.add_argument("--source", required=True, choices=["composition-mirror", "matminer"])
    p.add_argument("--raw", required=True, help="crabnet CSV (mirror) or matminer .json.gz")
    p.add_argument("--metadata", required=True, help="the official dataset metadata (checked against its pin)")
    p.add_argument("--raw-sha256", help="pinned SHA-256 of --raw: refuse the file if it differs")
    p.add_argument("--artifact", nargs="*", default=[], help="provenance as name=sha256 pairs")
    p.add_argument("--out-data", required=True)
    p.add_argument("--out-card", required=True)
    p.set_defaults(func=_cmd_clean)

    p = sub.add_parser("folds", help="official folds, checked against a regeneration, plus inner validation")
    p.add_argument("--task", required=True, type=_checked_task)
    p.add_argument("--data", required=True)
    p.add_argument("--card", required=True)
    p.add_argument("--validation", required=True, help="the official validation splits (checked against their pin)")
    p.add_argument("--raw-sha256", help="pinned SHA-256 of the raw file: the card must record exactly this")
    p.add_argument("--inner-fraction", type=float, default=0.25)
    p.add_argument("--inner-seed", type=int, default=7)
    p.add_argument("--out", required=True)
    p.set_defaults(func=_cmd_folds)

    p = sub.add_parser("tasks-table", help="the task table and the task-overlap table")
    p.add_argument("--cards", nargs="+", required=True)
    p.add_argument("--data", nargs="+", required=True)
    p.add_argument("--out-csv", required=True)
    p.add_argument("--out-md", required=True)
    p.add_argument("--out-overlap-csv", required=True)
    p.add_argument("--out-overlap-md", required=True)
    p.set_defaults(func=_cmd_tasks_table)

    p = sub.add_parser("predict", help="fit a model on one fold's training rows and predict its test rows")
    p.add_argument("--task", required=True, type=_checked_task, help=_task_help())
    add_predict_arguments(p)
    p.set_defaults(func=_cmd_predict)

    p = sub.add_parser("import-predictions", help="validate a user-supplied predictions file and take it in")
    p.add_argument("--task", required=True, type=_checked_task)
    p.add_argument("--fold", type=int, required=True, choices=range(N_FOLDS))
    p.add_argument("--card", required=True)
    p.add_argument("--folds", required=True)
    p.add_argument("--predictions", required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(func=_cmd_import_predictions)

    p = sub.add_parser("score", help="score one model on one task (5 folds) into a scores JSON")
    p.add_argument("--task", required=True, type=_checked_task)
    p.add_argument("--card", help="task card (results/matbench/data/{task}.json): gives task type and MAD")
    p.add_argument("--task-type", choices=TASK_TYPES, help="instead of --card")
    p.add_argument(
        "--mad", type=float, help="instead of --card: official MAD (regression) or fraction of True (classification)"
    )
    p.add_argument(
        "--predictions",
        required=True,
        nargs="+",
        metavar="FOLD_K_PARQUET",
        help="fold_0.parquet .. fold_4.parquet, in fold order",
    )
    p.add_argument("--folds", required=True, help="results/matbench/folds/{task}.parquet")
    p.add_argument("--data", required=True, help="results/matbench/data/{task}.parquet")
    p.add_argument("--model", required=True)
    p.add_argument(
        "--input-kind",
        default=None,
        help="what the model was given; default: 'structure' if the data has structures, else composition-only",
    )
    p.add_argument("--out", required=True, help="results/matbench/scores/{model}/{task}.json")
    p.set_defaults(func=_cmd_score)

    p = sub.add_parser("results-file", help="write matbench's results.json.gz (and info.json) for a model")
    p.add_argument("--model", required=True)
    p.add_argument("--tasks", required=True, nargs="+", type=_checked_task)
    p.add_argument("--data", required=True, nargs="+", help="one clean data file per task, in --tasks order")
    p.add_argument("--folds", required=True, nargs="+", help="one folds file per task, in --tasks order")
    p.add_argument(
        "--predictions",
        required=True,
        nargs="+",
        help="fold_0 .. fold_4 prediction files of each task, in --tasks order",
    )
    p.add_argument("--input", default=None, help="user_metadata 'input' text; default from the data")
    p.add_argument(
        "--store-probabilities",
        action="store_true",
        help="store P(True) instead of bool labels for classifiers (matbench scores either as labels)",
    )
    p.add_argument("--algorithm", default=None, help="info.json algorithm (default: the model name)")
    p.add_argument("--algorithm-long", default=None)
    p.add_argument("--authors", default="crucible")
    p.add_argument("--bibtex-refs", default=None)
    p.add_argument("--notes", default=None)
    p.add_argument("--out-results", required=True, help="results/matbench/{model}/results.json.gz")
    p.add_argument("--out-info", default=None, help="also write the leaderboard's info.json here")
    p.set_defaults(func=_cmd_results_file)

    p = sub.add_parser("leaderboard", help="leaderboard and per-fold tables, scaled-error figure")
    p.add_argument("--scores", nargs="+", required=True)
    p.add_argument("--published", required=True, help="config/published_matbench.yaml")
    p.add_argument("--out-csv", required=True)
    p.add_argument("--out-md", required=True)
    p.add_argument("--out-tex", required=True)
    p.add_argument("--out-folds-csv", required=True)
    p.add_argument("--out-png", required=True)
    p.add_argument("--out-pdf", required=True)
    p.set_defaults(func=_cmd_leaderboard)

    p = sub.add_parser(
        "figures", help="parity plot (regression) or ROC curve (classification) of one model on one task"
    )
    p.add_argument("--model", required=True)
    p.add_argument("--card", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--predictions", nargs="+", required=True)
    p.add_argument("--out-png", required=True)
    p.add_argument("--out-pdf", required=True)
    p.set_defaults(func=_cmd_figures)

    add_user_commands(sub)
