"""``crucible crystal ...``: build items, generate answers, score them, tables and figures."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _cmd_build_items(args: argparse.Namespace) -> int:
    from crucible.crystal import data, items

    train, test = data.load_dataset(
        args.source, args.inputs, args.test_fraction, args.seed, args.max_sites, dataset=args.dataset
    )
    test = data.subsample(test, args.max_test_items, args.seed)
    train = data.subsample(train, args.max_train_items, args.seed)
    templates = items.load_templates(args.templates)
    prompts, train_records = items.build_items(
        args.dataset, train, test, args.template, items.get_template(templates, args.template)
    )
    items.write_jsonl(prompts, args.out_prompts)
    items.write_jsonl(train_records, args.out_train)
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from crucible.crystal import generators, items
    from crucible.io import write_json

    prompts = items.read_jsonl(args.prompts)
    train = items.read_jsonl(args.train) if args.train else []
    responses, info = generators.generate(
        args.generator, prompts, train, args.seed, json.loads(args.params or "{}"), progress=True
    )
    items.write_jsonl(responses, args.out)
    write_json(info, args.out_info)
    return 0


def _cmd_score(args: argparse.Namespace) -> int:
    from crucible.crystal import items, report, scoring
    from crucible.errors import DataValidationError
    from crucible.io import read_json, write_json, write_parquet

    prompts = items.read_jsonl(args.prompts)
    records = items.read_jsonl(args.responses)
    known = {p["id"] for p in prompts}
    responses = {}
    for n, rec in enumerate(records, 1):
        if rec["id"] not in known:
            raise DataValidationError(f"{args.responses}: line {n}: id {rec['id']!r} is not an item of {args.prompts}")
        if rec["id"] in responses:
            raise DataValidationError(f"{args.responses}: line {n}: id {rec['id']!r} repeated")
        responses[rec["id"]] = rec.get("response")
    scores = scoring.score_items(responses, prompts, timeout=args.timeout, progress=True)
    df = report.scores_frame(scores, prompts)
    info = read_json(args.info) if args.info and Path(args.info).exists() else {}
    write_parquet(df, args.out, schema=report.SCORE_SCHEMA)
    write_json(report.summarize(df, args.generator, info), args.out_summary)
    return 0


def _load_summaries(paths):
    from crucible.io import read_json

    return [read_json(p) for p in paths]


def _cmd_table(args: argparse.Namespace) -> int:
    from crucible.crystal import report

    report.write_table_files(_load_summaries(args.inputs), args.dataset, args.csv, args.md, args.tex)
    return 0


def _cmd_figure(args: argparse.Namespace) -> int:
    from crucible.crystal import report
    from crucible.report.figures import save_figure

    fig = report.match_rate_by_nsites_figure(_load_summaries(args.inputs), args.dataset)
    save_figure(fig, args.out_png, args.out_pdf)
    return 0


def configure_parser(parser: argparse.ArgumentParser) -> None:
    from crucible.crystal.data import SOURCES
    from crucible.crystal.generators import GENERATORS
    from crucible.crystal.scoring import TIMEOUT_S

    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("build-items", help="prompts.jsonl (test items) and train.jsonl from a crystal set")
    p.add_argument("--source", required=True, choices=SOURCES)
    p.add_argument("--dataset", required=True, help="dataset name written into every item")
    p.add_argument(
        "--inputs",
        nargs="+",
        required=True,
        help="aflow: the prototypes .json.gz; cdvae: train CSV then test CSV; user: CSV/JSONL/ASE db",
    )
    p.add_argument("--templates", default="config/crystal_prompts.yaml")
    p.add_argument("--template", default="composition-v1")
    p.add_argument("--test-fraction", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-sites", type=int, default=20, help="drop crystals with more sites (0: keep all)")
    p.add_argument("--max-test-items", type=int, default=0, help="seeded subset of the test items (0: all)")
    p.add_argument("--max-train-items", type=int, default=0, help="seeded subset of the training set (0: all)")
    p.add_argument("--out-prompts", required=True)
    p.add_argument("--out-train", required=True)
    p.set_defaults(func=_cmd_build_items)

    p = sub.add_parser("generate", help="answers of a generator, in the LLM response format")
    p.add_argument("--generator", required=True, choices=sorted(GENERATORS))
    p.add_argument("--prompts", required=True)
    p.add_argument("--train", help="train.jsonl (the template generator needs it)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--params", default="{}", help="JSON object of generator parameters")
    p.add_argument("--out", required=True, help="responses/{generator}.jsonl")
    p.add_argument("--out-info", required=True, help="sidecar JSON with parameters and timings")
    p.set_defaults(func=_cmd_generate)

    p = sub.add_parser("score", help="OpenCompass MP-20 scoring of one response file")
    p.add_argument("--prompts", required=True)
    p.add_argument("--responses", required=True)
    p.add_argument("--generator", required=True, help="name shown in tables")
    p.add_argument("--info", help="the responses' sidecar JSON (timings), if any")
    p.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per item (OpenCompass: 10)")
    p.add_argument("--out", required=True, help="per-item scores (parquet)")
    p.add_argument("--out-summary", required=True, help="summary JSON")
    p.set_defaults(func=_cmd_score)

    p = sub.add_parser("table", help="generator x match rate, RMS, failures")
    p.add_argument("--inputs", nargs="+", required=True, help="summary JSONs from `score`")
    p.add_argument("--dataset", required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--md", required=True)
    p.add_argument("--tex", required=True)
    p.set_defaults(func=_cmd_table)

    p = sub.add_parser("figure", help="match rate by number of sites, per generator")
    p.add_argument("--inputs", nargs="+", required=True, help="summary JSONs from `score`")
    p.add_argument("--dataset", required=True)
    p.add_argument("--out-png", required=True)
    p.add_argument("--out-pdf", required=True)
    p.set_defaults(func=_cmd_figure)
