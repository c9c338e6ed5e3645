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

from crucible.errors import ConfigError
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
    from crucible.matbench.tasktable import write_task_tables

    write_task_tables(args.cards, args.data, args.out_csv, args.out_md, args.out_overlap_csv, args.out_overlap_md)
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    from crucible.matbench.cli_predict import run_predict_command

    return run_predict_command(args, args.task)


def _cmd_import_predictions(args: argparse.Namespace) -> int:
    from crucible.matbench.prediction_files import import_predictions

    import_predictions(args.predictions, args.card, args.folds, args.fold, args.out)
    return 0


def _cmd_score(args: argparse.Namespace) -> int:
    from crucible.matbench.taskdata import score_task_files

    score_task_files(
        args.task,
        args.data,
        args.folds,
        args.predictions,
        args.out,
        card_path=args.card,
        task_type=args.task_type,
        mad=args.mad,
        model=args.model,
        inputs_given=args.input_kind,
    )
    return 0


def _cmd_results_file(args: argparse.Namespace) -> int:
    from crucible.matbench.taskdata import write_results_files

    write_results_files(
        args.model,
        args.tasks,
        args.predictions,
        args.data,
        args.folds,
        args.out_results,
        store_probabilities=args.store_probabilities,
        input_text=args.input,
        out_info=args.out_info,
        info={
            "algorithm": args.algorithm,
            "algorithm_long": args.algorithm_long,
            "authors": args.authors,
            "bibtex_refs": args.bibtex_refs,
            "notes": args.notes,
        },
    )
    return 0


def _cmd_leaderboard(args: argparse.Namespace) -> int:
    from crucible.matbench.leaderboard import write_leaderboard_files

    write_leaderboard_files(
        args.scores,
        args.published,
        args.out_csv,
        args.out_md,
        args.out_tex,
        args.out_folds_csv,
        args.out_png,
        args.out_pdf,
        args.cards,
    )
    return 0


