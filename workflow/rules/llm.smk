# Language-model inference (rule family llm_generate): results/{benchmark}/{dataset}/prompts.jsonl
# -> results/{benchmark}/{dataset}/responses/{model}.jsonl + the record {model}.json.
# Any benchmark that writes a prompt set and asks for crucible.llm.workflow.response_targets(...)
# gets its responses from here; scorers read only the response files.
# The job reads the model's entry from the config files by name (never on the command line,
# which Snakemake prints and records); the entry's hash is a param, so editing it reruns exactly
# that model's jobs; answers already in the response cache (results/llm/cache/) are not asked again.
# transformers models run in generate_llm_responses_neural (gpu=1: the SLURM profile sends it to the
# GPU partition); openai and replay models need no GPU and run in generate_llm_responses.
# Own wildcard names (llm_*) so that no family's global constraints apply.
from crucible.stages import declaration as stage
from crucible.llm import workflow as llm_workflow


rule generate_llm_responses:
    input:
        prompts="results/{llm_benchmark}/{llm_dataset}/prompts.jsonl",
        replay_file=lambda wc: llm_workflow.replay_input(config, wc.llm_model, wc.llm_benchmark, wc.llm_dataset),
    output:
        responses="results/{llm_benchmark}/{llm_dataset}/responses/{llm_model}.jsonl",
        record="results/{llm_benchmark}/{llm_dataset}/responses/{llm_model}.json",
    log:
        "logs/llm/{llm_benchmark}/{llm_dataset}/{llm_model}.log",
    benchmark:
        "benchmarks/runs/llm/{llm_benchmark}/{llm_dataset}/{llm_model}.tsv"
    wildcard_constraints:
        **llm_workflow.wildcard_constraints(config, ["openai", "replay"]),
    conda:
        "../../envs/llm.yaml"
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: 2000 * attempt,
        runtime=lambda wc, attempt: 240 * attempt,
    params:
        model_sha256=lambda wc: llm_workflow.model_sha256(config, wc.llm_model),
        config_files=llm_workflow.config_file_flags(workflow.configfiles, workflow.overwrite_configfiles),
        cache_dir=llm_workflow.cache_dir(config),
    shell:
        stage.shell(
            "llm generate",
            model="{wildcards.llm_model:q}",
            config_file="{params.config_files}",
            model_spec=None,
            out="{output.responses:q}",
            out_record="{output.record:q}",
        )


use rule generate_llm_responses as generate_llm_responses_neural with:
    wildcard_constraints:
        **llm_workflow.wildcard_constraints(config, ["transformers"]),
    threads: 4
    resources:
        gpu=1,
        mem_mb=lambda wc, attempt: 32000 * attempt,
        runtime=lambda wc, attempt: 240 * attempt,
