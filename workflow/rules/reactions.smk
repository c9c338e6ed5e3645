# Reaction-condition selection (RxnOptBench semantics) on real high-throughput tables.
# Thin rules calling `crucible reactions ...`; target lists and params come from
# crucible.reactions.workflow (pure functions of the config). Every rule constrains its own rxn_*
# wildcards to the configured names (rxn.wildcard_constraints).
from crucible.stages import declaration as stage
from crucible.reactions import workflow as rxn


rule clean_reactions:
    input:
        lambda wc: rxn.raw_file(config, wc.rxn_dataset),
    output:
        data="results/reactions/data/{rxn_dataset}.parquet",
        card="results/reactions/data/{rxn_dataset}.json",
    log:
        "logs/reactions/clean_{rxn_dataset}.log",
    benchmark:
        "benchmarks/runs/reactions/clean_{rxn_dataset}.tsv"
    wildcard_constraints:
        **rxn.wildcard_constraints(config),
    conda:
        "../../envs/reactions.yaml"
    params:
        custom=lambda wc: rxn.user_dataset(config, wc.rxn_dataset),
    shell:
        stage.shell(
            "reactions clean",
            dataset="{wildcards.rxn_dataset:q}",
            input="{input:q}",
            out="{output.data:q}",
            out_card="{output.card:q}",
        )


rule build_questions:
    input:
        **rules.clean_reactions.output,
    output:
        questions=rxn.questions_files(config, "{rxn_dataset}"),
        prompts=rxn.prompts_files(config, "{rxn_dataset}"),
        summary="results/reactions/{rxn_dataset}/build.json",
    log:
        "logs/reactions/build_{rxn_dataset}.log",
    benchmark:
        "benchmarks/runs/reactions/build_{rxn_dataset}.tsv"
    wildcard_constraints:
        **rxn.wildcard_constraints(config),
    conda:
        "../../envs/reactions.yaml"
    params:
        types=rxn.question_types(config),
        params=rxn.question_params(config),
        system_prompt=rxn.system_prompt(config),
    shell:
        stage.shell(
            "reactions build",
            out_questions="{output.questions:q}",
            out_prompts="{output.prompts:q}",
            out_summary="{output.summary:q}",
        )


rule predict_reactions:
    input:
        **rules.clean_reactions.output,
        questions=lambda wc: rxn.questions_files(config, wc.rxn_dataset),
    output:
        rxn.prediction_files(config, "{rxn_dataset}", "{rxn_baseline}"),
    log:
        "logs/reactions/predict_{rxn_dataset}_{rxn_baseline}.log",
    benchmark:
        "benchmarks/runs/reactions/predict_{rxn_dataset}_{rxn_baseline}.tsv"
    wildcard_constraints:
        **rxn.wildcard_constraints(config),
    conda:
        "../../envs/reactions.yaml"
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: 2000 * attempt,
        runtime=lambda wc, attempt: 30 * attempt,
    params:
        params=lambda wc: rxn.model_params(config, wc.rxn_baseline),
    shell:
        stage.shell("reactions predict", model="{wildcards.rxn_baseline:q}", out="{output:q}")


# Language models: the LLM stage (llm_generate) writes responses/{model}.jsonl beside each prompts.jsonl.
rule parse_reaction_responses:
    input:
        questions=lambda wc: rxn.questions_files(config, wc.rxn_dataset),
        responses=lambda wc: rxn.response_files(config, wc.rxn_dataset, wc.rxn_llm),
    output:
        rxn.prediction_files(config, "{rxn_dataset}", "{rxn_llm}"),
    log:
        "logs/reactions/parse_{rxn_dataset}_{rxn_llm}.log",
    benchmark:
        "benchmarks/runs/reactions/parse_{rxn_dataset}_{rxn_llm}.tsv"
    wildcard_constraints:
        **rxn.wildcard_constraints(config),
    conda:
        "../../envs/reactions.yaml"
    shell:
        stage.shell("reactions parse", model="{wildcards.rxn_llm:q}", out="{output:q}")


rule score_reactions:
    input:
        questions=lambda wc: rxn.questions_files(config, wc.rxn_dataset),
        predictions=lambda wc: rxn.prediction_files(config, wc.rxn_dataset, wc.rxn_model),
    output:
        "results/reactions/{rxn_dataset}/scores/{rxn_model}.json",
    log:
        "logs/reactions/score_{rxn_dataset}_{rxn_model}.log",
    benchmark:
        "benchmarks/runs/reactions/score_{rxn_dataset}_{rxn_model}.tsv"
    wildcard_constraints:
        **rxn.wildcard_constraints(config),
    conda:
        "../../envs/reactions.yaml"
    shell:
        stage.shell(
            "reactions score",
            dataset="{wildcards.rxn_dataset:q}",
            model="{wildcards.rxn_model:q}",
            out="{output:q}",
        )


rule report_reactions:
    input:
        lambda wc: rxn.score_files(config, wc.rxn_dataset),
    output:
        # In the report as CSV, as every family's tables are; the .md and .tex are for papers.
        out_csv=report(
            "results/tables/reactions_{rxn_dataset}.csv",
            caption="../report/reactions_table.rst",
            category="Reactions",
            subcategory="{rxn_dataset}",
        ),
        out_md="results/tables/reactions_{rxn_dataset}.md",
        out_tex="results/tables/reactions_{rxn_dataset}.tex",
        out_paired_csv=report(
            "results/tables/reactions_{rxn_dataset}_paired.csv",
            caption="../report/reactions_paired.rst",
            category="Reactions",
            subcategory="{rxn_dataset}",
        ),
        out_paired_md="results/tables/reactions_{rxn_dataset}_paired.md",
        out_paired_tex="results/tables/reactions_{rxn_dataset}_paired.tex",
        png=report(
            "results/figures/reactions_{rxn_dataset}.png",
            caption="../report/reactions_figure.rst",
            category="Reactions",
            subcategory="{rxn_dataset}",
        ),
        pdf="results/figures/reactions_{rxn_dataset}.pdf",
    log:
        "logs/reactions/report_{rxn_dataset}.log",
    benchmark:
        "benchmarks/runs/reactions/report_{rxn_dataset}.tsv"
    wildcard_constraints:
        **rxn.wildcard_constraints(config),
    conda:
        "../../envs/reactions.yaml"
    params:
        bootstrap=rxn.bootstrap(config)["n"],
        seed=rxn.bootstrap(config)["seed"],
    shell:
        stage.shell(
            "reactions report",
            dataset="{wildcards.rxn_dataset:q}",
            scores="{input:q}",
            out_figure="{output.png:q} {output.pdf:q}",
        )


rule package_reactions:
    input:
        questions=lambda wc: rxn.questions_files(config, wc.rxn_dataset),
        card=rules.clean_reactions.output.card,
        summary=rules.build_questions.output.summary,
        table=rules.report_reactions.output.out_csv,
    output:
        report=report(
            "results/reactions/{rxn_dataset}/package/report.md",
            caption="../report/reactions_package.rst",
            category="Reactions",
            subcategory="{rxn_dataset}",
        ),
    log:
        "logs/reactions/package_{rxn_dataset}.log",
    benchmark:
        "benchmarks/runs/reactions/package_{rxn_dataset}.tsv"
    wildcard_constraints:
        **rxn.wildcard_constraints(config),
    conda:
        "../../envs/reactions.yaml"
    params:
        out_dir=lambda wc: rxn.package_dir(wc.rxn_dataset),
    shell:
        stage.shell("reactions package", dataset="{wildcards.rxn_dataset:q}", out_dir="{params.out_dir:q}")
