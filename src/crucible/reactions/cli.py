"""``crucible reactions ...``: clean, build questions, predict, parse LLM responses, score, report."""

from __future__ import annotations

import argparse
import json

from crucible.errors import ConfigError
from crucible.io import read_json, read_parquet, write_json


def _same_length(args: argparse.Namespace, a: str, b: str) -> None:
    if len(getattr(args, a)) != len(getattr(args, b)):
        raise ConfigError(f"--{a.replace('_', '-')} and --{b.replace('_', '-')} need the same number of paths")


def _cmd_clean(args: argparse.Namespace) -> int:
    from crucible.reactions import data

    custom = json.loads(args.custom) if args.custom else None
    spec = data.dataset_spec(args.dataset, custom)
    data.write_clean(spec, args.input, args.out, args.out_card)
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    from crucible.reactions import questions

    _same_length(args, "types", "out_questions")
    _same_length(args, "types", "out_prompts")
    questions.write_question_files(
        args.data,
        args.card,
        json.loads(args.params) if args.params else {},
        args.types,
        args.out_questions,
        args.out_prompts,
        args.out_summary,
        args.system_prompt,
    )
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    from crucible.reactions import baselines, scoring

    _same_length(args, "questions", "out")
    model = baselines.make_model(args.model, json.loads(args.params) if args.params else {})
    model.fit(read_parquet(args.data), read_json(args.card))
    for q_path, out in zip(args.questions, args.out):
        qs = scoring.load_questions(q_path)
        write_json(scoring.prediction_record(args.model, q_path, model.predict(qs)), out)
    return 0


def _cmd_parse(args: argparse.Namespace) -> int:
    from crucible.reactions import prompts

    _same_length(args, "questions", "responses")
    _same_length(args, "questions", "out")
    for q_path, r_path, out in zip(args.questions, args.responses, args.out):
        prompts.write_response_predictions(args.model, q_path, r_path, out)
    return 0


def _cmd_score(args: argparse.Namespace) -> int:
    from crucible.reactions import scoring

    _same_length(args, "questions", "predictions")
    write_json(scoring.score_prediction_files(args.questions, args.predictions, args.dataset, args.model), args.out)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from crucible.reactions import report

    tables = {
        name: getattr(args, f"out_{name}") for name in ("csv", "md", "tex", "paired_csv", "paired_md", "paired_tex")
    }
    report.write_report(args.dataset, args.scores, tables, args.out_figure, args.bootstrap, args.seed)
    return 0


def _cmd_package(args: argparse.Namespace) -> int:
    from crucible.reactions import report

    report.write_package_files(args.dataset, args.out_dir, args.questions, args.card, args.summary, args.table)
    return 0