def _cmd_figures(args: argparse.Namespace) -> int:
    from crucible.matbench.figures import write_model_figure

    write_model_figure(args.model, args.card, args.data, args.predictions, args.out_png, args.out_pdf)
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
    p.add_argument("--task", required=True, type=_checked_task, help="Matbench task, e.g. matbench_steels")
    p.add_argument(
        "--source",
        required=True,
        choices=["composition-mirror", "matminer"],
        help="where --raw comes from: the composition mirror (formulas) or matminer's upstream file (structures)",
    )
    p.add_argument("--raw", required=True, help="crabnet CSV (mirror) or matminer .json.gz")
    p.add_argument("--metadata", required=True, help="the official dataset metadata (checked against its pin)")
    p.add_argument("--raw-sha256", help="pinned SHA-256 of --raw: refuse the file if it differs")
    p.add_argument("--artifact", nargs="*", default=[], help="provenance as name=sha256 pairs")
    p.add_argument(
        "--out-data", required=True, help="the clean task table to write: results/matbench/data/{task}.parquet"
    )
    p.add_argument("--out-card", required=True, help="the task card to write: results/matbench/data/{task}.json")
    p.set_defaults(func=_cmd_clean)

    p = sub.add_parser("folds", help="official folds, checked against a regeneration, plus inner validation")
    p.add_argument("--task", required=True, type=_checked_task, help="Matbench task, e.g. matbench_steels")
    p.add_argument("--data", required=True, help="the clean task table: results/matbench/data/{task}.parquet")
    p.add_argument("--card", required=True, help="the task card: results/matbench/data/{task}.json")
    p.add_argument("--validation", required=True, help="the official validation splits (checked against their pin)")
    p.add_argument("--raw-sha256", help="pinned SHA-256 of the raw file: the card must record exactly this")
    p.add_argument(
        "--inner-fraction",
        type=float,
        default=0.25,
        help="fraction of each training fold held out as inner validation (default 0.25)",
    )
    p.add_argument("--inner-seed", type=int, default=7, help="seed of the inner validation split (default 7)")
    p.add_argument("--out", required=True, help="the folds table to write: results/matbench/folds/{task}.parquet")
    p.set_defaults(func=_cmd_folds)

    p = sub.add_parser("tasks-table", help="the task table and the task-overlap table")
    p.add_argument(
        "--cards", nargs="+", required=True, help="task cards results/matbench/data/{task}.json, one per task"
    )
    p.add_argument(
        "--data",
        nargs="+",
        required=True,
        help="clean task tables results/matbench/data/{task}.parquet, in --cards order",
    )
    p.add_argument("--out-csv", required=True, help="the task table, CSV")
    p.add_argument("--out-md", required=True, help="the task table, Markdown")
    p.add_argument(
        "--out-overlap-csv",
        required=True,
        help="the task-overlap table (duplicates, shared inputs, class balance), CSV",
    )
    p.add_argument("--out-overlap-md", required=True, help="the task-overlap table, Markdown")
    p.set_defaults(func=_cmd_tasks_table)

    p = sub.add_parser("predict", help="fit a model on one fold's training rows and predict its test rows")
    p.add_argument("--task", required=True, type=_checked_task, help=_task_help())
    add_predict_arguments(p)
    p.set_defaults(func=_cmd_predict)

    p = sub.add_parser("import-predictions", help="validate a user-supplied predictions file and take it in")
    p.add_argument("--task", required=True, type=_checked_task, help="Matbench task, e.g. matbench_steels")
    p.add_argument(
        "--fold", type=int, required=True, choices=range(N_FOLDS), help="the test fold the file predicts (0-4)"
    )
    p.add_argument("--card", required=True, help="the task card: results/matbench/data/{task}.json")
    p.add_argument("--folds", required=True, help="the folds table: results/matbench/folds/{task}.parquet")
    p.add_argument(
        "--predictions",
        required=True,
        help="the predictions made elsewhere: parquet with mbid, prediction[, probability]",
    )
    p.add_argument(
        "--out",
        required=True,
        help="the checked copy to write: results/matbench/predictions/{model}/{task}/fold_{k}.parquet",
    )
    p.set_defaults(func=_cmd_import_predictions)

    p = sub.add_parser("score", help="score one model on one task (5 folds) into a scores JSON")
    p.add_argument("--task", required=True, type=_checked_task, help="Matbench task, e.g. matbench_steels")
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
    p.add_argument("--model", required=True, help="the model's name, as recorded in the scores")
    p.add_argument(
        "--input-kind",
        default=None,
        help="what the model was given; default: 'structure' if the data has structures, else composition-only",
    )
    p.add_argument("--out", required=True, help="results/matbench/scores/{model}/{task}.json")
    p.set_defaults(func=_cmd_score)

    p = sub.add_parser("results-file", help="write matbench's results.json.gz (and info.json) for a model")
    p.add_argument("--model", required=True, help="the model's name, as recorded in the results file")
    p.add_argument(
        "--tasks",
        required=True,
        nargs="+",
        type=_checked_task,
        help="the Matbench tasks of the file, in Matbench order",
    )
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
    p.add_argument("--algorithm-long", default=None, help="info.json: a longer description of the algorithm")
    p.add_argument("--authors", default="crucible", help="info.json: authors (default: crucible)")
    p.add_argument("--bibtex-refs", default=None, help="info.json: BibTeX references of the algorithm")
    p.add_argument("--notes", default=None, help="info.json: free-text notes")
    p.add_argument("--out-results", required=True, help="results/matbench/{model}/results.json.gz")
    p.add_argument("--out-info", default=None, help="also write the leaderboard's info.json here")
    p.set_defaults(func=_cmd_results_file)

    p = sub.add_parser("leaderboard", help="leaderboard and per-fold tables, scaled-error figure")
    p.add_argument(
        "--scores", nargs="+", required=True, help="scores JSONs results/matbench/scores/{model}/{task}.json"
    )
    p.add_argument("--published", required=True, help="config/published_matbench.yaml")
    p.add_argument(
        "--cards",
        nargs="*",
        default=[],
        help="task cards results/matbench/data/{task}.json: the MAE units, and which tasks are structure tasks "
        "(the figure draws composition-only entries on them hollow)",
    )
    p.add_argument("--out-csv", required=True, help="the leaderboard, CSV")
    p.add_argument("--out-md", required=True, help="the leaderboard, Markdown")
    p.add_argument("--out-tex", required=True, help="the leaderboard, LaTeX")
    p.add_argument("--out-folds-csv", required=True, help="every fold's score of every model and task, CSV")
    p.add_argument("--out-png", required=True, help="the scaled-error figure, PNG")
    p.add_argument("--out-pdf", required=True, help="the scaled-error figure, PDF")
    p.set_defaults(func=_cmd_leaderboard)

    p = sub.add_parser(
        "figures", help="parity plot (regression) or ROC curve (classification) of one model on one task"
    )
    p.add_argument("--model", required=True, help="the model's name (figure title)")
    p.add_argument("--card", required=True, help="the task card: results/matbench/data/{task}.json")
    p.add_argument("--data", required=True, help="the clean task table: results/matbench/data/{task}.parquet")
    p.add_argument(
        "--predictions", nargs="+", required=True, help="fold_0 .. fold_4 prediction files of the model on the task"
    )
    p.add_argument("--out-png", required=True, help="the parity plot (regression) or ROC curve (classification), PNG")
    p.add_argument("--out-pdf", required=True, help="the same figure, PDF")
    p.set_defaults(func=_cmd_figures)

    add_user_commands(sub)
