"""Language-model inference as a pipeline stage: a prompt set becomes a response file.

One interface for every backend (``generate(prompts, params) -> completions``), chosen by
config (``llm: models: {name: {backend: openai|transformers|replay, ...}}``), with a response
cache under ``results/llm/cache/`` so that reruns send no request whose answer is stored.

Files (the contract shared with the benchmarks):
- ``prompts.jsonl``: ``{"id", "messages": [{"role", "content"}, ...], "meta"}`` per line, sorted by id;
- ``responses/{model}.jsonl``: ``{"id", "response", "error"}`` per prompt, same order;
- ``responses/{model}.json``: the run's record (backend, model id, parameters, counts, time).
"""
