# Catalysis benchmark with CatBench semantics: fetch/clean -> K-seed relaxations per
# (dataset, potential, chunk), on the GPU partition for a potential whose spec says gpu ->
# analysis per potential -> tables, workbook, figures. All logic in crucible.catalysis; config
# read only through crucible.catalysis.workflow.
# Relaxation settings and thresholds are params, so changing one reruns exactly what it affects.
from crucible.stages import declaration as stage
from crucible.catalysis import workflow as catalysis_workflow


localrules:
    fetch_catalysis_dataset,


rule fetch_catalysis_dataset:
    output:
        "resources/catalysis/{cat_dataset}/{filename}",
    log:
        "logs/catalysis/fetch_{cat_dataset}_{filename}.log",
    benchmark:
        "benchmarks/runs/catalysis/fetch_{cat_dataset}_{filename}.tsv"
    wildcard_constraints:
        **catalysis_workflow.wildcard_constraints(config),
        filename=r"[^/]+",
    conda:
        "../../envs/fetch.yaml"
    params:
        url=lambda wc: catalysis_workflow.download_url(config, wc.cat_dataset),
        sha256=lambda wc: catalysis_workflow.sha256(config, wc.cat_dataset),
    shell:
        stage.shell("catalysis fetch", dataset="{wildcards.cat_dataset:q}", out="{output:q}")


rule clean_catalysis:
    input:
        lambda wc: catalysis_workflow.raw_input(config, wc.cat_dataset),
    output:
        table="results/catalysis/{cat_dataset}/reactions.parquet",
        db="results/catalysis/{cat_dataset}/structures.db",
        card="results/catalysis/{cat_dataset}/card.json",
        catbench="results/catalysis/{cat_dataset}/{cat_dataset}_adsorption.json",
    log:
        "logs/catalysis/clean_{cat_dataset}.log",
    benchmark:
        "benchmarks/runs/catalysis/clean_{cat_dataset}.tsv"
    wildcard_constraints:
        **catalysis_workflow.wildcard_constraints(config),
    conda:
        "../../envs/mlip.yaml"
    params:
        fmt=lambda wc: catalysis_workflow.dataset_spec(config, wc.cat_dataset)["format"],
        coefficients=lambda wc: catalysis_workflow.coefficients_arg(
            catalysis_workflow.dataset_spec(config, wc.cat_dataset)
        ),
        filtering=lambda wc: catalysis_workflow.dataset_spec(config, wc.cat_dataset)["filtering"],
        tolerance=lambda wc: catalysis_workflow.tolerance(catalysis_workflow.dataset_spec(config, wc.cat_dataset)),
        energy_source=lambda wc: catalysis_workflow.dataset_spec(config, wc.cat_dataset)["energy_source"],
        sha256=lambda wc: catalysis_workflow.sha256(config, wc.cat_dataset),
    shell:
        stage.shell(
            "catalysis clean",
            format="{params.fmt:q}",
            input="{input:q}",
            url=None,
            out="{output.table:q}",
            out_db="{output.db:q}",
            out_card="{output.card:q}",
            out_catbench="{output.catbench:q}",
        )


rule relax_catalysis:
    input:
        reactions=rules.clean_catalysis.output.table,
        db=rules.clean_catalysis.output.db,
        potential=lambda wc: catalysis_workflow.potential_sources(config, wc.cat_model),
    output:
        "results/catalysis/{cat_dataset}/calc/{cat_model}/chunk_{chunk}.json",
    log:
        "logs/catalysis/relax_{cat_dataset}_{cat_model}_{chunk}.log",
    benchmark:
        "benchmarks/runs/catalysis/relax_{cat_dataset}_{cat_model}_{chunk}.tsv"
    wildcard_constraints:
        **catalysis_workflow.wildcard_constraints(config, device="cpu"),
        chunk=r"\d+",
    conda:
        "../../envs/mlip.yaml"
    # One thread: on a GPU node the model runs on CUDA anyway; on CPU, parallel chunks beat
    # oversubscribed intra-op threads (CHGNet: 0.7 s/step with 1 thread, ~8 s with 2, loaded 2-core machine).
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: 6000 * attempt,
        runtime=lambda wc, attempt: 240 * attempt,
    params:
        params=lambda wc: catalysis_workflow.relax_params(config),
        n_chunks=lambda wc: catalysis_workflow.n_chunks(config),
        custom_potentials=lambda wc: catalysis_workflow.custom_potentials(config, wc.cat_model),
    shell:
        stage.shell(
            "catalysis relax",
            model="{wildcards.cat_model:q}",
            device=None,
            chunk="{wildcards.chunk}",
            out="{output:q}",
        )


