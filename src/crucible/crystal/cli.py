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
        split_by=args.split_by,
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
        audit_path=args.audit,
    )
    return 0


def _cmd_sample(args: argparse.Namespace) -> int:
    from crucible.crystal import samples

    samples.write_generator_samples(
        args.generator,
        args.prompts,
        args.k,
        args.out,
        args.out_info,
        train_path=args.train,
        seed=args.seed,
        params=json.loads(args.params or "{}"),
        progress=True,
    )
    return 0


def _cmd_sample_prompts(args: argparse.Namespace) -> int:
    from crucible.crystal import samples

    samples.write_repeated_prompts(args.prompts, args.k, args.out)
    return 0


def _cmd_score_samples(args: argparse.Namespace) -> int:
    from crucible.crystal import csp

    csp.score_samples_file(
        args.prompts,
        args.samples,
        args.responder,
        args.k,
        args.out,
        args.out_summary,
        fmt=args.format,
        audit_path=args.audit,
        info_path=args.info,
        timeout=args.timeout,
        progress=True,
    )
    return 0


def _cmd_audit(args: argparse.Namespace) -> int:
    from crucible.crystal import audit

    audit.run_audit(
        args.source,
        args.dataset,
        args.inputs,
        args.templates,
        args.out_items,
        args.out_summary,
        args.csv,
        args.md,
        test_fraction=args.test_fraction,
        seed=args.seed,
        max_sites=args.max_sites,
        convention=args.convention,
        max_comparisons=args.max_comparisons,
        timeout=args.timeout,
        progress=True,
        max_test_items=args.max_test_items,
        workers=args.workers,
        split_by=args.split_by,
    )
    return 0


