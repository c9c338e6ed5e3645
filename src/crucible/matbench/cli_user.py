"""``crucible matbench user-*``: a user dataset through fetch, clean, folds, predict, score, table.

crucible matbench user-fetch --dataset D --spec '{"url": ..., "sha256": ...}' --out F.json.gz
crucible matbench user-clean --dataset D --spec JSON --raw F.json.gz --out-data D.parquet --out-card D.json
crucible matbench user-folds --data D.parquet --card D.json --out folds.parquet
crucible matbench user-predict --model M --fold K --data ... --card ... --folds ... --out P.parquet
    (every argument of `crucible matbench predict` but --task: the card names the dataset)
crucible matbench user-score --model M --card ... --data ... --folds ... --predictions P0..P4 --out S.json
crucible matbench user-table --scores S1 S2 ... --out-csv T.csv --out-md T.md --out-tex T.tex
"""

from __future__ import annotations

import argparse
import json

from crucible.matbench.cli_predict import add_predict_arguments


def _spec(text: str) -> dict:
    from crucible.errors import ConfigError

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--spec is not JSON: {exc}") from None


def _cmd_user_fetch(args: argparse.Namespace) -> int:
    from crucible.matbench.user_datasets import fetch_spec
    from crucible.sources import fetch

    fetch(args.dataset, fetch_spec(args.dataset, _spec(args.spec)), args.out)
    return 0


def _cmd_user_clean(args: argparse.Namespace) -> int:
    from crucible.matbench.clean import write_clean
    from crucible.matbench.user_datasets import clean_user_dataset

    df, card = clean_user_dataset(args.dataset, _spec(args.spec), args.raw)
    write_clean(df, card, args.out_data, args.out_card)
    return 0


def _cmd_user_folds(args: argparse.Namespace) -> int:
    from crucible.io import read_json, read_parquet
    from crucible.matbench.folds import write_folds
    from crucible.matbench.user_datasets import build_user_folds

    card = read_json(args.card)
    write_folds(
        build_user_folds(read_parquet(args.data), card["task_type"], args.inner_fraction, args.inner_seed), args.out
    )
    return 0


def _cmd_user_predict(args: argparse.Namespace) -> int:
    from crucible.matbench.cli_predict import run_predict_command

    return run_predict_command(args)


def _cmd_user_score(args: argparse.Namespace) -> int:
    from pathlib import Path

    from crucible.io import read_json, read_parquet
    from crucible.matbench.scoring import write_scores
    from crucible.matbench.user_datasets import score_user_dataset

    card = read_json(args.card)
    preds = [read_parquet(p) for p in args.predictions]
    sidecars = [
        read_json(Path(p).with_suffix(".json")) if Path(p).with_suffix(".json").is_file() else {}
        for p in args.predictions
    ]
    record = score_user_dataset(card, read_parquet(args.data), read_parquet(args.folds), preds, args.model, sidecars)
    write_scores(record, args.out)
    return 0


USER_TABLE_HEADERS = {
    "structures_used": "structures used",
    "scaled_error": "scaled error",
    **{f"fold_{k}": f"fold {k}" for k in range(5)},
}


def _cmd_user_table(args: argparse.Namespace) -> int:
    from crucible.io import read_json
    from crucible.matbench.user_datasets import user_table
    from crucible.report.tables import write_table

    table = user_table([read_json(p) for p in args.scores])
    name = table["dataset"].iloc[0] if len(table) else "user dataset"
    write_table(
        table,
        csv=args.out_csv,
        md=args.out_md,
        tex=args.out_tex,
        digits=4,
        title=f"{name}: 5-fold scores (Matbench protocol, user dataset)",
        caption=f"Per model, its leaderboard metric on each of the 5 test folds of {name} (seeded 5-fold "
        "split of the user's table), their mean ± std (ddof 0) and the scaled error (MAE/MAD or (1 − AUC)/0.5).",
        headers=USER_TABLE_HEADERS,
    )
    return 0


def add_user_commands(sub) -> None:
    p = sub.add_parser("user-fetch", help="download a user dataset and check its pinned SHA-256")
    p.add_argument("--dataset", required=True, help="the user dataset's name (a key of matbench.user_datasets)")
    p.add_argument("--spec", required=True, help="JSON of its matbench.user_datasets entry")
    p.add_argument(
        "--out", required=True, help="the downloaded file to write: resources/downloads/user/{dataset}.json.gz"
    )
    p.set_defaults(func=_cmd_user_fetch)

    p = sub.add_parser("user-clean", help="user dataset .json.gz -> typed, id'd task table + card")
    p.add_argument("--dataset", required=True, help="the user dataset's name (a key of matbench.user_datasets)")
    p.add_argument("--spec", required=True, help="JSON of its matbench.user_datasets entry")
    p.add_argument("--raw", required=True, help="the downloaded .json.gz (checked against the entry's sha256)")
    p.add_argument(
        "--out-data", required=True, help="the clean table to write: results/matbench/user/{dataset}/data.parquet"
    )
    p.add_argument("--out-card", required=True, help="the card to write: results/matbench/user/{dataset}/card.json")
    p.set_defaults(func=_cmd_user_clean)

    p = sub.add_parser("user-folds", help="Matbench's 5-fold recipe (seed 18012019) on a user dataset")
    p.add_argument("--data", required=True, help="the clean table: results/matbench/user/{dataset}/data.parquet")
    p.add_argument("--card", required=True, help="the card: results/matbench/user/{dataset}/card.json")
    p.add_argument(
        "--inner-fraction",
        type=float,
        default=0.25,
        help="fraction of each training fold held out as inner validation (default 0.25)",
    )
    p.add_argument("--inner-seed", type=int, default=7, help="seed of the inner validation split (default 7)")
    p.add_argument(
        "--out", required=True, help="the folds table to write: results/matbench/user/{dataset}/folds.parquet"
    )
    p.set_defaults(func=_cmd_user_folds)

    p = sub.add_parser("user-predict", help="fit a model on a fold of a user dataset, predict its test rows")
    add_predict_arguments(p)  # predict's own arguments; the task is the card's
    p.set_defaults(func=_cmd_user_predict)

    p = sub.add_parser("user-score", help="score a model's five folds on a user dataset")
    p.add_argument("--model", required=True, help="the model's name, as recorded in the scores")
    p.add_argument("--card", required=True, help="the card: results/matbench/user/{dataset}/card.json")
    p.add_argument("--data", required=True, help="the clean table: results/matbench/user/{dataset}/data.parquet")
    p.add_argument("--folds", required=True, help="the folds table: results/matbench/user/{dataset}/folds.parquet")
    p.add_argument("--predictions", nargs=5, required=True, help="fold_0 .. fold_4 predictions")
    p.add_argument(
        "--out", required=True, help="the scores JSON to write: results/matbench/user/{dataset}/scores/{model}.json"
    )
    p.set_defaults(func=_cmd_user_score)

    p = sub.add_parser("user-table", help="one user dataset's scores, every model")
    p.add_argument("--scores", nargs="+", required=True, help="scores JSONs of the dataset, one per model")
    p.add_argument("--out-csv", required=True, help="the table, CSV")
    p.add_argument("--out-md", required=True, help="the table, Markdown")
    p.add_argument("--out-tex", required=True, help="the table, LaTeX")
    p.set_defaults(func=_cmd_user_table)
