# Your own datasets (matbench.user_datasets) through the Matbench protocol: fetch (pinned
# SHA-256) -> clean -> 5 folds (KFold/StratifiedKFold, seed 18012019) -> predict -> score -> table.
# Kept apart from the 13 official tasks: no official n/MAD or split file can check them, and they
# never enter the Matbench results file or leaderboard.

from crucible.stages import declaration as stage


localrules:
    fetch_user_dataset,


rule fetch_user_dataset:
    output:
        "resources/downloads/user/{dataset}.json.gz",
    log:
        "logs/fetch/user/{dataset}.log",
    benchmark:
        "benchmarks/runs/fetch/user/{dataset}.tsv"
    wildcard_constraints:
        dataset=shared_rules.alternation(matbench_sel.user_datasets(config)),
    retries: 2
    conda:
        "../../envs/fetch.yaml"
    params:
        spec=lambda wc: matbench_sel.user_dataset_spec(config, wc.dataset),
    shell:
        stage.shell("matbench user-fetch", dataset="{wildcards.dataset:q}", out="{output:q}")


rule clean_user_dataset:
    input:
        rules.fetch_user_dataset.output[0],
    output:
        data="results/matbench/user/{dataset}/data.parquet",
        card="results/matbench/user/{dataset}/card.json",
    log:
        "logs/matbench/user/{dataset}/clean.log",
    benchmark:
        "benchmarks/runs/matbench/user/{dataset}/clean.tsv"
    wildcard_constraints:
        dataset=shared_rules.alternation(matbench_sel.user_datasets(config)),
    conda:
        "../../envs/matbench.yaml"
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
    params:
        spec=lambda wc: matbench_sel.user_dataset_spec(config, wc.dataset),
    shell:
        stage.shell(
            "matbench user-clean",
            dataset="{wildcards.dataset:q}",
            raw="{input:q}",
            out_data="{output.data:q}",
            out_card="{output.card:q}",
        )


rule make_user_folds:
    input:
        data=rules.clean_user_dataset.output.data,
        card=rules.clean_user_dataset.output.card,
    output:
        "results/matbench/user/{dataset}/folds.parquet",
    log:
        "logs/matbench/user/{dataset}/folds.log",
    benchmark:
        "benchmarks/runs/matbench/user/{dataset}/folds.tsv"
    wildcard_constraints:
        dataset=shared_rules.alternation(matbench_sel.user_datasets(config)),
    conda:
        "../../envs/matbench.yaml"
    params:
        fraction=config["matbench"]["inner_validation"]["fraction"],
        seed=config["matbench"]["inner_validation"]["seed"],
    shell:
        stage.shell(
            "matbench user-folds",
            inner_fraction="{params.fraction}",
            inner_seed="{params.seed}",
            out="{output:q}",
        )


# The official tasks' predict job on a user dataset (one per model and fold), with the dataset's
# own data, folds and feature files; `user-predict` takes the task from the card.
rule predict_user_dataset:
    input:
        data=rules.clean_user_dataset.output.data,
        card=rules.clean_user_dataset.output.card,
        folds=rules.make_user_folds.output[0],
        features=lambda wc: matbench_wf.model_features(config, wc.model, wc.dataset),
        structure_features=lambda wc: matbench_wf.model_structure_features(config, wc.model, wc.dataset),
    output:
        predictions="results/matbench/user/{dataset}/predictions/{model}/fold_{fold}.parquet",
        info="results/matbench/user/{dataset}/predictions/{model}/fold_{fold}.json",
    log:
        "logs/matbench/user/{dataset}/predict/{model}/fold_{fold}.log",
    benchmark:
        "benchmarks/runs/matbench/user/{dataset}/predict/{model}/fold_{fold}.tsv"
    wildcard_constraints:
        dataset=shared_rules.alternation(matbench_sel.user_datasets(config)),
        model=shared_rules.alternation(matbench_sel.cpu_models(config)),
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
        # the GPU rule's input of this name: "" leaves it out
        element_table="",
    shell:
        stage.shell(
            "matbench user-predict",
            model="{wildcards.model:q}",
            fold="{params.fold}",
            element_table="{params.element_table:q}",
            out_model_dir=None,
            seed=None,
            out="{output.predictions:q}",
        )


# GPU models on a user dataset: the same job, sent to a GPU partition by profiles/slurm.
use rule predict_user_dataset as predict_user_dataset_neural with:
    input:
        **rules.predict_user_dataset.input,
        element_table=lambda wc: matbench_wf.element_table(config, wc.model),
    wildcard_constraints:
        dataset=shared_rules.alternation(matbench_sel.user_datasets(config)),
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


rule score_user_dataset:
    input:
        data=rules.clean_user_dataset.output.data,
        card=rules.clean_user_dataset.output.card,
        folds=rules.make_user_folds.output[0],
        predictions=expand(
            "results/matbench/user/{{dataset}}/predictions/{{model}}/fold_{fold}.parquet", fold=matbench_wf.FOLDS
        ),
    output:
        "results/matbench/user/{dataset}/scores/{model}.json",
    log:
        "logs/matbench/user/{dataset}/score/{model}.log",
    benchmark:
        "benchmarks/runs/matbench/user/{dataset}/score/{model}.tsv"
    wildcard_constraints:
        dataset=shared_rules.alternation(matbench_sel.user_datasets(config)),
    conda:
        "../../envs/matbench.yaml"
    shell:
        stage.shell("matbench user-score", model="{wildcards.model:q}", out="{output:q}")


rule tabulate_user_dataset:
    input:
        lambda wc: matbench_wf.user_score_files(config, wc.dataset),
    output:
        csv=report(
            matbench_wf.user_table_file(config, "{dataset}", "csv"),
            caption="../report/user_dataset.rst",
            category="Matbench",
        ),
        md=matbench_wf.user_table_file(config, "{dataset}", "md"),
        tex=matbench_wf.user_table_file(config, "{dataset}", "tex"),
    log:
        f"logs/matbench/{matbench_wf.run_name(config)}/user/{{dataset}}/table.log",
    benchmark:
        f"benchmarks/runs/matbench/{matbench_wf.run_name(config)}/user/{{dataset}}/table.tsv"
    wildcard_constraints:
        dataset=shared_rules.alternation(matbench_sel.user_datasets(config)),
    conda:
        "../../envs/matbench.yaml"
    shell:
        stage.shell(
            "matbench user-table",
            scores="{input:q}",
            out_csv="{output.csv:q}",
            out_md="{output.md:q}",
            out_tex="{output.tex:q}",
        )