def _cmd_csp_table(args: argparse.Namespace) -> int:
    from crucible.crystal import csp_table

    csp_table.write_csp_table(csp_table.read_csp_summaries(args.inputs), args.published, args.csv, args.md, args.tex)
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
    from crucible.crystal.audit import DEFAULT_MAX_COMPARISONS
    from crucible.crystal.csp import DEFAULT_K
    from crucible.crystal.data import SOURCES, SPLIT_BY
    from crucible.crystal.generators import GENERATORS
    from crucible.crystal.samples import FORMATS
    from crucible.crystal.scoring import CONVENTION_NAMES, DEFAULT_CONVENTION, TIMEOUT_S

    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    # build-items and audit must read a set the same way: one definition of the options they share
    def crystal_set_args(p):
        p.add_argument(
            "--templates",
            default="config/crystal_prompts.yaml",
            help="YAML of the versioned prompt templates (default: %(default)s)",
        )
        p.add_argument(
            "--test-fraction",
            type=float,
            default=0.5,
            help="share of the crystals drawn into the test split, 0 < f <= 1, where the rows carry no split of "
            "their own (default 0.5; the cdvae sets keep their own splits)",
        )
        p.add_argument(
            "--seed",
            type=int,
            default=0,
            help="seed of the train/test split (build-items: also of the item subsets; default 0)",
        )
        p.add_argument(
            "--split-by",
            choices=SPLIT_BY,
            default="random",
            help="where the rows carry no split: random (default), or formula (a polymorph-grouped split: every "
            "crystal of one reduced formula on the same side)",
        )
        p.add_argument(
            "--max-sites",
            type=int,
            default=None,
            help="leave out crystals with more sites in the given cell, before the split, counted and logged "
            "(default: the set's own limit, carbon-24 24, mp-20 and perov-5 20, others 20; 0: keep all)",
        )

    def generator_args(p):
        p.add_argument(
            "--generator",
            required=True,
            choices=sorted(GENERATORS),
            help="template: the nearest-composition training crystal, species substituted; random-symmetric: a "
            "seeded pyxtal crystal of the composition; mlip-search: random-symmetric candidates relaxed with a "
            "potential, lowest energy first",
        )
        p.add_argument(
            "--prompts", required=True, help="the test items build-items wrote: results/crystal/{dataset}/prompts.jsonl"
        )
        p.add_argument(
            "--train",
            help="the training set build-items wrote (train.jsonl); the template generator needs it, the others ignore it",
        )
        p.add_argument(
            "--seed",
            type=int,
            default=0,
            help="base seed; each item's seed is derived from it and the item's id, so an answer does not "
            "depend on the other items (default 0)",
        )
        p.add_argument(
            "--params",
            default="{}",
            help="JSON object of generator parameters (config crystal.generator_params.{generator}); "
            "mlip-search: model (chgnet-0.3.0), n_candidates (8), fmax (0.1 eV/Å), steps (100), device, "
            "custom_potentials; the others take none (default: {})",
        )

    def audit_arg(p):
        p.add_argument(
            "--audit",
            help="the audit's summary (results/crystal/{dataset}/audit.json): also score its de-duplicated test "
            "set (default: the whole test set only)",
        )

    p = sub.add_parser("build-items", help="prompts.jsonl (test items) and train.jsonl from a crystal set")
    p.add_argument(
        "--source",
        required=True,
        choices=SOURCES,
        help="aflow: the AFLOW prototypes of the pinned pymatgen wheel; cdvae: a built-in CDVAE set (mp-20, "
        "perov-5, carbon-24), checked against its pins; user: your own CSV/JSONL with a cif column or ASE db",
    )
    p.add_argument(
        "--dataset",
        required=True,
        help="the dataset's name, written into every item (aflow-prototypes, mp-20, ... or a user dataset's "
        "name); for cdvae it picks the pinned files the inputs are checked against",
    )
    p.add_argument(
        "--inputs",
        nargs="+",
        required=True,
        help="aflow: the prototypes .json.gz; cdvae: train CSV then test CSV; user: CSV/JSONL (cif column, "
        "optional id and split) or ASE db (optional key split), several files read as one set",
    )
    p.add_argument(
        "--template",
        default="composition-v1",
        help="the prompt template's name in --templates, recorded in every item (default: %(default)s)",
    )
    crystal_set_args(p)
    p.add_argument(
        "--max-test-items", type=int, default=0, help="a seeded subset of this many test items (default 0: all)"
    )
    p.add_argument(
        "--max-train-items", type=int, default=0, help="a seeded subset of this many training crystals (default 0: all)"
    )
    p.add_argument(
        "--out-prompts",
        required=True,
        help="the test items to write (JSON lines: the LLM prompt contract plus OpenCompass's fields and the "
        "reference structure): results/crystal/{dataset}/prompts.jsonl",
    )
    p.add_argument(
        "--out-train",
        required=True,
        help="the training split to write (JSON lines: id, meta, ground_truth): results/crystal/{dataset}/train.jsonl",
    )
    p.set_defaults(func=_cmd_build_items)

    p = sub.add_parser("generate", help="answers of a generator, in the LLM response format")
    generator_args(p)
    p.add_argument(
        "--out",
        required=True,
        help="the answers to write (JSON lines {id, response, error}, one per item): "
        "results/crystal/{dataset}/responses/{generator}.jsonl",
    )
    p.add_argument(
        "--out-info",
        required=True,
        help="the sidecar to write (JSON: generator, seed, parameters, error count, timings in s, the "
        "potential's provenance): .../responses/{generator}.json",
    )
    p.set_defaults(func=_cmd_generate)

    p = sub.add_parser("score", help="OpenCompass MP-20 scoring of one response file")
    p.add_argument(
        "--prompts", required=True, help="the test items build-items wrote: results/crystal/{dataset}/prompts.jsonl"
    )
    p.add_argument(
        "--responses",
        required=True,
        help="the answers, JSON lines {id, response, error} (generate's or the LLM stage's): "
        "results/crystal/{dataset}/responses/{responder}.jsonl",
    )
    p.add_argument(
        "--generator", required=True, help="the responder's name (generator or language model), shown in tables"
    )
    p.add_argument(
        "--info",
        help="the responses' sidecar JSON (parameters, timings), copied into the summary; a path that does "
        "not exist is skipped (default: none)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=TIMEOUT_S,
        help="seconds per item and matcher convention; past it the item is unmatched, reason timeout "
        "(default %(default)s, as OpenCompass)",
    )
    audit_arg(p)
    p.add_argument(
        "--out",
        required=True,
        help="per-item scores to write (parquet: RMS or failure reason, both conventions): "
        "results/crystal/{dataset}/scores/{responder}.parquet",
    )
    p.add_argument(
        "--out-summary",
        required=True,
        help="the summary to write (JSON: match rate in %%, mean RMS, failures by reason, rates by size, "
        "crystal system and seen formula): .../scores/{responder}.json",
    )
    p.set_defaults(func=_cmd_score)

    p = sub.add_parser("sample", help="k samples per item of a generator (a samples file for score-samples)")
    generator_args(p)
    p.add_argument(
        "--k",
        type=int,
        default=DEFAULT_K,
        help="samples per item, sample 0 being generate's answer; fewer where the generator has fewer "
        "candidates (default %(default)s)",
    )
    p.add_argument(
        "--out",
        required=True,
        help="the samples file to write (JSON lines {id, sample, response, error}): "
        "results/crystal/{dataset}/samples/k{k}/{generator}.jsonl",
    )
    p.add_argument(
        "--out-info",
        required=True,
        help="the sidecar to write (JSON: generator, seed, parameters, k, counts, timings in s): "
        ".../samples/k{k}/{generator}.json",
    )
    p.set_defaults(func=_cmd_sample)

    p = sub.add_parser("sample-prompts", help="the prompt set asking a language model for k answers per item")
    p.add_argument(
        "--prompts", required=True, help="the test items build-items wrote: results/crystal/{dataset}/prompts.jsonl"
    )
    p.add_argument(
        "--k",
        type=int,
        default=DEFAULT_K,
        help="copies of each item's prompt, ids {id}#0 .. {id}#k-1 (default %(default)s)",
    )
    p.add_argument(
        "--out",
        required=True,
        help="the repeated prompt set to write (JSON lines, the LLM prompt contract): "
        "results/crystal/{dataset}/k{k}/prompts.jsonl",
    )
    p.set_defaults(func=_cmd_sample_prompts)

    p = sub.add_parser("score-samples", help="match rate and RMSE at 1 and k samples, both matcher conventions")
    p.add_argument(
        "--prompts", required=True, help="the test items build-items wrote: results/crystal/{dataset}/prompts.jsonl"
    )
    p.add_argument(
        "--samples",
        required=True,
        help="several samples per item: JSON lines, extended XYZ, a directory or .tar(.gz) of {id}__{sample}.cif "
        "files, or the LLM stage's answers to sample-prompts' prompt set",
    )
    p.add_argument(
        "--format",
        default="auto",
        choices=("auto", *FORMATS),
        help="the samples' format; auto (default) tells it from the name: .jsonl, .xyz/.extxyz, a directory or "
        ".tar(.gz) of CIFs; responses (the LLM stage's, ids {id}#{sample}) must be named",
    )
    p.add_argument(
        "--responder",
        required=True,
        help="the responder's name (generator, language model, samples file), shown in tables",
    )
    p.add_argument(
        "--k",
        type=int,
        default=DEFAULT_K,
        help="an item's first k samples (lowest sample numbers) count; missing ones are no_response "
        "(default %(default)s)",
    )
    audit_arg(p)
    p.add_argument(
        "--info",
        help="the samples' sidecar JSON (parameters, timings), copied into the summary; a path that does not "
        "exist is skipped (default: none)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=TIMEOUT_S,
        help="seconds per sample and matcher convention; past it the sample is unmatched, reason timeout "
        "(default %(default)s)",
    )
    p.add_argument(
        "--out",
        required=True,
        help="per-sample scores to write (parquet: rank, sample, convention, RMS or failure reason): "
        "results/crystal/{dataset}/csp/{responder}.parquet",
    )
    p.add_argument(
        "--out-summary",
        required=True,
        help="the CSP summary to write (JSON: match rate in %% and RMSE at 1 and k, per convention, whole and "
        "de-duplicated test set): .../csp/{responder}.json",
    )
    p.set_defaults(func=_cmd_score_samples)

    p = sub.add_parser("audit", help="duplicates, train/test leakage and distinct prompts of a crystal set")
    p.add_argument(
        "--source",
        required=True,
        choices=SOURCES,
        help="as build-items: aflow, cdvae (a built-in CDVAE set, checked against its pins) or user",
    )
    p.add_argument(
        "--dataset", required=True, help="the dataset's name, as build-items (picks a cdvae set's pinned files)"
    )
    p.add_argument(
        "--inputs",
        nargs="+",
        required=True,
        help="as build-items; cdvae: train, val and test CSV, so that the validation split is audited too",
    )
    crystal_set_args(p)
    p.add_argument(
        "--convention",
        default=DEFAULT_CONVENTION,
        choices=CONVENTION_NAMES,
        help="the matcher that decides what a duplicate is: cdvae (ltol 0.3, stol 0.5, angle_tol 10; default) or "
        "pymatgen-default (0.2, 0.3, 5)",
    )
    p.add_argument(
        "--max-comparisons",
        type=int,
        default=DEFAULT_MAX_COMPARISONS,
        help="matcher calls per formula group and pass; past it the rest are unchecked and counted, so a "
        "capped count is a lower bound (default %(default)s)",
    )
    p.add_argument(
        "--max-test-items",
        type=int,
        default=0,
        help="as build-items: the seeded subset of test items that is scored (0: all); the de-duplicated test "
        "set is chosen among them",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="matcher processes run side by side, one formula group each (the counts do not depend on it; "
        "default %(default)s)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=TIMEOUT_S,
        help="seconds per matcher call; a call past it counts as no match, and the timeouts are counted (default %(default)s)",
    )
    p.add_argument(
        "--out-items",
        required=True,
        help="per-structure flags to write (parquet: cluster, duplicate in train/val, formula in train, "
        "kept in the de-duplicated test set): results/crystal/{dataset}/audit.parquet",
    )
    p.add_argument(
        "--out-summary",
        required=True,
        help="the summary to write (JSON: counts per split, distinct prompts per template, the de-duplicated "
        "test ids score and score-samples read): results/crystal/{dataset}/audit.json",
    )
    p.add_argument(
        "--csv", required=True, help="the audit table to write (CSV): results/tables/crystal_{dataset}_audit.csv"
    )
    p.add_argument(
        "--md",
        required=True,
        help="the same table as Markdown, with its caption: results/tables/crystal_{dataset}_audit.md",
    )
    p.set_defaults(func=_cmd_audit)

    p = sub.add_parser("csp-table", help="the CSP table: ours beside the published rows")
    p.add_argument(
        "--inputs",
        nargs="+",
        required=True,
        help="the CSP summaries score-samples wrote, any datasets, in row order: "
        "results/crystal/{dataset}/csp/{responder}.json (the dataset from the path if a summary lacks it)",
    )
    p.add_argument(
        "--published",
        default="config/published_crystal.yaml",
        help="YAML of the published rows (method, samples, match rate in %% and RMSE per dataset, with their "
        "source), shown above ours (default: %(default)s)",
    )
    p.add_argument("--csv", required=True, help="the table to write (CSV): results/tables/crystal_csp.csv")
    p.add_argument(
        "--md", required=True, help="the table as Markdown, with its caption and sources: results/tables/crystal_csp.md"
    )
    p.add_argument("--tex", required=True, help="the table as LaTeX: results/tables/crystal_csp.tex")
    p.set_defaults(func=_cmd_csp_table)

    p = sub.add_parser("table", help="generator x match rate, RMS, failures")
    p.add_argument(
        "--inputs",
        nargs="+",
        required=True,
        help="the summaries score wrote, one per responder, in row order: results/crystal/{dataset}/scores/{responder}.json",
    )
    p.add_argument("--dataset", required=True, help="the dataset's name, printed in the caption")
    p.add_argument("--csv", required=True, help="the table to write (CSV): results/tables/crystal_{dataset}.csv")
    p.add_argument(
        "--md", required=True, help="the table as Markdown, with its caption: results/tables/crystal_{dataset}.md"
    )
    p.add_argument("--tex", required=True, help="the table as LaTeX: results/tables/crystal_{dataset}.tex")
    p.set_defaults(func=_cmd_table)

    p = sub.add_parser("figure", help="match rate by number of sites, per generator")
    p.add_argument(
        "--inputs",
        nargs="+",
        required=True,
        help="the summaries score wrote, one per responder, in bar order: results/crystal/{dataset}/scores/{responder}.json",
    )
    p.add_argument("--dataset", required=True, help="the dataset's name, printed in the title")
    p.add_argument(
        "--out-png",
        required=True,
        help="the figure to write as PNG: results/figures/crystal_{dataset}_match_by_nsites.png",
    )
    p.add_argument(
        "--out-pdf",
        required=True,
        help="the same figure as PDF: results/figures/crystal_{dataset}_match_by_nsites.pdf",
    )
    p.set_defaults(func=_cmd_figure)
