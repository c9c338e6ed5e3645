"""``crucible llm ...``: language-model inference on a prompt set.

    crucible llm generate --prompts results/crystal/mp-20/prompts.jsonl --model qwen-vllm \\
        --config-file config/config.yaml --cache-dir results/llm/cache \\
        --out results/crystal/mp-20/responses/qwen-vllm.jsonl --out-record results/crystal/mp-20/responses/qwen-vllm.json

The model reaches the job by name, read from the config files (merged in order, as Snakemake
does); ``--model-sha256`` (the rule passes it) makes sure that it is the entry Snakemake saw.
``--model-spec '{"backend": ...}'`` gives an entry inline, for scripts outside the workflow.
"""

from __future__ import annotations

import argparse


def _cmd_generate(args) -> int:
    from crucible.llm.generate import run_stage
    from crucible.llm.spec import model_entry

    entry = model_entry(args.model, args.model_spec, args.config_file, sha256=args.model_sha256)
    if entry.get("backend") == "transformers":
        from crucible.torch_setup import configure_torch

        # threads: a local checkpoint on CPU otherwise takes every core of a shared node
        configure_torch(args.threads)
    run_stage(
        args.prompts,
        args.model,
        entry,
        out=args.out,
        record=args.out_record,
        cache_dir=None if args.no_cache else args.cache_dir,
        replay_file=args.replay_file,
    )
    return 0


def configure_parser(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("generate", help="answer every prompt of a prompt set with one language model")
    p.add_argument("--prompts", required=True, help="prompts.jsonl ({id, messages, meta} per line)")
    p.add_argument("--model", required=True, help="the model's name under llm.models")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--config-file",
        action="append",
        help="a crucible config.yaml to read llm.models.<model> from; repeated: merged in order, later ones winning",
    )
    src.add_argument("--model-spec", help="the model's config entry as JSON (outside the workflow)")
    p.add_argument("--model-sha256", help="refuse to run unless the entry read has this hash (set by the rule)")
    p.add_argument("--cache-dir", default="results/llm/cache", help="response cache (default: %(default)s)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the response cache")
    p.add_argument("--replay-file", help="replay backend: the {id, response} JSONL (default: the entry's path)")
    p.add_argument("--threads", type=int, help="CPU threads for a local checkpoint (transformers backend)")
    p.add_argument("--out", required=True, help="responses/{model}.jsonl")
    p.add_argument("--out-record", required=True, help="the sidecar JSON record")
    p.set_defaults(func=_cmd_generate)
