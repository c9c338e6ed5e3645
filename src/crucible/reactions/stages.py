"""``crucible reactions ...``: clean, build questions, predict, parse LLM responses, score, report."""

from __future__ import annotations

from crucible.stage import In, Opt, Out, Stage, json_value

_QUESTIONS = In("questions", "question files (RxnOptBench schema)", many=True)
_DATA = In("data", "the clean table: results/reactions/data/{dataset}.parquet")
_CARD = In("card", "its card: results/reactions/data/{dataset}.json")
_PER_QUESTIONS = "prediction files to write, one per questions file, same order"

STAGES = (
    Stage(
        "clean",
        "raw high-throughput table -> clean parquet + card",
        "crucible.reactions.data:clean",
        (
            Opt("dataset", "the dataset's name, e.g. buchwald-hartwig (or a key of reactions.user_datasets)"),
            In("input", "the raw CSV (a built-in dataset's is checked against its pin)"),
            Opt("custom", "JSON of config reactions.user_datasets, for a user table", type=json_value, default=None),
            Out("out", "the clean table to write: results/reactions/data/{dataset}.parquet"),
            Out("out_card", "the card to write: results/reactions/data/{dataset}.json"),
        ),
    ),
    Stage(
        "build",
        "clean table -> question files (RxnOptBench schema) + prompts.jsonl",
        "crucible.reactions.questions:write_question_files",
        (
            _DATA,
            _CARD,
            Opt(
                "params",
                "JSON: n_options, seed, n_references, reference_quantile, cross_references",
                type=json_value,
                default=None,
            ),
            Opt("system_prompt", "system prompt of every prompt (default: none)", default=None),
            Opt("types", "question types to build, e.g. single_varying all_varying", many=True),
            Out(
                "out_questions",
                "question files to write, one per --types entry: .../{question_type}/questions.json",
                many=True,
                per="types",
            ),
            Out(
                "out_prompts",
                "prompt files to write, one per --types entry: .../{question_type}/prompts.jsonl",
                many=True,
                per="types",
            ),
            Out(
                "out_summary",
                "the build record to write (counts per type, parameters): results/reactions/{dataset}/build.json",
            ),
        ),
    ),
    Stage(
        "predict",
        "a registered baseline answers question files",
        "crucible.reactions.predict:write_baseline_predictions",
        (
            Opt("model", "registered baseline: random, popularity, nearest-substrate, yield-model, oracle"),
            Opt("params", "JSON of model parameters", type=json_value, default=None),
            _DATA,
            _CARD,
            _QUESTIONS,
            Out("out", _PER_QUESTIONS, many=True, per="questions"),
        ),
        omp_threads=True,
    ),
    Stage(
        "parse",
        "an LLM's responses/{model}.jsonl files -> predictions",
        "crucible.reactions.prompts:write_response_predictions",
        (
            Opt("model", "the language model's name (config llm.models)"),
            _QUESTIONS,
            In("responses", "one per questions file, same order", many=True, per="questions"),
            Out("out", _PER_QUESTIONS, many=True, per="questions"),
        ),
    ),
    Stage(
        "score",
        "RxnOptBench metrics of prediction files (RxnOptBench's own files too)",
        "crucible.reactions.scoring:write_scores",
        (
            Opt("dataset", "dataset name recorded in the scores (default: none)", default=""),
            Opt("model", "model name recorded in the scores (default: none)", default=""),
            _QUESTIONS,
            In("predictions", "prediction files, one per questions file, same order", many=True, per="questions"),
            Out("out", "the scores JSON to write"),
        ),
    ),
    Stage(
        "report",
        "per-dataset table, paired table and figure",
        "crucible.reactions.report:write_report_files",
        (
            Opt("dataset", "the dataset's name (titles and captions)"),
            In("scores", "scores JSONs results/reactions/{dataset}/scores/{model}.json, one per model", many=True),
            Opt("bootstrap", "bootstrap resamples of the 95 %% intervals (default 1000)", type=int, default=1000),
            Opt("seed", "seed of the bootstrap (default 0)", type=int, default=0),
            *(
                Out(f"out_{name}", f"{what}, {name.removeprefix('paired_').upper()}")
                for name, what in [(n, "the table") for n in ("csv", "md", "tex")]
                + [(f"paired_{n}", "the paired with/without-reference table") for n in ("csv", "md", "tex")]
            ),
            Out("out_figure", "png and/or pdf paths", many=True),
        ),
    ),
    Stage(
        "package",
        "RxnOptBench's self-contained directory for one dataset",
        "crucible.reactions.report:write_package_files",
        (
            Opt("dataset", "the dataset's name"),
            In("questions", "question files to copy into the package", many=True),
            In("card", "the dataset's card: results/reactions/data/{dataset}.json"),
            In("summary", "the build record: results/reactions/{dataset}/build.json"),
            In("table", "the dataset's results table (CSV) for the package's report.md"),
            Out("out_dir", "the package directory to write"),
        ),
    ),
)
