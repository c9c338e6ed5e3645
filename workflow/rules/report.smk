# Scores, matbench's results file, and the paper's tables and figures.


rule score_matbench:
    input:
        predictions=get_fold_predictions,
        data="results/matbench/data/{task}.parquet",
        card="results/matbench/data/{task}.json",
        folds="results/matbench/folds/{task}.parquet",
    output:
        "results/matbench/scores/{model}/{task}.json",
    params:
        version=CRUCIBLE_VERSION,
    log:
        "logs/matbench/score/{model}/{task}.log",
    benchmark:
        "benchmarks/runs/matbench/score/{model}/{task}.tsv"
    conda:
        "../../envs/matbench.yaml"
    shell:
        "crucible matbench score --task {wildcards.task} --card {input.card:q} --model {wildcards.model:q} "
        "--predictions {input.predictions:q} --folds {input.folds:q} --data {input.data:q} --out {output:q} 2> {log:q}"


rule matbench_results_file:
    input:
        predictions=get_model_predictions,
        data=get_clean_data_files(),
        folds=expand("results/matbench/folds/{task}.parquet", task=TASKS),
    output:
        results="results/matbench/{model}/results.json.gz",
        info="results/matbench/{model}/info.json",
    params:
        tasks=TASKS,
        version=CRUCIBLE_VERSION,
    log:
        "logs/matbench/results_file/{model}.log",
    conda:
        "../../envs/matbench.yaml"
    shell:
        "crucible matbench results-file --model {wildcards.model:q} --tasks {params.tasks} "
        "--predictions-root results/matbench/predictions --folds-root results/matbench/folds "
        "--data-root results/matbench/data --out {output.results:q} --info-out {output.info:q} 2> {log:q}"


rule matbench_leaderboard:
    input:
        scores=expand("results/matbench/scores/{model}/{task}.json", model=MODELS, task=TASKS),
        published=get_published_table(),
    output:
        csv=report("results/tables/matbench_leaderboard.csv", caption="../report/leaderboard.rst", category="Matbench"),
        md="results/tables/matbench_leaderboard.md",
        tex="results/tables/matbench_leaderboard.tex",
        folds=report("results/tables/matbench_folds.csv", caption="../report/folds.rst", category="Matbench"),
        png=report("results/figures/matbench_scaled_error.png", caption="../report/scaled_error.rst", category="Matbench"),
        pdf="results/figures/matbench_scaled_error.pdf",
    log:
        "logs/matbench/leaderboard.log",
    conda:
        "../../envs/matbench.yaml"
    shell:
        "crucible matbench leaderboard --scores {input.scores:q} --published {input.published:q} "
        "--csv {output.csv:q} --md {output.md:q} --tex {output.tex:q} --folds-csv {output.folds:q} "
        "--figure-png {output.png:q} --figure-pdf {output.pdf:q} 2> {log:q}"


rule matbench_model_figure:
    input:
        predictions=get_fold_predictions,
        data="results/matbench/data/{task}.parquet",
        card="results/matbench/data/{task}.json",
    output:
        png=report(
            "results/figures/matbench/{model}/{task}.png",
            caption="../report/model_figure.rst",
            category="Matbench",
            subcategory="{model}",
            labels={"model": "{model}", "task": "{task}"},
        ),
        pdf="results/figures/matbench/{model}/{task}.pdf",
    log:
        "logs/matbench/figures/{model}/{task}.log",
    conda:
        "../../envs/matbench.yaml"
    shell:
        "crucible matbench figures --model {wildcards.model:q} --card {input.card:q} --data {input.data:q} "
        "--predictions {input.predictions:q} --png {output.png:q} --pdf {output.pdf:q} 2> {log:q}"


rule matbench:
    input:
        get_matbench_outputs(),


rule matbench_data:
    input:
        expand("results/matbench/folds/{task}.parquet", task=TASKS),
        "results/tables/matbench_tasks.csv",
