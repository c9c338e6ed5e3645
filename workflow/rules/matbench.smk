# Matbench v0.1: clean -> folds -> predict (one job per model, task, fold; one per task for cheap
# models) -> score -> results file.
# Thin rules: paths, target lists and params come from crucible.matbench.workflow (raw files and
# their pins: crucible.matbench.raw_files).
from crucible.stages import declaration as stage
from crucible.matbench import raw_files as matbench_raw
from crucible.matbench import workflow as matbench_wf
from crucible.matbench import selection as matbench_sel


localrules:
    fetch_matminer_dataset,


# Matbench's own download when matbench.source is matminer (the composition mirror is a pinned
# artifact of config/sources.yaml, fetched by fetch.smk). Like every download it runs on the
# submit host.
rule fetch_matminer_dataset:
    output:
        "resources/downloads/{task}.json.gz",
    log:
        "logs/fetch/{task}.json.gz.log",
    benchmark:
        "benchmarks/runs/fetch/{task}.json.gz.tsv"
    # no Snakemake retries: the fetch code retries what another try may fix (fetch_artifact)
    retries: 0
    conda:
        "../../envs/fetch.yaml"
    params:
        # where the bytes come from is no rerun trigger (a param taking `output` is derived, as in
        # fetch_artifact); the pin below is
        url_prefix=lambda wc, output: matbench_raw.matminer_url_prefix(config),
        sha256=lambda wc: matbench_raw.matminer_sha256(config, wc.task),
    shell:
        stage.shell(
            "sources fetch",
            artifact=None,
            matminer_task="{wildcards.task:q}",
            sources=None,
            lock=None,
            out="{output:q}",
        )


rule clean_matbench_task:
    input:
        raw=lambda wc: matbench_raw.raw_task_file(config, wc.task),
        metadata=matbench_raw.metadata_file(),
    output:
        data=matbench_wf.data_file("{task}"),
        card=matbench_wf.card_file("{task}"),
    log:
        "logs/matbench/clean/{task}.log",
    benchmark:
        "benchmarks/runs/matbench/clean/{task}.tsv"
    priority: shared_rules.PRIORITY["prepare"]
    conda:
        "../../envs/matbench.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        source=config["matbench"]["source"],
        provenance=lambda wc: matbench_raw.raw_provenance(config, SOURCES, wc.task),
        raw_sha256=lambda wc: matbench_raw.raw_pin(config, SOURCES, wc.task),
    shell:
        stage.shell(
            "matbench clean",
            task="{wildcards.task}",
            source="{params.source}",
            raw_sha256="{params.raw_sha256}",
            artifact="{params.provenance:q}",
            out_data="{output.data:q}",
            out_card="{output.card:q}",
        )


rule make_matbench_folds:
    input:
        data=rules.clean_matbench_task.output.data,
        card=rules.clean_matbench_task.output.card,
        validation=matbench_raw.validation_file(),
    output:
        matbench_wf.folds_file("{task}"),
    log:
        "logs/matbench/folds/{task}.log",
    benchmark:
        "benchmarks/runs/matbench/folds/{task}.tsv"
    priority: shared_rules.PRIORITY["prepare"]
    conda:
        "../../envs/matbench.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        fraction=config["matbench"]["inner_validation"]["fraction"],
        seed=config["matbench"]["inner_validation"]["seed"],
        raw_sha256=lambda wc: matbench_raw.raw_pin(config, SOURCES, wc.task),
    shell:
        stage.shell(
            "matbench folds",
            task="{wildcards.task}",
            raw_sha256="{params.raw_sha256}",
            inner_fraction="{params.fraction}",
            inner_seed="{params.seed}",
            out="{output:q}",
        )


