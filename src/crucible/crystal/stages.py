"""``crucible crystal ...``: build items, generate answers, score them, tables and figures."""

from __future__ import annotations

from crucible.crystal.data import SOURCES, SPLIT_BY
from crucible.crystal.generators import GENERATORS
from crucible.crystal.samples import DEFAULT_K, FORMATS
from crucible.crystal.scoring import CONVENTION_NAMES, DEFAULT_CONVENTION, DEFAULT_MAX_COMPARISONS, TIMEOUT_S
from crucible.potentials.relax import CELL_FILTERS, OPTIMIZERS
from crucible.stages.declaration import In, Opt, Out, Stage

# build-items and audit read a set the same way (their helps: crucible.crystal.items.build_item_files)
_SET = (Opt("source", choices=SOURCES),)
_SPLIT = (In("templates", default="config/crystal_prompts.yaml"), Opt("split_by", choices=SPLIT_BY, default="random"))
_GENERATOR = (Opt("generator", choices=sorted(GENERATORS)),)
_TIMEOUT = Opt("timeout", type=float, default=TIMEOUT_S)
_K = Opt("k", type=int, default=DEFAULT_K)


def _tables(formats: str = "csv md tex") -> tuple:
    return tuple(Out(f) for f in formats.split())


HELP = "text-to-crystal: items, generators, OpenCompass MP-20 scoring"  # the group's line in `crucible --help`
STAGES = (
    Stage(
        "build-items",
        "prompts.jsonl (test items) and train.jsonl from a crystal set",
        ".items:build_item_files",
        *_SET,
        Opt("template", default="composition-v1"),
        *_SPLIT,
    ),
    Stage(
        "generate",
        "answers of a generator, in the LLM response format",
        ".generators:write_generator_answers",
        *_GENERATOR,
        skip=("progress",),
    ),
    Stage(
        "score",
        "OpenCompass MP-20 scoring of one response file",
        ".report:score_response_file",
        _TIMEOUT,
        skip=("progress",),
    ),
    Stage(
        "sample",
        "k samples per item of a generator (a samples file for score-samples)",
        ".samples:write_generator_samples",
        *_GENERATOR,
        _K,
        skip=("progress",),
    ),
    Stage(
        "sample-prompts",
        "the prompt set asking a language model for k answers per item",
        ".samples:write_repeated_prompts",
        _K,
    ),
    Stage(
        "score-samples",
        "match rate and RMSE at 1 and k samples, both matcher conventions",
        ".csp:score_samples_file",
        Opt("format", choices=("auto", *FORMATS), default="auto"),
        _K,
        _TIMEOUT,
        skip=("progress",),
    ),
    Stage(
        "relax-samples",
        "k samples per item relaxed with an interatomic potential (relax-then-match)",
        ".relaxation:write_relaxed_samples",
        Opt("format", choices=("auto", *FORMATS), default="auto"),
        _K,
        _TIMEOUT,
        Opt("optimizer", choices=OPTIMIZERS, default="FIRE"),
        Opt("cell_filter", choices=tuple(CELL_FILTERS), default="frechet"),
        skip=("progress",),
        # the cell filter's 3x3 matrix functions: a BLAS thread pool per call costs them tenfold
        omp_threads=True,
    ),
    Stage(
        "audit",
        "duplicates, train/test leakage and distinct prompts of a crystal set",
        ".audit:run_audit",
        *_SET,
        *_SPLIT,
        Opt("convention", choices=CONVENTION_NAMES, default=DEFAULT_CONVENTION),
        Opt("max_comparisons", type=int, default=DEFAULT_MAX_COMPARISONS),
        _TIMEOUT,
        *_tables("csv md"),
        skip=("progress", "sources"),
    ),
    Stage(
        "csp-table",
        "the CSP table: ours beside the published rows",
        ".csp_table:write_csp_table_from_files",
        In("published", default="config/published_crystal.yaml"),
        *_tables(),
    ),
    Stage("table", "generator x match rate, RMS, failures", ".report:write_table_from_files", *_tables()),
    Stage("figure", "match rate by number of sites, per generator", ".figures:write_match_rate_figure"),
)
