# Reaction-condition selection (RxnOptBench semantics) on real high-throughput tables.
# Thin rules calling `crucible reactions ...`; target lists and params come from
# crucible.reactions.workflow (pure functions of the config).
from crucible.reactions import workflow as rxn

_RXN_DATASETS = rxn.datasets(config)
_RXN_BASELINES = sorted({m for d in _RXN_DATASETS for m in rxn.baselines(config, d)})
_RXN_LLMS = rxn.llm_models(config)


wildcard_constraints:
    rxn_dataset=_alternation(_RXN_DATASETS),
    rxn_baseline=_alternation(_RXN_BASELINES),
    rxn_llm=_alternation(_RXN_LLMS),
    rxn_model=_alternation(_RXN_BASELINES + _RXN_LLMS),
    rxn_qtype=_alternation(rxn.question_types(config)),


rule clean_reactions:
    input:
        _rxn_raw,
    output:
        data="results/reactions/data/{rxn_dataset}.parquet",
        card="results/reactions/data/{rxn_dataset}.json",
    log:
        "logs/reactions/clean_{rxn_dataset}.log",
    conda:
        "../../envs/reactions.yaml"
    params:
        custom=lambda wc: rxn.custom_dataset_arg(config, wc.rxn_dataset),
    shell:
        "crucible reactions clean --dataset {wildcards.rxn_dataset:q} --input {input:q} {params.custom} "
        "--out {output.data:q} --out-card {output.card:q} 2> {log:q}"


rule build_questions:
    input:
        data="results/reactions/data/{rxn_dataset}.parquet",
        card="results/reactions/data/{rxn_dataset}.json",
    output:
        questions=[f"results/reactions/{{rxn_dataset}}/{q}/questions.json" for q in rxn.question_types(config)],
        prompts=[f"results/reactions/{{rxn_dataset}}/{q}/prompts.jsonl" for q in rxn.question_types(config)],
        summary="results/reactions/{rxn_dataset}/build.json",
    log:
        "logs/reactions/build_{rxn_dataset}.log",
    conda:
        "../../envs/reactions.yaml"
    params:
        types=rxn.question_types(config),
        qparams=rxn.question_params(config),
        system=rxn.system_prompt_arg(config),
    shell:
        "crucible reactions build --data {input.data:q} --card {input.card:q} --params {params.qparams:q} "
        "{params.system} --types {params.types} --out-questions {output.questions:q} --out-prompts {output.prompts:q} "
        "--out-summary {output.summary:q} 2> {log:q}"


rule predict_reactions:
    input:
        data="results/reactions/data/{rxn_dataset}.parquet",
        card="results/reactions/data/{rxn_dataset}.json",
        questions=lambda wc: rxn.questions_files(config, wc.rxn_dataset),
    output:
        [f"results/reactions/{{rxn_dataset}}/{q}/predictions/{{rxn_baseline}}.json" for q in rxn.question_types(config)],
    log:
        "logs/reactions/predict_{rxn_dataset}_{rxn_baseline}.log",
    benchmark:
        "benchmarks/runs/reactions/predict_{rxn_dataset}_{rxn_baseline}.tsv"
    conda:
        "../../envs/reactions.yaml"
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: 2000 * attempt,
        runtime=lambda wc, attempt: 30 * attempt,
    params:
        mparams=lambda wc: rxn.model_params(config, wc.rxn_baseline),
    shell:
        "OMP_NUM_THREADS={threads} crucible reactions predict --model {wildcards.rxn_baseline:q} --params {params.mparams:q} "
        "--data {input.data:q} --card {input.card:q} --questions {input.questions:q} --out {output:q} 2> {log:q}"


