"""``crucible reactions ...``: clean, build questions, predict, parse LLM responses, score, report."""

from __future__ import annotations

from crucible.stages.declaration import In, Opt, Out, Stage, json_value

_PER_QUESTIONS = {"many": True, "per": "questions"}

HELP = "reaction-condition selection: clean, questions, baselines, score"  # the group's line in `crucible --help`
STAGES = (
    Stage("clean", "raw high-throughput table -> clean parquet + card", ".data:clean"),
    Stage(
        "build",
        "clean table -> question files (RxnOptBench schema) + prompts.jsonl",
        ".questions:write_question_files",
        Opt("params", type=json_value, default=None),
        Out("out_questions", many=True, per="types"),
        Out("out_prompts", many=True, per="types"),
    ),
    Stage(
        "predict",
        "a registered baseline answers question files",
        ".predict:write_baseline_predictions",
        Out("out", **_PER_QUESTIONS),
        omp_threads=True,
    ),
    Stage(
        "parse",
        "an LLM's responses/{model}.jsonl files -> predictions",
        ".prompts:write_response_predictions",
        In("responses", **_PER_QUESTIONS),
        Out("out", **_PER_QUESTIONS),
    ),
    Stage(
        "score",
        "RxnOptBench metrics of prediction files (RxnOptBench's own files too)",
        ".scoring:write_scores",
        In("predictions", **_PER_QUESTIONS),
    ),
    Stage("report", "per-dataset table, paired table and figure", ".report:write_report_files"),
    Stage("package", "RxnOptBench's self-contained directory for one dataset", ".report:write_package_files"),
)
