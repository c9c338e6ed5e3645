"""``crucible crystal ...``: build items, generate answers, score them, tables and figures."""

from __future__ import annotations

from crucible.crystal.data import SOURCES, SPLIT_BY
from crucible.crystal.generators import GENERATORS
from crucible.crystal.samples import DEFAULT_K, FORMATS
from crucible.crystal.scoring import CONVENTION_NAMES, DEFAULT_CONVENTION, DEFAULT_MAX_COMPARISONS, TIMEOUT_S
from crucible.stage import Arg, In, Opt, Out, Stage, json_value

# build-items and audit must read a set the same way: one declaration of the options they share
_SET = (
    Opt(
        "source",
        "aflow: the AFLOW prototypes of the pinned pymatgen wheel; cdvae: a built-in CDVAE set (mp-20, perov-5, "
        "carbon-24), checked against its pins; user: your own CSV/JSONL with a cif column or ASE db",
        choices=SOURCES,
    ),
    Opt(
        "dataset",
        "the dataset's name, written into every item (aflow-prototypes, mp-20, ... or a user dataset's name); "
        "for cdvae it picks the pinned files the inputs are checked against",
    ),
)
_SPLIT = (
    In(
        "templates",
        "YAML of the versioned prompt templates (default: %(default)s)",
        default="config/crystal_prompts.yaml",
    ),
    Opt(
        "test_fraction",
        "share of the crystals drawn into the test split, 0 < f <= 1, where the rows carry no split of their own "
        "(default 0.5; the cdvae sets keep their own splits)",
        type=float,
        default=0.5,
    ),
    Opt("seed", "seed of the train/test split (build-items: also of the item subsets; default 0)", type=int, default=0),
    Opt(
        "split_by",
        "where the rows carry no split: random (default), or formula (a polymorph-grouped split: every crystal of "
        "one reduced formula on the same side)",
        choices=SPLIT_BY,
        default="random",
    ),
    Opt(
        "max_sites",
        "leave out crystals with more sites in the given cell, before the split, counted and logged (default: the "
        "set's own limit, carbon-24 24, mp-20 and perov-5 20, others 20; 0: keep all)",
        type=int,
        default=None,
    ),
    Opt(
        "max_test_items",
        "a seeded subset of this many test items (default 0: all); the audit scores the same subset and chooses "
        "the de-duplicated test set among them",
        type=int,
        default=0,
    ),
)
_PROMPTS = In("prompts", "the test items build-items wrote: results/crystal/{dataset}/prompts.jsonl")
# generate and sample: a generator's answers to the items
_GENERATOR = (
    Opt(
        "generator",
        "template: the nearest-composition training crystal, species substituted; random-symmetric: a seeded "
        "pyxtal crystal of the composition; mlip-search: random-symmetric candidates relaxed with a potential, "
        "lowest energy first",
        choices=sorted(GENERATORS),
    ),
    _PROMPTS,
    In(
        "train",
        "the training set build-items wrote (train.jsonl); the template generator needs it, the others ignore it",
        default=None,
    ),
    Opt(
        "seed",
        "base seed; each item's seed is derived from it and the item's id, so an answer does not depend on the "
        "other items (default 0)",
        type=int,
        default=0,
    ),
    Opt(
        "params",
        "JSON object of generator parameters (config crystal.generator_params.{generator}); mlip-search: model "
        "(chgnet-0.3.0), n_candidates (8), fmax (0.1 eV/Å), steps (100), device, custom_potentials; the others "
        "take none (default: {})",
        type=json_value,
        default=None,
    ),
)
# score and score-samples: the answers' sidecar, the audit's de-duplicated test set, the matcher's time
_SCORING = (
    Opt(
        "info",
        "the answers' sidecar JSON (parameters, timings), copied into the summary; a path that does not exist is "
        "skipped (default: none)",
        default=None,
    ),
    In(
        "audit",
        "the audit's summary (results/crystal/{dataset}/audit.json): also score its de-duplicated test set "
        "(default: the whole test set only)",
        default=None,
    ),
)
_TIMEOUT = Opt(
    "timeout",
    "seconds per matcher call (an answer or sample under one convention; the audit: a pair of crystals); past it "
    "the answer is unmatched, reason timeout, and the timeouts are counted (default %(default)s, as OpenCompass)",
    type=float,
    default=TIMEOUT_S,
)
# table and figure: one row (bar) per responder's score summary
_SUMMARIES = (
    In(
        "inputs",
        "the summaries score wrote, one per responder, in row (bar) order: "
        "results/crystal/{dataset}/scores/{responder}.json",
        many=True,
    ),
    Opt("dataset", "the dataset's name, printed in the caption (title)"),
)


