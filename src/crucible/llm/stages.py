"""``crucible llm ...``: language-model inference on a prompt set.

    crucible llm generate --prompts results/crystal/mp-20/prompts.jsonl --model qwen-vllm \\
        --config-file config/config.yaml --cache-dir results/llm/cache \\
        --out results/crystal/mp-20/responses/qwen-vllm.jsonl --out-record results/crystal/mp-20/responses/qwen-vllm.json

The model reaches the job by name, read from the config files (merged in order, as Snakemake
does); ``--model-sha256`` (the rule passes it) makes sure that it is the entry Snakemake saw.
``--model-spec '{"backend": ...}'`` gives an entry inline, for scripts outside the workflow.
"""

from __future__ import annotations

from crucible.stages.declaration import Arg, Stage

HELP = "language-model inference: prompts.jsonl -> responses/{model}.jsonl"  # the group's line in `crucible --help`
STAGES = (
    Stage(
        "generate",
        "answer every prompt of a prompt set with one language model",
        ".generate:generate_responses",
        Arg("config_file", repeat=True, default=None),
        one_of=(("config_file", "model_spec"),),
    ),
)