def configure_parser(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("clean", help="raw high-throughput table -> clean parquet + card")
    p.add_argument(
        "--dataset",
        required=True,
        help="the dataset's name, e.g. buchwald-hartwig (or a key of reactions.custom_datasets)",
    )
    p.add_argument("--input", required=True, help="the raw CSV (a built-in dataset's is checked against its pin)")
    p.add_argument("--custom", help="JSON of config reactions.custom_datasets, for a user table")
    p.add_argument("--out", required=True, help="the clean table to write: results/reactions/data/{dataset}.parquet")
    p.add_argument("--out-card", required=True, help="the card to write: results/reactions/data/{dataset}.json")
    p.set_defaults(func=_cmd_clean)

    p = sub.add_parser("build", help="clean table -> question files (RxnOptBench schema) + prompts.jsonl")
    p.add_argument("--data", required=True, help="the clean table: results/reactions/data/{dataset}.parquet")
    p.add_argument("--card", required=True, help="its card: results/reactions/data/{dataset}.json")
    p.add_argument("--params", help="JSON: n_options, seed, n_references, reference_quantile, cross_references")
    p.add_argument("--system-prompt", help="system prompt of every prompt (default: none)")
    p.add_argument("--types", nargs="+", required=True, help="question types to build, e.g. single_varying all_varying")
    p.add_argument(
        "--out-questions",
        nargs="+",
        required=True,
        help="question files to write, one per --types entry: .../{question_type}/questions.json",
    )
    p.add_argument(
        "--out-prompts",
        nargs="+",
        required=True,
        help="prompt files to write, one per --types entry: .../{question_type}/prompts.jsonl",
    )
    p.add_argument(
        "--out-summary",
        required=True,
        help="the build record to write (counts per type, parameters): results/reactions/{dataset}/build.json",
    )
    p.set_defaults(func=_cmd_build)

    p = sub.add_parser("predict", help="a registered baseline answers question files")
    p.add_argument(
        "--model", required=True, help="registered baseline: random, popularity, nearest-substrate, yield-model, oracle"
    )
    p.add_argument("--params", help="JSON of model parameters")
    p.add_argument("--data", required=True, help="the clean table: results/reactions/data/{dataset}.parquet")
    p.add_argument("--card", required=True, help="its card: results/reactions/data/{dataset}.json")
    p.add_argument("--questions", nargs="+", required=True, help="question files (RxnOptBench schema)")
    p.add_argument(
        "--out", nargs="+", required=True, help="prediction files to write, one per questions file, same order"
    )
    p.set_defaults(func=_cmd_predict)

    p = sub.add_parser("parse", help="an LLM's responses/{model}.jsonl files -> predictions")
    p.add_argument("--model", required=True, help="the language model's name (config llm.models)")
    p.add_argument("--questions", nargs="+", required=True, help="question files (RxnOptBench schema)")
    p.add_argument("--responses", nargs="+", required=True, help="one per questions file, same order")
    p.add_argument(
        "--out", nargs="+", required=True, help="prediction files to write, one per questions file, same order"
    )
    p.set_defaults(func=_cmd_parse)

    p = sub.add_parser("score", help="RxnOptBench metrics of prediction files (RxnOptBench's own files too)")
    p.add_argument("--dataset", default="", help="dataset name recorded in the scores (default: none)")
    p.add_argument("--model", default="", help="model name recorded in the scores (default: none)")
    p.add_argument("--questions", nargs="+", required=True, help="question files (RxnOptBench schema)")
    p.add_argument(
        "--predictions", nargs="+", required=True, help="prediction files, one per questions file, same order"
    )
    p.add_argument("--out", required=True, help="the scores JSON to write")
    p.set_defaults(func=_cmd_score)

    p = sub.add_parser("report", help="per-dataset table, paired table and figure")
    p.add_argument("--dataset", required=True, help="the dataset's name (titles and captions)")
    p.add_argument(
        "--scores",
        nargs="+",
        required=True,
        help="scores JSONs results/reactions/{dataset}/scores/{model}.json, one per model",
    )
    p.add_argument(
        "--bootstrap", type=int, default=1000, help="bootstrap resamples of the 95 %% intervals (default 1000)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    for name in ("csv", "md", "tex", "paired-csv", "paired-md", "paired-tex"):
        what = "the paired with/without-reference table" if name.startswith("paired") else "the table"
        p.add_argument(f"--out-{name}", required=True, help=f"{what}, {name.removeprefix('paired-').upper()}")
    p.add_argument("--out-figure", nargs="+", required=True, help="png and/or pdf paths")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("package", help="RxnOptBench's self-contained directory for one dataset")
    p.add_argument("--dataset", required=True, help="the dataset's name")
    p.add_argument("--questions", nargs="+", required=True, help="question files to copy into the package")
    p.add_argument("--card", required=True, help="the dataset's card: results/reactions/data/{dataset}.json")
    p.add_argument("--summary", required=True, help="the build record: results/reactions/{dataset}/build.json")
    p.add_argument("--table", required=True, help="the dataset's results table (CSV) for the package's report.md")
    p.add_argument("--out-dir", required=True, help="the package directory to write")
    p.set_defaults(func=_cmd_package)
