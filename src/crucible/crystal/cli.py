"""``crucible crystal ...``: build items, generate answers, score them, tables and figures."""

from __future__ import annotations

import argparse
import json


def _cmd_build_items(args: argparse.Namespace) -> int:
    from crucible.crystal import items

    items.build_item_files(
        args.source,
        args.dataset,
        args.inputs,
        args.templates,
        args.template,
        args.out_prompts,
        args.out_train,
        test_fraction=args.test_fraction,
        seed=args.seed,
        max_sites=args.max_sites,
        max_test_items=args.max_test_items,
        max_train_items=args.max_train_items,
    )
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from crucible.crystal import generators, items
    from crucible.io import write_json
    from crucible.llm.files import read_prompt_records

    prompts = read_prompt_records(args.prompts)
    train = items.read_jsonl(args.train) if args.train else []
    responses, info = generators.generate(
        args.generator, prompts, train, args.seed, json.loads(args.params or "{}"), progress=True
    )
    items.write_jsonl(responses, args.out)
    write_json(info, args.out_info)
    return 0


def _cmd_score(args: argparse.Namespace) -> int:
    from crucible.crystal import report

    report.score_response_file(
        args.prompts,
        args.responses,
        args.generator,
        args.out,
        args.out_summary,
        info_path=args.info,
        timeout=args.timeout,
        progress=True,
    )
    return 0


def _cmd_table(args: argparse.Namespace) -> int:
    from crucible.crystal import report

    report.write_table_files(report.read_summaries(args.inputs), args.dataset, args.csv, args.md, args.tex)
    return 0


def _cmd_figure(args: argparse.Namespace) -> int:
    from crucible.crystal import report

    report.write_match_rate_figure(report.read_summaries(args.inputs), args.dataset, args.out_png, args.out_pdf)
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
