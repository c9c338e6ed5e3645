"""Reaction-condition selection benchmark (RxnOptBench semantics) from real high-throughput tables.

Stages, each a module: :mod:`data` (clean a raw table), :mod:`questions` (multiple-choice and
fill-in-blank question files), :mod:`prompts` (prompts for language models and the parser of
their answers), :mod:`baselines` (registered non-LLM models), :mod:`scoring` (RxnOptBench's
metrics), :mod:`report` (tables, figures, the self-contained package), :mod:`workflow` (target
lists for the Snakefile).
"""