rule tabulate_matbench_tasks:
    input:
        cards=matbench_wf.task_cards(config),
        data=matbench_wf.clean_data_files(config),
    output:
        csv=report(
            matbench_wf.run_file(config, "tables/matbench_tasks.csv"),
            caption="../report/tasks.rst",
            category="Matbench",
        ),
        md=matbench_wf.run_file(config, "tables/matbench_tasks.md"),
        overlap_csv=report(
            matbench_wf.run_file(config, "tables/matbench_task_overlap.csv"),
            caption="../report/task_overlap.rst",
            category="Matbench",
        ),
        overlap_md=matbench_wf.run_file(config, "tables/matbench_task_overlap.md"),
    log:
        f"logs/matbench/{matbench_wf.run_name(config)}/tasks_table.log",
    benchmark:
        f"benchmarks/runs/matbench/{matbench_wf.run_name(config)}/tasks_table.tsv"
    priority: shared_rules.PRIORITY["summarize"]
    conda:
        "../../envs/matbench.yaml"
    shell:
        stage.shell(
            "matbench tasks-table",
            out_csv="{output.csv:q}",
            out_md="{output.md:q}",
            out_overlap_csv="{output.overlap_csv:q}",
            out_overlap_md="{output.overlap_md:q}",
        )


# CPU models. One thread per fold job: folds run in parallel instead. OpenMP gradient boosting
# with 2 threads on a busy 2-core machine ran 35x slower than with 1. On a cluster raise it with
# --set-threads predict_matbench=8. Every other predict rule of the official tasks (per task, GPU)
# is this one with other inputs and outputs (`use rule`), so they all run the same command; a user
# dataset's (matbench_user.smk) runs `user-predict`, the same arguments but the task.
rule predict_matbench:
    input:
        data=rules.clean_matbench_task.output.data,
        card=rules.clean_matbench_task.output.card,
        folds=rules.make_matbench_folds.output[0],
        features=lambda wc: matbench_wf.model_features(config, wc.model, wc.task),
        structure_features=lambda wc: matbench_wf.model_structure_features(config, wc.model, wc.task),
    output:
        predictions=matbench_wf.prediction_file("{model}", "{task}", "{fold}"),
        info=matbench_wf.prediction_info_file("{model}", "{task}", "{fold}"),
    log:
        "logs/matbench/predict/{model}/{task}/fold_{fold}.log",
    benchmark:
        "benchmarks/runs/matbench/predict/{model}/{task}/fold_{fold}.tsv"
    wildcard_constraints:
        model=matbench_sel.cpu_model_pattern(config, "fold"),
    priority: lambda wc: matbench_sel.predict_priority(config, wc.model)
    conda:
        "../../envs/matbench.yaml"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 3000 * attempt,
        runtime=lambda wildcards, attempt: 60 * attempt,
    params:
        fold=lambda wc: wc.fold,
        params=lambda wc: matbench_wf.model_params(config, wc.model),
        custom_models=lambda wc: matbench_wf.custom_model_arg(config, wc.model),
        # the GPU rule's (its input and output of these names): "" leaves them out
        element_table="",
        out_model_dir="",
    shell:
        stage.shell(
            "matbench predict",
            model="{wildcards.model:q}",
            task="{wildcards.task}",
            fold="{params.fold}",
            element_table="{params.element_table:q}",
            out_model_dir="{params.out_model_dir:q}",
            seed=None,
            out="{output.predictions:q}",
        )


# Fits that cost about as much as a job's start-up (dummy everywhere, gbm-magpie on tasks up to
# 20k rows; ModelSpec.task_jobs_up_to): one job fits the task's five folds in turn and writes the
# same per-fold files as predict_matbench. Which rule makes which file: cpu_model_pattern.
use rule predict_matbench as predict_matbench_task with:
    output:
        predictions=matbench_wf.fold_predictions("{model}", "{task}"),
        info=matbench_wf.fold_prediction_infos("{model}", "{task}"),
    log:
        "logs/matbench/predict/{model}/{task}.log",
    benchmark:
        "benchmarks/runs/matbench/predict/{model}/{task}.tsv"
    wildcard_constraints:
        model=matbench_sel.cpu_model_pattern(config, "task"),
    params:
        fold=matbench_wf.fold_numbers(),