# Language models: the LLM stage (llm_generate) writes responses/{model}.jsonl beside each prompts.jsonl.
rule parse_reaction_responses:
    input:
        questions=lambda wc: rxn.questions_files(config, wc.rxn_dataset),
        responses=lambda wc: rxn.response_files(config, wc.rxn_dataset, wc.rxn_llm),
    output:
        [f"results/reactions/{{rxn_dataset}}/{q}/predictions/{{rxn_llm}}.json" for q in rxn.question_types(config)],
    log:
        "logs/reactions/parse_{rxn_dataset}_{rxn_llm}.log",
    conda:
        "../../envs/reactions.yaml"
    shell:
        "crucible reactions parse --model {wildcards.rxn_llm:q} --questions {input.questions:q} "
        "--responses {input.responses:q} --out {output:q} 2> {log:q}"


rule score_reactions:
    input:
        questions=lambda wc: rxn.questions_files(config, wc.rxn_dataset),
        predictions=lambda wc: rxn.prediction_files(config, wc.rxn_dataset, wc.rxn_model),
    output:
        "results/reactions/{rxn_dataset}/scores/{rxn_model}.json",
    log:
        "logs/reactions/score_{rxn_dataset}_{rxn_model}.log",
    conda:
        "../../envs/reactions.yaml"
    shell:
        "crucible reactions score --dataset {wildcards.rxn_dataset:q} --model {wildcards.rxn_model:q} "
        "--questions {input.questions:q} --predictions {input.predictions:q} --out {output:q} 2> {log:q}"


rule report_reactions:
    input:
        lambda wc: rxn.score_files(config, wc.rxn_dataset),
    output:
        csv="results/tables/reactions_{rxn_dataset}.csv",
        md=report(
            "results/tables/reactions_{rxn_dataset}.md", caption="../report/reactions_table.rst", category="Reactions"
        ),
        tex="results/tables/reactions_{rxn_dataset}.tex",
        paired_csv="results/tables/reactions_{rxn_dataset}_paired.csv",
        paired_md=report(
            "results/tables/reactions_{rxn_dataset}_paired.md",
            caption="../report/reactions_paired.rst",
            category="Reactions",
        ),
        paired_tex="results/tables/reactions_{rxn_dataset}_paired.tex",
        png=report(
            "results/figures/reactions_{rxn_dataset}.png",
            caption="../report/reactions_figure.rst",
            category="Reactions",
        ),
        pdf="results/figures/reactions_{rxn_dataset}.pdf",
    log:
        "logs/reactions/report_{rxn_dataset}.log",
    conda:
        "../../envs/reactions.yaml"
    params:
        boot=config.get("reactions", {}).get("bootstrap", {}).get("n", 1000),
        seed=config.get("reactions", {}).get("bootstrap", {}).get("seed", 0),
    shell:
        "crucible reactions report --dataset {wildcards.rxn_dataset:q} --scores {input:q} --bootstrap {params.boot} "
        "--seed {params.seed} --out-csv {output.csv:q} --out-md {output.md:q} --out-tex {output.tex:q} "
        "--out-paired-csv {output.paired_csv:q} --out-paired-md {output.paired_md:q} "
        "--out-paired-tex {output.paired_tex:q} --out-figure {output.png:q} {output.pdf:q} 2> {log:q}"


rule package_reactions:
    input:
        questions=lambda wc: rxn.questions_files(config, wc.rxn_dataset),
        card="results/reactions/data/{rxn_dataset}.json",
        summary="results/reactions/{rxn_dataset}/build.json",
        table="results/tables/reactions_{rxn_dataset}.csv",
    output:
        report=report(
            "results/reactions/{rxn_dataset}/package/report.md",
            caption="../report/reactions_package.rst",
            category="Reactions",
        ),
    log:
        "logs/reactions/package_{rxn_dataset}.log",
    conda:
        "../../envs/reactions.yaml"
    params:
        out_dir=lambda wc: f"results/reactions/{wc.rxn_dataset}/package",
    shell:
        "crucible reactions package --dataset {wildcards.rxn_dataset:q} --questions {input.questions:q} "
        "--card {input.card:q} --summary {input.summary:q} --table {input.table:q} "
        "--out-dir {params.out_dir:q} 2> {log:q}"
