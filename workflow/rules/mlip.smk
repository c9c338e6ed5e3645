# Interatomic potentials: EOS benchmark on the Delta set and s2ef scoring.
# Thin rules: every step is a `crucible mlip ...` command. Config comes only from config["mlip"]
# through the helpers in common.smk (mlip_models, mlip_eos_params, mlip_s2ef_datasets,
# mlip_s2ef_input, get_mlip_targets), and is passed as params so that Snakemake's params rerun
# trigger reruns exactly the jobs a config change affects: a new element list or point count
# reruns every run_eos (and so the tables), a new model adds one run_eos and reruns the tables.
# Rules that run a potential declare gpu=1 so the SLURM profile can send them to a GPU partition
# (the command itself uses CUDA when torch sees one, else the CPU).


# Own wildcard names (mlip_model, s2ef_dataset) with rule-level constraints: the global `model`
# constraint in common.smk lists the Matbench models only.
_MLIP_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"


rule run_eos:
    wildcard_constraints:
        mlip_model=_MLIP_NAME,
    output:
        "results/mlip/eos/{mlip_model}.parquet",
    params:
        elements=lambda wc: mlip_eos_params()["elements"],
        points=lambda wc: mlip_eos_params()["points"],
        volume_range=lambda wc: mlip_eos_params()["volume_range"],
    log:
        "logs/mlip/eos/{mlip_model}.log",
    benchmark:
        "benchmarks/runs/mlip/eos_{mlip_model}.tsv"
    threads: 2
    resources:
        gpu=1,
        mem_mb=lambda wc, attempt: 6000 * attempt,
        runtime=lambda wc, attempt: 60 * attempt,
    conda:
        "../../envs/mlip.yaml"
    shell:
        "crucible mlip eos --model {wildcards.mlip_model:q} --elements {params.elements:q} --points {params.points}"
        " --volume-range {params.volume_range} --threads {threads} --out {output:q} 2> {log:q}"


rule eos_table:
    input:
        lambda wc: expand("results/mlip/eos/{mlip_model}.parquet", mlip_model=mlip_models()),
    output:
        csv=report("results/tables/mlip_eos.csv", caption="../report/mlip_eos.rst", category="MLIP"),
        md="results/tables/mlip_eos.md",
        tex="results/tables/mlip_eos.tex",
    log:
        "logs/mlip/eos_table.log",
    conda:
        "../../envs/mlip.yaml"
    shell:
        "crucible mlip eos-table --inputs {input:q} --csv {output.csv:q} --md {output.md:q} --tex {output.tex:q} 2> {log:q}"


rule eos_figures:
    input:
        lambda wc: expand("results/mlip/eos/{mlip_model}.parquet", mlip_model=mlip_models()),
    output:
        png=report("results/figures/mlip_eos_delta.png", caption="../report/mlip_eos_delta.rst", category="MLIP"),
        pdf="results/figures/mlip_eos_delta.pdf",
        parity_png=report("results/figures/mlip_eos_b0_parity.png", caption="../report/mlip_b0_parity.rst",
                          category="MLIP"),
        parity_pdf="results/figures/mlip_eos_b0_parity.pdf",
    log:
        "logs/mlip/eos_figures.log",
    conda:
        "../../envs/mlip.yaml"
    shell:
        "crucible mlip eos-figures --inputs {input:q} --out-png {output.png:q} --out-pdf {output.pdf:q}"
        " --parity-png {output.parity_png:q} --parity-pdf {output.parity_pdf:q} 2> {log:q}"


rule s2ef_predict:
    wildcard_constraints:
        mlip_model=_MLIP_NAME,
        s2ef_dataset=_MLIP_NAME,
    input:
        # the dataset file itself when it is one, so that editing it reruns the predictions
        lambda wc: mlip_s2ef_input(wc.s2ef_dataset),
    output:
        "results/mlip/s2ef/{s2ef_dataset}/{mlip_model}.parquet",
    params:
        source=lambda wc: mlip_s2ef_datasets()[wc.s2ef_dataset],
    log:
        "logs/mlip/s2ef/{s2ef_dataset}/{mlip_model}.log",
    benchmark:
        "benchmarks/runs/mlip/s2ef_{s2ef_dataset}_{mlip_model}.tsv"
    threads: 2
    resources:
        gpu=1,
        mem_mb=lambda wc, attempt: 6000 * attempt,
        runtime=lambda wc, attempt: 60 * attempt,
    conda:
        "../../envs/mlip.yaml"
    shell:
        "crucible mlip s2ef-predict --dataset {params.source:q} --model {wildcards.mlip_model:q} --threads {threads}"
        " --out {output:q} 2> {log:q}"


rule s2ef_table:
    wildcard_constraints:
        s2ef_dataset=_MLIP_NAME,
    input:
        lambda wc: expand("results/mlip/s2ef/{s2ef_dataset}/{mlip_model}.parquet", s2ef_dataset=wc.s2ef_dataset, mlip_model=mlip_models()),
    output:
        csv=report("results/tables/mlip_s2ef_{s2ef_dataset}.csv", caption="../report/mlip_s2ef.rst", category="MLIP",
                   labels={"dataset": "{s2ef_dataset}"}),
        md="results/tables/mlip_s2ef_{s2ef_dataset}.md",
        tex="results/tables/mlip_s2ef_{s2ef_dataset}.tex",
    log:
        "logs/mlip/s2ef_table_{s2ef_dataset}.log",
    conda:
        "../../envs/mlip.yaml"
    shell:
        "crucible mlip s2ef-table --inputs {input:q} --csv {output.csv:q} --md {output.md:q} --tex {output.tex:q} 2> {log:q}"
