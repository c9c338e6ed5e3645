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
        (Opt("dataset"), In("input"), Opt("custom", type=json_value, default=None), Out("out"), Out("out_card")),
    ),
    Stage(
        "build",
        "clean table -> question files (RxnOptBench schema) + prompts.jsonl",
        "crucible.reactions.questions:write_question_files",
        (
            _DATA,
            _CARD,
            Opt("params", type=json_value, default=None),
            Opt("system_prompt", default=None),
            Opt("types", many=True),
            Out("out_questions", many=True, per="types"),
            Out("out_prompts", many=True, per="types"),
            Out("out_summary"),
        ),
    ),
    Stage(
        "predict",
        "a registered baseline answers question files",
        "crucible.reactions.predict:write_baseline_predictions",
        (
            Opt("model"),
            Opt("params", type=json_value, default=None),
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
            Opt("model"),
            _QUESTIONS,
            In("responses", many=True, per="questions"),
            Out("out", _PER_QUESTIONS, many=True, per="questions"),
        ),
    ),
    Stage(
        "score",
        "RxnOptBench metrics of prediction files (RxnOptBench's own files too)",
        "crucible.reactions.scoring:write_scores",
        (
            Opt("dataset", default=""),
            Opt("model", default=""),
            _QUESTIONS,
            In("predictions", many=True, per="questions"),
            Out("out"),
        ),
    ),
    Stage(
        "report",
        "per-dataset table, paired table and figure",
        "crucible.reactions.report:write_report_files",
        (
            Opt("dataset"),
            In("scores", many=True),
            Opt("bootstrap", type=int, default=1000),
            Opt("seed", type=int, default=0),
            *(
                Out(f"out_{name}", f"{what}, {name.removeprefix('paired_').upper()}")
                for name, what in [(n, "the table") for n in ("csv", "md", "tex")]
                + [(f"paired_{n}", "the paired with/without-reference table") for n in ("csv", "md", "tex")]
            ),
            Out("out_figure", many=True),
        ),
    ),
    Stage(
        "package",
        "RxnOptBench's self-contained directory for one dataset",
        "crucible.reactions.report:write_package_files",
        (Opt("dataset"), In("questions", many=True), In("card"), In("summary"), In("table"), Out("out_dir")),
    ),
)
