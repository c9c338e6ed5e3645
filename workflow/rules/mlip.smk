# Interatomic potentials: EOS benchmark on the Delta set and s2ef scoring.
# Thin rules: every step is a `crucible mlip ...` command; config reaches them only through
# crucible.mlip.workflow, as params, so that Snakemake's params trigger reruns exactly the jobs
# a config change affects: a new element list or point count reruns every run_eos (and so the
# tables), a new model adds one run_eos and reruns the tables.
# A user's potential (config potentials:) runs through the same rules: its entry is a param and
# its module's file (when it sits beside the project) an input, so changing either reruns its jobs only.
# A rule that runs a potential has a network variant (<rule>_neural, gpu=1, sent to a GPU partition by the
# SLURM profile) for the potentials whose spec says device "gpu"; cpu potentials (emt) run in the
# plain rule and ask for no GPU (crucible.potentials.workflow.potentials_on). The command itself
# uses CUDA when torch sees one, else the CPU.
from crucible.stages import declaration as stage
from crucible.mlip import workflow as mlip_wf
from crucible.potentials import workflow as potentials_wf


rule run_eos:
    input:
        potential=lambda wc: potentials_wf.custom_potential_sources(config, wc.model),
    output:
        "results/mlip/eos/{model}.parquet",
    log:
        "logs/mlip/eos/{model}.log",
    benchmark:
        "benchmarks/runs/mlip/eos_{model}.tsv"
    wildcard_constraints:
        model=mlip_wf.models_on(config, "cpu"),
    conda:
        "../../envs/mlip.yaml"
    threads: 2
    resources:
        mem_mb=lambda wc, attempt: 6000 * attempt,
        runtime=lambda wc, attempt: 60 * attempt,
    params:
        elements=lambda wc: mlip_wf.eos_params(config)["elements"],
        points=lambda wc: mlip_wf.eos_params(config)["points"],
        volume_range=lambda wc: mlip_wf.eos_params(config)["volume_range"],
        custom_potentials=lambda wc: potentials_wf.custom_potential_json(config, wc.model),
        # a results file of an older meaning reruns (the table refuses it)
        eos_format=mlip_wf.eos_format(),
    shell:
        stage.shell(
            "mlip eos",
            model="{wildcards.model:q}",
            device=None,
            volume_range="{params.volume_range}",
            out="{output:q}",
        )


use rule run_eos as run_eos_neural with:
    wildcard_constraints:
        model=mlip_wf.models_on(config, "gpu"),
    threads: 2
    resources:
        gpu=1,
        mem_mb=lambda wc, attempt: 6000 * attempt,
        runtime=lambda wc, attempt: 60 * attempt,


rule tabulate_eos:
    input:
        lambda wc: mlip_wf.eos_files(config),
    output:
        out_csv=report("results/tables/mlip_eos.csv", caption="../report/mlip_eos.rst", category="MLIP"),
        out_md="results/tables/mlip_eos.md",
        out_tex="results/tables/mlip_eos.tex",
    log:
        "logs/mlip/eos_table.log",
    benchmark:
        "benchmarks/runs/mlip/eos_table.tsv"
    conda:
        "../../envs/mlip.yaml"
    shell:
        stage.shell("mlip eos-table", inputs="{input:q}")


rule plot_eos:
    input:
        lambda wc: mlip_wf.eos_files(config),
    output:
        out_png=report("results/figures/mlip_eos_delta.png", caption="../report/mlip_eos_delta.rst", category="MLIP"),
        out_pdf="results/figures/mlip_eos_delta.pdf",
        out_parity_png=report(
            "results/figures/mlip_eos_b0_parity.png", caption="../report/mlip_b0_parity.rst", category="MLIP"
        ),
        out_parity_pdf="results/figures/mlip_eos_b0_parity.pdf",
    log:
        "logs/mlip/eos_figures.log",
    benchmark:
        "benchmarks/runs/mlip/eos_figures.tsv"
    conda:
        "../../envs/mlip.yaml"
    shell:
        stage.shell("mlip eos-figures", inputs="{input:q}")


rule predict_s2ef:
    input:
        # the dataset file itself when it is one, so that editing it reruns the predictions
        frames=lambda wc: mlip_wf.s2ef_input(config, wc.dataset),
        potential=lambda wc: potentials_wf.custom_potential_sources(config, wc.model),
    output:
        "results/mlip/s2ef/{dataset}/{model}.parquet",
    log:
        "logs/mlip/s2ef/{dataset}/{model}.log",
    benchmark:
        "benchmarks/runs/mlip/s2ef_{dataset}_{model}.tsv"
    wildcard_constraints:
        model=mlip_wf.models_on(config, "cpu"),
        dataset=mlip_wf.NAME_PATTERN,
    conda:
        "../../envs/mlip.yaml"
    threads: 2
    resources:
        mem_mb=lambda wc, attempt: 6000 * attempt,
        runtime=lambda wc, attempt: 60 * attempt,
    params:
        source=lambda wc: mlip_wf.s2ef_datasets(config)[wc.dataset],
        custom_potentials=lambda wc: potentials_wf.custom_potential_json(config, wc.model),
    shell:
        stage.shell(
            "mlip s2ef-predict",
            model="{wildcards.model:q}",
            device=None,
            dataset="{params.source:q}",
            out="{output:q}",
        )


use rule predict_s2ef as predict_s2ef_neural with:
    wildcard_constraints:
        model=mlip_wf.models_on(config, "gpu"),
        dataset=mlip_wf.NAME_PATTERN,
    threads: 2
    resources:
        gpu=1,
        mem_mb=lambda wc, attempt: 6000 * attempt,
        runtime=lambda wc, attempt: 60 * attempt,


rule score_s2ef:
    input:
        lambda wc: mlip_wf.s2ef_files(config, wc.dataset),
    output:
        out_csv=report(
            "results/tables/mlip_s2ef_{dataset}.csv",
            caption="../report/mlip_s2ef.rst",
            category="MLIP",
            labels={"dataset": "{dataset}"},
        ),
        out_md="results/tables/mlip_s2ef_{dataset}.md",
        out_tex="results/tables/mlip_s2ef_{dataset}.tex",
    log:
        "logs/mlip/s2ef_table_{dataset}.log",
    benchmark:
        "benchmarks/runs/mlip/s2ef_table_{dataset}.tsv"
    wildcard_constraints:
        dataset=mlip_wf.NAME_PATTERN,
    conda:
        "../../envs/mlip.yaml"
    shell:
        stage.shell("mlip s2ef-table", inputs="{input:q}")