# Potentials whose spec says gpu: the same job with a GPU request (profiles/slurm: GPU partition).
use rule relax_catalysis as relax_catalysis_neural with:
    wildcard_constraints:
        **catalysis_workflow.wildcard_constraints(config, device="gpu"),
        chunk=r"\d+",
    threads: 1
    resources:
        gpu=1,
        mem_mb=lambda wc, attempt: 6000 * attempt,
        runtime=lambda wc, attempt: 240 * attempt,


rule score_catalysis:
    input:
        inputs=lambda wc: catalysis_workflow.chunk_files(config, wc.cat_dataset, wc.cat_model),
        card="results/catalysis/{cat_dataset}/card.json",
    output:
        analysis="results/catalysis/{cat_dataset}/analysis/{cat_model}.json",
        reactions="results/catalysis/{cat_dataset}/analysis/{cat_model}.parquet",
        anomaly="results/catalysis/{cat_dataset}/analysis/{cat_model}_anomaly_detection.json",
    log:
        "logs/catalysis/score_{cat_dataset}_{cat_model}.log",
    benchmark:
        "benchmarks/runs/catalysis/score_{cat_dataset}_{cat_model}.tsv"
    wildcard_constraints:
        **catalysis_workflow.wildcard_constraints(config),
    conda:
        "../../envs/mlip.yaml"
    params:
        thresholds=lambda wc: catalysis_workflow.thresholds(config),
    shell:
        stage.shell(
            "catalysis score",
            model="{wildcards.cat_model:q}",
            out="{output.analysis:q}",
            out_reactions="{output.reactions:q}",
            out_anomaly="{output.anomaly:q}",
        )


rule tabulate_catalysis:
    input:
        lambda wc: catalysis_workflow.analysis_files(config, wc.cat_dataset),
    output:
        csv=report(
            "results/tables/catalysis_{cat_dataset}.csv", caption="../report/catalysis_table.rst", category="Catalysis"
        ),
        md="results/tables/catalysis_{cat_dataset}.md",
        tex="results/tables/catalysis_{cat_dataset}.tex",
        anomaly=report(
            "results/tables/catalysis_{cat_dataset}_anomaly.csv",
            caption="../report/catalysis_anomaly.rst",
            category="Catalysis",
        ),
        anomaly_md="results/tables/catalysis_{cat_dataset}_anomaly.md",
        anomaly_tex="results/tables/catalysis_{cat_dataset}_anomaly.tex",
        ads=report(
            "results/tables/catalysis_{cat_dataset}_adsorbates.csv",
            caption="../report/catalysis_adsorbates.rst",
            category="Catalysis",
        ),
        ads_md="results/tables/catalysis_{cat_dataset}_adsorbates.md",
        ads_tex="results/tables/catalysis_{cat_dataset}_adsorbates.tex",
        shifted=report(
            "results/tables/catalysis_{cat_dataset}_shifted.csv",
            caption="../report/catalysis_shifted.rst",
            category="Catalysis",
        ),
        shifted_md="results/tables/catalysis_{cat_dataset}_shifted.md",
        shifted_tex="results/tables/catalysis_{cat_dataset}_shifted.tex",
        xlsx=report(
            "results/tables/catalysis_{cat_dataset}.xlsx",
            caption="../report/catalysis_workbook.rst",
            category="Catalysis",
        ),
    log:
        "logs/catalysis/tables_{cat_dataset}.log",
    benchmark:
        "benchmarks/runs/catalysis/tables_{cat_dataset}.tsv"
    wildcard_constraints:
        **catalysis_workflow.wildcard_constraints(config),
    conda:
        "../../envs/mlip.yaml"
    shell:
        stage.shell(
            "catalysis tables",
            inputs="{input:q}",
            out_prefix="results/tables/catalysis_{wildcards.cat_dataset:q}",
            out_xlsx="{output.xlsx:q}",
        )


