# Matbench v0.1: clean -> folds -> predict (one job per model, task, fold) -> score -> results file.


rule clean_matbench_task:
    input:
        raw=get_raw_task_file,
        metadata=MATBENCH_METADATA,
    output:
        data="results/matbench/data/{task}.parquet",
        card="results/matbench/data/{task}.json",
    params:
        source=MATBENCH["source"],
        provenance=get_raw_provenance,
        raw_sha256=get_raw_pin,
        metadata_sha256=member_pin("matbench-0.6", "matbench_v0.1_dataset_metadata.json"),
        version=CRUCIBLE_VERSION,
    log:
        "logs/matbench/clean/{task}.log",
    benchmark:
        "benchmarks/runs/matbench/clean/{task}.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../../envs/matbench.yaml"
    shell:
        "crucible matbench clean --task {wildcards.task} --source {params.source} --raw {input.raw:q} "
        "--raw-sha256 {params.raw_sha256} --metadata {input.metadata:q} --metadata-sha256 {params.metadata_sha256} "
        "--artifact {params.provenance:q} --out-data {output.data:q} --out-card {output.card:q} 2> {log:q}"


rule make_matbench_folds:
    input:
        data="results/matbench/data/{task}.parquet",
        card="results/matbench/data/{task}.json",
        validation=MATBENCH_VALIDATION,
    output:
        "results/matbench/folds/{task}.parquet",
    params:
        fraction=MATBENCH["inner_validation"]["fraction"],
        seed=MATBENCH["inner_validation"]["seed"],
        raw_sha256=get_raw_pin,
        validation_sha256=member_pin("matbench-0.6", "matbench_v0.1_validation.json"),
        version=CRUCIBLE_VERSION,
    log:
        "logs/matbench/folds/{task}.log",
    benchmark:
        "benchmarks/runs/matbench/folds/{task}.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../../envs/matbench.yaml"
    shell:
        "crucible matbench folds --task {wildcards.task} --data {input.data:q} --card {input.card:q} "
        "--raw-sha256 {params.raw_sha256} --validation {input.validation:q} "
        "--validation-sha256 {params.validation_sha256} --inner-fraction {params.fraction} "
        "--inner-seed {params.seed} --out {output:q} 2> {log:q}"


rule matbench_tasks_table:
    input:
        cards=get_task_cards(),
        data=get_clean_data_files(),
    output:
        csv=report("results/tables/matbench_tasks.csv", caption="../report/tasks.rst", category="Matbench"),
        md="results/tables/matbench_tasks.md",
        overlap_csv=report("results/tables/matbench_task_overlap.csv", caption="../report/task_overlap.rst",
                           category="Matbench"),
        overlap_md="results/tables/matbench_task_overlap.md",
    log:
        "logs/matbench/tasks_table.log",
    benchmark:
        "benchmarks/runs/matbench/tasks_table.tsv"
    conda:
        "../../envs/matbench.yaml"
    shell:
        "crucible matbench tasks-table --cards {input.cards:q} --data {input.data:q} "
        "--out-csv {output.csv:q} --out-md {output.md:q} "
        "--out-overlap-csv {output.overlap_csv:q} --out-overlap-md {output.overlap_md:q} 2> {log:q}"


rule predict_matbench:
    input:
        data="results/matbench/data/{task}.parquet",
        card="results/matbench/data/{task}.json",
        folds="results/matbench/folds/{task}.parquet",
        features=get_model_features,
    output:
        predictions="results/matbench/predictions/{cpu_model}/{task}/fold_{fold}.parquet",
        info="results/matbench/predictions/{cpu_model}/{task}/fold_{fold}.json",
    params:
        features=features_flag,
        model_params=get_model_params,
        custom=get_custom_models(),
        version=CRUCIBLE_VERSION,
    log:
        "logs/matbench/predict/{cpu_model}/{task}/fold_{fold}.log",
    benchmark:
        "benchmarks/runs/matbench/predict/{cpu_model}/{task}/fold_{fold}.tsv"
    # One thread per fold job: folds run in parallel instead. OpenMP gradient boosting with 2
    # threads on a busy 2-core machine ran 35x slower than with 1. On a cluster raise it with
    # --set-threads predict_matbench=8.
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 3000 * attempt,
        runtime=lambda wildcards, attempt: 60 * attempt,
    conda:
        "../../envs/matbench.yaml"
    shell:
        "crucible matbench predict --model {wildcards.cpu_model:q} --task {wildcards.task} "
        "--fold {wildcards.fold} --data {input.data:q} --card {input.card:q} --folds {input.folds:q} "
        "{params.features} --params {params.model_params:q} --custom-models {params.custom:q} "
        "--threads {threads} --out {output.predictions:q} 2> {log:q}"


# Models that benefit from a GPU: same job, sent to a GPU partition by profiles/slurm.
rule predict_matbench_gpu:
    input:
        data="results/matbench/data/{task}.parquet",
        card="results/matbench/data/{task}.json",
        folds="results/matbench/folds/{task}.parquet",
        features=get_model_features,
        element_table=get_element_table,
    output:
        predictions="results/matbench/predictions/{gpu_model}/{task}/fold_{fold}.parquet",
        info="results/matbench/predictions/{gpu_model}/{task}/fold_{fold}.json",
        weights=directory("results/matbench/models/{gpu_model}/{task}/fold_{fold}"),
    params:
        features=features_flag,
        model_params=get_model_params,
        custom=get_custom_models(),
        element_table_pin=get_element_table_pin,
        version=CRUCIBLE_VERSION,
    log:
        "logs/matbench/predict/{gpu_model}/{task}/fold_{fold}.log",
    benchmark:
        "benchmarks/runs/matbench/predict/{gpu_model}/{task}/fold_{fold}.tsv"
    threads: 2
    resources:
        gpu=1,
        mem_mb=lambda wildcards, attempt: 8000 * attempt,
        runtime=lambda wildcards, attempt: 120 * attempt,
    conda:
        "../../envs/torch.yaml"
    shell:
        "crucible matbench predict --model {wildcards.gpu_model:q} --task {wildcards.task} "
        "--fold {wildcards.fold} --data {input.data:q} --card {input.card:q} --folds {input.folds:q} "
        "{params.features} --params {params.model_params:q} --custom-models {params.custom:q} "
        "--element-table {input.element_table:q} {params.element_table_pin} --model-dir {output.weights:q} "
        "--threads {threads} --out {output.predictions:q} 2> {log:q}"


# Predictions made outside crucible: validated like our own, then scored the same way.
rule import_matbench_predictions:
    input:
        predictions=get_prediction_file,
        data="results/matbench/data/{task}.parquet",
        card="results/matbench/data/{task}.json",
        folds="results/matbench/folds/{task}.parquet",
    output:
        "results/matbench/predictions/{files_model}/{task}/fold_{fold}.parquet",
    log:
        "logs/matbench/import/{files_model}/{task}/fold_{fold}.log",
    conda:
        "../../envs/matbench.yaml"
    shell:
        "crucible matbench import-predictions --task {wildcards.task} --fold {wildcards.fold} "
        "--card {input.card:q} --folds {input.folds:q} --predictions {input.predictions:q} --out {output:q} 2> {log:q}"