# Models that benefit from a GPU: the same job, sent to a GPU partition by profiles/slurm; it
# also keeps the trained weights.
use rule predict_matbench as predict_matbench_neural with:
    input:
        **rules.predict_matbench.input,
        element_table=lambda wc: matbench_wf.element_table(config, wc.model),
    output:
        **rules.predict_matbench.output,
        weights=directory("results/matbench/models/{model}/{task}/fold_{fold}"),
    wildcard_constraints:
        model=shared_rules.alternation(matbench_sel.models_of_kind(config, "gpu")),
    conda:
        "../../envs/torch.yaml"
    threads: 2
    resources:
        gpu=1,
        mem_mb=lambda wildcards, attempt: 8000 * attempt,
        runtime=lambda wildcards, attempt: 120 * attempt,
    params:
        element_table=lambda wildcards, input: input.element_table,
        out_model_dir=lambda wildcards, output: output.weights,


# Predictions made outside crucible: validated like our own, then scored the same way.
rule import_matbench_predictions:
    input:
        predictions=lambda wc: matbench_wf.user_prediction_file(config, wc.model, wc.task, wc.fold),
        data=rules.clean_matbench_task.output.data,
        card=rules.clean_matbench_task.output.card,
        folds=rules.make_matbench_folds.output[0],
    output:
        matbench_wf.prediction_file("{model}", "{task}", "{fold}"),
    log:
        "logs/matbench/import/{model}/{task}/fold_{fold}.log",
    benchmark:
        "benchmarks/runs/matbench/import/{model}/{task}/fold_{fold}.tsv"
    wildcard_constraints:
        model=shared_rules.alternation(matbench_sel.models_of_kind(config, "files")),
    priority: shared_rules.PRIORITY["prepare"]
    conda:
        "../../envs/matbench.yaml"
    shell:
        stage.shell("matbench import-predictions", task="{wildcards.task}", fold="{wildcards.fold}", out="{output:q}")


rule score_matbench:
    input:
        predictions=lambda wc: matbench_wf.fold_predictions(wc.model, wc.task),
        data=rules.clean_matbench_task.output.data,
        card=rules.clean_matbench_task.output.card,
        folds=rules.make_matbench_folds.output[0],
    output:
        "results/matbench/scores/{model}/{task}.json",
    log:
        "logs/matbench/score/{model}/{task}.log",
    benchmark:
        "benchmarks/runs/matbench/score/{model}/{task}.tsv"
    wildcard_constraints:
        model=shared_rules.alternation(matbench_sel.models(config)),
    priority: shared_rules.PRIORITY["summarize"]
    conda:
        "../../envs/matbench.yaml"
    shell:
        stage.shell(
            "matbench score",
            task="{wildcards.task}",
            task_type=None,
            mad=None,
            model="{wildcards.model:q}",
            input_kind=None,
            out="{output:q}",
        )


# Every input named explicitly, so that Snakemake sees what the results file is made from. One
# results file per model and run (its tasks are the run's): results/ or results/runs/<run_name>/.
rule write_matbench_results:
    input:
        predictions=lambda wc: matbench_wf.model_predictions(config, wc.model),
        data=matbench_wf.clean_data_files(config),
        folds=matbench_wf.fold_files(config),
    output:
        results=matbench_wf.results_file(config, "{model}"),
        info=matbench_wf.results_info_file(config, "{model}"),
    log:
        f"logs/matbench/{matbench_wf.run_name(config)}/results_file/{{model}}.log",
    benchmark:
        f"benchmarks/runs/matbench/{matbench_wf.run_name(config)}/results_file/{{model}}.tsv"
    wildcard_constraints:
        model=shared_rules.alternation(matbench_sel.models(config)),
    priority: shared_rules.PRIORITY["summarize"]
    conda:
        "../../envs/matbench.yaml"
    params:
        tasks=matbench_sel.tasks(config),
    shell:
        stage.shell(
            "matbench results-file",
            model="{wildcards.model:q}",
            tasks="{params.tasks}",
            input=None,
            algorithm=None,
            algorithm_long=None,
            authors=None,
            bibtex_refs=None,
            notes=None,
            out_results="{output.results:q}",
            out_info="{output.info:q}",
        )
