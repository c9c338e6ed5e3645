"""``crucible reactions ...``: clean, build questions, predict, parse LLM responses, score, report."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from crucible.errors import ConfigError
from crucible.io import read_json, read_parquet, write_json, write_text


def _same_length(args: argparse.Namespace, a: str, b: str) -> None:
    if len(getattr(args, a)) != len(getattr(args, b)):
        raise ConfigError(f"--{a.replace('_', '-')} and --{b.replace('_', '-')} need the same number of paths")


def _cmd_clean(args: argparse.Namespace) -> int:
    from crucible.reactions import data

    custom = json.loads(args.custom) if args.custom else None
    spec = data.dataset_spec(args.dataset, custom)
    data.write_clean(spec, args.input, args.out, args.out_card, artifact_sha256=args.artifact_sha256)
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    from crucible.reactions import prompts, questions

    _same_length(args, "types", "out_questions")
    _same_length(args, "types", "out_prompts")
    params = json.loads(args.params) if args.params else {}
    sets, summary = questions.build_all(read_parquet(args.data), read_json(args.card), params)
    for qtype, q_out, p_out in zip(args.types, args.out_questions, args.out_prompts):
        if qtype not in sets:
            raise ConfigError(f"unknown question type {qtype!r}; known: {', '.join(sets)}")
        write_json(sets[qtype], q_out, indent=1)
        write_text(prompts.prompts_jsonl(sets[qtype], args.system_prompt or prompts.SYSTEM_PROMPT), p_out)
    write_json(summary, args.out_summary)
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    from crucible.reactions import baselines, scoring

    _same_length(args, "questions", "out")
    model = baselines.make_model(args.model, json.loads(args.params) if args.params else {})
    model.fit(read_parquet(args.data), read_json(args.card))
    for q_path, out in zip(args.questions, args.out):
        qs = scoring.load_questions(q_path)
        write_json(_wrap(args.model, q_path, model.predict(qs)), out)
    return 0


def _wrap(model: str, questions_path: str, predictions: dict) -> dict:
    from crucible.reactions.scoring import questions_fingerprint

    return {
        "model": model,
        "questions_file": str(questions_path),
        "questions_sha256": questions_fingerprint(questions_path),
        "predictions": predictions,
    }


def _cmd_parse(args: argparse.Namespace) -> int:
    from crucible.reactions import prompts, scoring

    _same_length(args, "questions", "responses")
    _same_length(args, "questions", "out")
    for q_path, r_path, out in zip(args.questions, args.responses, args.out):
        qs = scoring.load_questions(q_path)
        lines = [json.loads(line) for line in Path(r_path).read_text(encoding="utf-8").splitlines() if line.strip()]
        write_json(_wrap(args.model, q_path, prompts.parse_responses(lines, qs, source=r_path)), out)
    return 0


def _cmd_score(args: argparse.Namespace) -> int:
    from crucible.reactions import baselines, scoring

    _same_length(args, "questions", "predictions")
    types, expected = {}, {}
    for q_path, p_path in zip(args.questions, args.predictions):
        qs = scoring.load_questions(q_path)
        preds = scoring.load_predictions(p_path, qs, scoring.questions_fingerprint(q_path))
        result = scoring.score_questions(qs, preds)
        qtype = result["question_type"] or Path(q_path).parent.name
        types[qtype] = result
        if args.model == "random" and qs:
            exp = [baselines.expected_random(q) for q in qs]
            expected[qtype] = {
                k: (
                    float(sum(e[k] for e in exp if e[k] is not None) / max(1, sum(e[k] is not None for e in exp)))
                    if any(e[k] is not None for e in exp)
                    else None
                )
                for k in exp[0]
            }
    write_json({"dataset": args.dataset, "model": args.model, "types": types, "expected": expected}, args.out)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from crucible.reactions import report
    from crucible.report.figures import save_figure

    scores = [read_json(p) for p in args.scores]
    table = report.write_tables(
        args.dataset,
        scores,
        args.out_csv,
        args.out_md,
        args.out_tex,
        args.out_paired_csv,
        args.out_paired_md,
        args.out_paired_tex,
        args.bootstrap,
        args.seed,
    )
    save_figure(report.relative_score_figure(args.dataset, table), *args.out_figure)
    return 0


def _cmd_package(args: argparse.Namespace) -> int:
    from crucible.reactions import baselines, report, scoring

    examples = {}
    for q_path in args.questions:
        qs = scoring.load_questions(q_path)[:3]
        examples[Path(q_path).parent.name] = baselines.RandomChoice(random_state=0).predict(qs)
    import pandas as pd

    table = pd.read_csv(args.table)
    report.write_package(
        args.dataset, args.out_dir, args.questions, read_json(args.card), table, read_json(args.summary), examples
    )
    return 0


def configure_parser(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("clean", help="raw high-throughput table -> clean parquet + card")
    p.add_argument("--dataset", required=True)
    p.add_argument("--input", required=True, help="the raw CSV")
    p.add_argument("--custom", help="JSON of config reactions.custom_datasets, for a user table")
    p.add_argument("--artifact-sha256", help="SHA-256 of the archive the CSV came from, for the card")
    p.add_argument("--out", required=True)
    p.add_argument("--out-card", required=True)
    p.set_defaults(func=_cmd_clean)

    p = sub.add_parser("build", help="clean table -> question files (RxnOptBench schema) + prompts.jsonl")
    p.add_argument("--data", required=True)
    p.add_argument("--card", required=True)
    p.add_argument("--params", help="JSON: n_options, seed, n_references, reference_quantile, cross_references")
    p.add_argument("--system-prompt")
    p.add_argument("--types", nargs="+", required=True)
    p.add_argument("--out-questions", nargs="+", required=True)
    p.add_argument("--out-prompts", nargs="+", required=True)
    p.add_argument("--out-summary", required=True)
    p.set_defaults(func=_cmd_build)

    p = sub.add_parser("predict", help="a registered baseline answers question files")
    p.add_argument("--model", required=True)
    p.add_argument("--params", help="JSON of model parameters")
    p.add_argument("--data", required=True)
    p.add_argument("--card", required=True)
    p.add_argument("--questions", nargs="+", required=True)
    p.add_argument("--out", nargs="+", required=True)
    p.set_defaults(func=_cmd_predict)

    p = sub.add_parser("parse", help="an LLM's responses/{model}.jsonl files -> predictions")
    p.add_argument("--model", required=True)
    p.add_argument("--questions", nargs="+", required=True)
    p.add_argument("--responses", nargs="+", required=True, help="one per questions file, same order")
    p.add_argument("--out", nargs="+", required=True)
    p.set_defaults(func=_cmd_parse)

    p = sub.add_parser("score", help="RxnOptBench metrics of prediction files (RxnOptBench's own files too)")
    p.add_argument("--dataset", default="")
    p.add_argument("--model", default="")
    p.add_argument("--questions", nargs="+", required=True)
    p.add_argument("--predictions", nargs="+", required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(func=_cmd_score)

    p = sub.add_parser("report", help="per-dataset table, paired table and figure")
    p.add_argument("--dataset", required=True)
    p.add_argument("--scores", nargs="+", required=True)
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    for name in ("csv", "md", "tex", "paired-csv", "paired-md", "paired-tex"):
        p.add_argument(f"--out-{name}", required=True)
    p.add_argument("--out-figure", nargs="+", required=True, help="png and/or pdf paths")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("package", help="RxnOptBench's self-contained directory for one dataset")
    p.add_argument("--dataset", required=True)
    p.add_argument("--questions", nargs="+", required=True)
    p.add_argument("--card", required=True)
    p.add_argument("--summary", required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--out-dir", required=True)
    p.set_defaults(func=_cmd_package)