rule plot_catalysis:
    input:
        inputs=lambda wc: catalysis_workflow.analysis_files(config, wc.cat_dataset),
        reactions=lambda wc: catalysis_workflow.analysis_files(config, wc.cat_dataset, "parquet"),
    output:
        parity=report(
            "results/figures/catalysis_{cat_dataset}_parity.png",
            caption="../report/catalysis_parity.rst",
            category="Catalysis",
        ),
        parity_pdf="results/figures/catalysis_{cat_dataset}_parity.pdf",
        parity_shifted=report(
            "results/figures/catalysis_{cat_dataset}_parity_shifted.png",
            caption="../report/catalysis_parity.rst",
            category="Catalysis",
        ),
        parity_shifted_pdf="results/figures/catalysis_{cat_dataset}_parity_shifted.pdf",
        sensitivity=report(
            "results/figures/catalysis_{cat_dataset}_sensitivity.png",
            caption="../report/catalysis_sensitivity.rst",
            category="Catalysis",
        ),
        sensitivity_pdf="results/figures/catalysis_{cat_dataset}_sensitivity.pdf",
        models=report(
            expand("results/figures/catalysis_{{cat_dataset}}_parity_{m}.png", m=catalysis_workflow.models(config)),
            caption="../report/catalysis_parity.rst",
            category="Catalysis",
        ),
    log:
        "logs/catalysis/figures_{cat_dataset}.log",
    benchmark:
        "benchmarks/runs/catalysis/figures_{cat_dataset}.tsv"
    wildcard_constraints:
        **catalysis_workflow.wildcard_constraints(config),
    conda:
        "../../envs/mlip.yaml"
    shell:
        stage.shell(
            "catalysis figures",
            dataset="{wildcards.cat_dataset:q}",
            out_parity="{output.parity:q} {output.parity_pdf:q}",
            out_parity_shifted="{output.parity_shifted:q} {output.parity_shifted_pdf:q}",
            out_sensitivity="{output.sensitivity:q} {output.sensitivity_pdf:q}",
            out_model_parity="{output.models:q}",
        )


rule compute_relative_energies:
    input:
        tree=lambda wc: catalysis_workflow.dataset_spec(config, wc.rel_dataset, relative=True)["path"],
        potential=lambda wc: catalysis_workflow.potential_sources(config, wc.cat_model),
    output:
        "results/catalysis/relative/{rel_dataset}/{cat_model}.parquet",
    log:
        "logs/catalysis/relative_{rel_dataset}_{cat_model}.log",
    benchmark:
        "benchmarks/runs/catalysis/relative_{rel_dataset}_{cat_model}.tsv"
    wildcard_constraints:
        **catalysis_workflow.wildcard_constraints(config, relative=True, device="cpu"),
    conda:
        "../../envs/mlip.yaml"
    resources:
        mem_mb=lambda wc, attempt: 6000 * attempt,
        runtime=lambda wc, attempt: 60 * attempt,
    params:
        task=lambda wc: catalysis_workflow.dataset_spec(config, wc.rel_dataset, relative=True)["task"],
        coefficients=lambda wc: catalysis_workflow.coefficients_arg(
            catalysis_workflow.dataset_spec(config, wc.rel_dataset, relative=True)
        ),
        custom_potentials=lambda wc: catalysis_workflow.custom_potentials(config, wc.cat_model),
    # no --threads: torch's own choice
    shell:
        stage.shell(
            "catalysis relative",
            input="{input.tree:q}",
            model="{wildcards.cat_model:q}",
            device=None,
            threads=None,
            out="{output:q}",
        )


use rule compute_relative_energies as compute_relative_energies_neural with:
    wildcard_constraints:
        **catalysis_workflow.wildcard_constraints(config, relative=True, device="gpu"),
    resources:
        gpu=1,
        mem_mb=lambda wc, attempt: 6000 * attempt,
        runtime=lambda wc, attempt: 60 * attempt,


rule tabulate_relative_energies:
    input:
        lambda wc: catalysis_workflow.relative_files(config, wc.rel_dataset),
    output:
        csv=report(
            "results/tables/catalysis_{rel_task}_{rel_dataset}.csv",
            caption="../report/catalysis_relative.rst",
            category="Catalysis",
        ),
        md="results/tables/catalysis_{rel_task}_{rel_dataset}.md",
        tex="results/tables/catalysis_{rel_task}_{rel_dataset}.tex",
    log:
        "logs/catalysis/relative_table_{rel_task}_{rel_dataset}.log",
    benchmark:
        "benchmarks/runs/catalysis/relative_table_{rel_task}_{rel_dataset}.tsv"
    wildcard_constraints:
        **catalysis_workflow.wildcard_constraints(config, relative=True),
        rel_task=catalysis_workflow.RELATIVE_TASKS,
    conda:
        "../../envs/mlip.yaml"
    params:
        out_prefix=lambda wc: catalysis_workflow.relative_table_prefix(wc.rel_task, wc.rel_dataset),
    shell:
        stage.shell("catalysis relative-table", task="{wildcards.rel_task:q}", inputs="{input:q}")
