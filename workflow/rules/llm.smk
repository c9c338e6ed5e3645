# Language-model inference (rule family llm_generate): results/{benchmark}/{dataset}/prompts.jsonl
# -> results/{benchmark}/{dataset}/responses/{model}.jsonl + the record {model}.json.
# Any benchmark that writes a prompt set and asks for crucible.llm.workflow.response_targets(...)
# gets its responses from here; scorers read only the response files.
# The job reads the model's entry from the config files by name (never on the command line,
# which Snakemake prints and records); the entry's hash is a param, so editing it reruns exactly
# that model's jobs; answers already in the response cache (results/llm/cache/) are not asked again.
# transformers models run in generate_llm_responses_gpu (gpu=1: the SLURM profile sends it to the
# GPU partition); openai and replay models need no GPU and run in generate_llm_responses.
# Own wildcard names (llm_*) so that the global constraints of common.smk do not apply.


rule generate_llm_responses:
    input:
        prompts="results/{llm_benchmark}/{llm_dataset}/prompts.jsonl",
        replay=get_llm_replay_input,
    output:
        responses="results/{llm_benchmark}/{llm_dataset}/responses/{llm_model}.jsonl",
        record="results/{llm_benchmark}/{llm_dataset}/responses/{llm_model}.json",
    log:
        "logs/llm/{llm_benchmark}/{llm_dataset}/{llm_model}.log",
    benchmark:
        "benchmarks/runs/llm/{llm_benchmark}/{llm_dataset}/{llm_model}.tsv"
    wildcard_constraints:
        llm_benchmark=r"[A-Za-z0-9][A-Za-z0-9_-]*",
        llm_dataset=r"[A-Za-z0-9][A-Za-z0-9._/-]*",
        llm_model=llm_model_alternation(["openai", "replay"]),
    conda:
        "../../envs/llm.yaml"
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: 2000 * attempt,
        runtime=lambda wc, attempt: 240 * attempt,
    params:
        spec_sha256=lambda wc: get_llm_model_sha256(wc.llm_model),
        config_files=get_llm_config_flags(),
        cache_dir=get_llm_cache_dir(),
        replay=lambda wc, input: get_llm_replay_flag(input.replay),
    shell:
        "crucible llm generate --prompts {input.prompts:q} --model {wildcards.llm_model:q} {params.config_files}"
        " --model-sha256 {params.spec_sha256}"
        " --cache-dir {params.cache_dir:q} {params.replay} --threads {threads} --out {output.responses:q} --out-record {output.record:q}"
        " 2> {log:q}"


use rule generate_llm_responses as generate_llm_responses_gpu with:
    wildcard_constraints:
        llm_benchmark=r"[A-Za-z0-9][A-Za-z0-9_-]*",
        llm_dataset=r"[A-Za-z0-9][A-Za-z0-9._/-]*",
        llm_model=llm_model_alternation(["transformers"]),
    threads: 4
    resources:
        gpu=1,
        mem_mb=lambda wc, attempt: 32000 * attempt,
        runtime=lambda wc, attempt: 240 * attempt,
