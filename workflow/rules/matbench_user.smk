# Your own datasets (matbench.user_datasets) through the Matbench protocol: fetch (pinned
# SHA-256) -> clean -> 5 folds (KFold/StratifiedKFold, seed 18012019) -> predict -> score -> table.
# Kept apart from the 13 official tasks: no official n/MAD or split file can check them, and they
# never enter the Matbench results file or leaderboard.
localrules:
    fetch_user_dataset,


rule fetch_user_dataset:
    wildcard_constraints:
        dataset=_alternation(USER_DATASETS),
    output:
        "resources/downloads/user/{dataset}.json.gz",
    params:
        spec=get_user_dataset_spec,
    log:
        "logs/fetch/user/{dataset}.log",
    retries: 2
    conda:
        "../../envs/fetch.yaml"
    shell:
        "crucible matbench user-fetch --dataset {wildcards.dataset:q} --spec {params.spec:q} --out {output:q} 2> {log:q}"


rule clean_user_dataset:
    wildcard_constraints:
        dataset=_alternation(USER_DATASETS),
    input:
        "resources/downloads/user/{dataset}.json.gz",
    output:
        data="results/matbench/user/{dataset}/data.parquet",
        card="results/matbench/user/{dataset}/card.json",
    params:
        spec=get_user_dataset_spec,
        version=CRUCIBLE_VERSION,
    log:
        "logs/matbench/user/{dataset}/clean.log",
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
    conda:
        "../../envs/matbench.yaml"
    shell:
        "crucible matbench user-clean --dataset {wildcards.dataset:q} --spec {params.spec:q} --raw {input:q} "
        "--out-data {output.data:q} --out-card {output.card:q} 2> {log:q}"


rule make_user_folds:
    wildcard_constraints:
        dataset=_alternation(USER_DATASETS),
    input:
        data="results/matbench/user/{dataset}/data.parquet",
        card="results/matbench/user/{dataset}/card.json",
    output:
        "results/matbench/user/{dataset}/folds.parquet",
    params:
        fraction=MATBENCH["inner_validation"]["fraction"],
        seed=MATBENCH["inner_validation"]["seed"],
        version=CRUCIBLE_VERSION,
    log:
        "logs/matbench/user/{dataset}/folds.log",
    conda:
        "../../envs/matbench.yaml"
    shell:
        "crucible matbench user-folds --data {input.data:q} --card {input.card:q} --inner-fraction {params.fraction} "
        "--inner-seed {params.seed} --out {output:q} 2> {log:q}"


rule predict_user_dataset:
    wildcard_constraints:
        dataset=_alternation(USER_DATASETS),
    input:
        data="results/matbench/user/{dataset}/data.parquet",
        card="results/matbench/user/{dataset}/card.json",
        folds="results/matbench/user/{dataset}/folds.parquet",
        features=get_model_features,
        structure_features=get_model_structure_features,
    output:
        predictions="results/matbench/user/{dataset}/predictions/{model}/fold_{fold}.parquet",
        info="results/matbench/user/{dataset}/predictions/{model}/fold_{fold}.json",
    params:
        features=lambda wildcards, input: f"--features {input.features}" if input.features else "",
        structure_features=lambda wildcards, input: (
            f"--structure-features {input.structure_features}" if input.structure_features else ""),
        model_params=get_model_params,
        custom=get_custom_models(),
        version=CRUCIBLE_VERSION,
    log:
        "logs/matbench/user/{dataset}/predict/{model}/fold_{fold}.log",
    benchmark:
        "benchmarks/runs/matbench/user/{dataset}/predict/{model}/fold_{fold}.tsv"
    threads: 1
    resources:
        gpu=lambda wildcards: int(MODEL_KIND[wildcards.model] == "gpu"),
        mem_mb=lambda wildcards, attempt: 3000 * attempt,
        runtime=lambda wildcards, attempt: 60 * attempt,
    conda:
        "../../envs/matbench.yaml"
    shell:
        "crucible matbench user-predict --model {wildcards.model:q} --fold {wildcards.fold} "
        "--data {input.data:q} --card {input.card:q} --folds {input.folds:q} {params.features} "
        "{params.structure_features} --params {params.model_params:q} --custom-models {params.custom:q} "
        "--threads {threads} --out {output.predictions:q} 2> {log:q}"


rule score_user_dataset:
    wildcard_constraints:
        dataset=_alternation(USER_DATASETS),
    input:
        data="results/matbench/user/{dataset}/data.parquet",
        card="results/matbench/user/{dataset}/card.json",
        folds="results/matbench/user/{dataset}/folds.parquet",
        predictions=expand("results/matbench/user/{{dataset}}/predictions/{{model}}/fold_{fold}.parquet", fold=FOLDS),
    output:
        "results/matbench/user/{dataset}/scores/{model}.json",
    log:
        "logs/matbench/user/{dataset}/score/{model}.log",
    conda:
        "../../envs/matbench.yaml"
    shell:
        "crucible matbench user-score --model {wildcards.model:q} --card {input.card:q} --data {input.data:q} "
        "--folds {input.folds:q} --predictions {input.predictions:q} --out {output:q} 2> {log:q}"


rule user_dataset_table:
    wildcard_constraints:
        dataset=_alternation(USER_DATASETS),
    input:
        lambda wildcards: expand("results/matbench/user/{dataset}/scores/{model}.json",
                                 dataset=wildcards.dataset, model=SW.model_names(MATBENCH)),
    output:
        csv=report("results/tables/matbench_user_{dataset}.csv", caption="../report/user_dataset.rst", category="Matbench"),
        md="results/tables/matbench_user_{dataset}.md",
        tex="results/tables/matbench_user_{dataset}.tex",
    log:
        "logs/matbench/user/{dataset}/table.log",
    conda:
        "../../envs/matbench.yaml"
    shell:
        "crucible matbench user-table --scores {input:q} --out-csv {output.csv:q} --out-md {output.md:q} "
        "--out-tex {output.tex:q} 2> {log:q}"