def _k(help: str) -> Arg:
    return Opt("k", help + " (default %(default)s)", type=int, default=DEFAULT_K)


def _tables(stem: str, formats: str = "csv md tex", md: str = "with its caption") -> tuple:
    what = {"csv": "the table to write (CSV)", "md": f"the table as Markdown, {md}", "tex": "the table as LaTeX"}
    return tuple(Out(f, f"{what[f]}: results/tables/{stem}.{f}") for f in formats.split())


STAGES = (
    Stage(
        "build-items",
        "prompts.jsonl (test items) and train.jsonl from a crystal set",
        "crucible.crystal.items:build_item_files",
        (
            *_SET,
            In("inputs", many=True),
            Opt("template", default="composition-v1"),
            *_SPLIT,
            Opt("max_train_items", type=int, default=0),
            Out("out_prompts"),
            Out("out_train"),
        ),
    ),
    Stage(
        "generate",
        "answers of a generator, in the LLM response format",
        "crucible.crystal.generators:write_generator_answers",
        (*_GENERATOR, Out("out"), Out("out_info")),
    ),
    Stage(
        "score",
        "OpenCompass MP-20 scoring of one response file",
        "crucible.crystal.report:score_response_file",
        (_PROMPTS, In("responses"), Opt("generator"), *_SCORING, _TIMEOUT, Out("out"), Out("out_summary")),
    ),
    Stage(
        "sample",
        "k samples per item of a generator (a samples file for score-samples)",
        "crucible.crystal.samples:write_generator_samples",
        (
            *_GENERATOR,
            _k("samples per item, sample 0 being generate's answer; fewer where the generator has fewer candidates"),
            Out("out"),
            Out("out_info"),
        ),
    ),
    Stage(
        "sample-prompts",
        "the prompt set asking a language model for k answers per item",
        "crucible.crystal.samples:write_repeated_prompts",
        (_PROMPTS, _k("copies of each item's prompt, ids {id}#0 .. {id}#k-1"), Out("out")),
    ),
    Stage(
        "score-samples",
        "match rate and RMSE at 1 and k samples, both matcher conventions",
        "crucible.crystal.csp:score_samples_file",
        (
            _PROMPTS,
            In("samples"),
            Opt("format", choices=("auto", *FORMATS), default="auto"),
            Opt("responder"),
            _k("an item's first k samples (lowest sample numbers) count; missing ones are no_response"),
            *_SCORING,
            _TIMEOUT,
            Out("out"),
            Out("out_summary"),
        ),
    ),
    Stage(
        "audit",
        "duplicates, train/test leakage and distinct prompts of a crystal set",
        "crucible.crystal.audit:run_audit",
        (
            *_SET,
            In("inputs", many=True),
            *_SPLIT,
            Opt("convention", choices=CONVENTION_NAMES, default=DEFAULT_CONVENTION),
            Opt("max_comparisons", type=int, default=DEFAULT_MAX_COMPARISONS),
            Opt("workers", type=int, default=1),
            _TIMEOUT,
            Out("out_items"),
            Out("out_summary"),
            *_tables("crystal_{dataset}_audit", "csv md"),
        ),
    ),
    Stage(
        "csp-table",
        "the CSP table: ours beside the published rows",
        "crucible.crystal.csp_table:write_csp_table_from_files",
        (
            In("inputs", many=True),
            In("published", default="config/published_crystal.yaml"),
            *_tables("crystal_csp", md="with its caption and sources"),
        ),
    ),
    Stage(
        "table",
        "generator x match rate, RMS, failures",
        "crucible.crystal.report:write_table_from_files",
        (*_SUMMARIES, *_tables("crystal_{dataset}")),
    ),
    Stage(
        "figure",
        "match rate by number of sites, per generator",
        "crucible.crystal.report:write_match_rate_figure",
        (*_SUMMARIES, Out("out_png"), Out("out_pdf")),
    ),
)
