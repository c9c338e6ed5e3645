# Matbench Discovery's diatomics task: each potential's homonuclear dimer curves H…U in the
# leaderboard's prediction format, scored against its PBE curves beside the published rows of its
# model cards (both pinned in config/sources.yaml). Thin rules: every step is a
# `crucible discovery ...` command; config reaches them only through crucible.discovery.workflow.
# The curve rule has a network variant (run_diatomics_neural, gpu=1, sent to a GPU partition by the SLURM
# profile) for the potentials whose spec says gpu; emt and a user's `device: cpu` potential run in
# the plain rule and ask for no GPU.
from crucible.stages import declaration as stage
from crucible.discovery import workflow as discovery_wf
from crucible.potentials import workflow as potentials_wf
from crucible.discovery.phonons import workflow as phonons_wf


rule run_diatomics:
    input:
        potential=lambda wc: potentials_wf.custom_potential_sources(config, wc.potential),
    output:
        discovery_wf.CURVES,
    log:
        "logs/discovery/diatomics/{potential}.log",
    benchmark:
        "benchmarks/runs/discovery/diatomics_{potential}.tsv"
    wildcard_constraints:
        potential=discovery_wf.potentials_on(config, "cpu"),
    conda:
        "../../envs/mlip.yaml"
    # one thread: a two-atom single point is too small to split, and a second torch thread only
    # spins: chgnet-0.3.0 on H…Ca took 35 CPU-s on two threads, 21 on one (80 CPU-s for H…U)
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: 6000 * attempt,
        runtime=lambda wc, attempt: 60 * attempt,
    params:
        elements=lambda wc: discovery_wf.elements(config),
        custom_potentials=lambda wc: potentials_wf.custom_potential_json(config, wc.potential),
        # a curves file of an older meaning reruns
        curves_format=discovery_wf.curves_format(),
    shell:
        stage.shell(
            "discovery curves",
            potential="{wildcards.potential:q}",
            device=None,
            out="{output:q}",
        )


use rule run_diatomics as run_diatomics_neural with:
    wildcard_constraints:
        potential=discovery_wf.potentials_on(config, "gpu"),
    threads: 1
    resources:
        gpu=1,
        mem_mb=lambda wc, attempt: 6000 * attempt,
        runtime=lambda wc, attempt: 60 * attempt,


rule tabulate_diatomics:
    input:
        inputs=lambda wc: discovery_wf.curve_files(config),
        reference=discovery_wf.reference_file(),
        cards=discovery_wf.card_files(),
    output:
        out_csv=report(
            "results/tables/discovery_diatomics.csv", caption="../report/discovery_diatomics.rst", category="Discovery"
        ),
        out_md="results/tables/discovery_diatomics.md",
        out_tex="results/tables/discovery_diatomics.tex",
    log:
        "logs/discovery/diatomics_table.log",
    benchmark:
        "benchmarks/runs/discovery/diatomics_table.tsv"
    conda:
        "../../envs/mlip.yaml"
    shell:
        stage.shell("discovery table")


rule plot_diatomic_curves:
    input:
        curves=discovery_wf.CURVES,
        reference=discovery_wf.reference_file(),
    output:
        out_png=report(
            "results/figures/discovery_diatomics_curves_{potential}.png",
            caption="../report/discovery_diatomics_curves.rst",
            category="Discovery",
            labels={"potential": "{potential}"},
        ),
        out_pdf="results/figures/discovery_diatomics_curves_{potential}.pdf",
    log:
        "logs/discovery/diatomics_curves_{potential}.log",
    benchmark:
        "benchmarks/runs/discovery/diatomics_curves_{potential}.tsv"
    wildcard_constraints:
        potential=discovery_wf.potentials_plotted(config),
    conda:
        "../../envs/mlip.yaml"
    shell:
        stage.shell("discovery curves-figure")


rule plot_diatomics:
    input:
        table=rules.tabulate_diatomics.output.out_csv,
    output:
        out_png=report(
            "results/figures/discovery_diatomics_metrics.png",
            caption="../report/discovery_diatomics_metrics.rst",
            category="Discovery",
        ),
        out_pdf="results/figures/discovery_diatomics_metrics.pdf",
    log:
        "logs/discovery/diatomics_metrics_figure.log",
    benchmark:
        "benchmarks/runs/discovery/diatomics_metrics_figure.tsv"
    conda:
        "../../envs/mlip.yaml"
    shell:
        stage.shell("discovery metrics-figure")


# The discovery scorer: a leaderboard model's published predictions (figshare, pinned by the MD5 and
# size of its card, then by the SHA-256 recorded on the first fetch) scored against the WBM summary.
rule score_stability:
    input:
        wbm_summary=discovery_wf.wbm_summary_file(),
        predictions=lambda wc: discovery_wf.predictions_file(wc.discovery_model),
        card=lambda wc: discovery_wf.card_file(wc.discovery_model),
    output:
        "results/discovery/stability/{discovery_model}.json",
    log:
        "logs/discovery/stability/{discovery_model}.log",
    benchmark:
        "benchmarks/runs/discovery/stability_{discovery_model}.tsv"
    wildcard_constraints:
        discovery_model=discovery_wf.stability_model_pattern(config),
    conda:
        "../../envs/mlip.yaml"
    resources:
        mem_mb=lambda wc, attempt: 3000 * attempt,
    params:
        # a scores file of an older meaning reruns
        scores_format=discovery_wf.scores_format(),
    shell:
        stage.shell(
            "discovery stability",
            model="{wildcards.discovery_model:q}",
            column=None,
            out="{output:q}",
        )


rule tabulate_stability:
    input:
        inputs=lambda wc: discovery_wf.stability_files(config),
        cards=discovery_wf.card_files(),
    output:
        out_csv=report(
            "results/tables/discovery_stability.csv", caption="../report/discovery_stability.rst", category="Discovery"
        ),
        out_md="results/tables/discovery_stability.md",
        out_tex="results/tables/discovery_stability.tex",
    log:
        "logs/discovery/stability_table.log",
    benchmark:
        "benchmarks/runs/discovery/stability_table.tsv"
    conda:
        "../../envs/mlip.yaml"
    shell:
        stage.shell("discovery stability-table")


# Matbench Discovery's phonons task kappa_103 (κ_SRME): per potential and phononDB material a
# relaxation, the second-order forces, the third-order forces in chunks (a job per
# discovery.phonons.chunk_size displacements: a killed chunk is redone alone), then the force
# constants and the Wigner conductivity on CPU threads; per potential the leaderboard's prediction
# file and the scores. Each force rule has a network variant (relax_kappa_neural, kappa_fc2_neural,
# kappa_fc3_neural: gpu=1, the SLURM GPU partition) for the potentials whose spec says gpu; emt and
# a user's `device: cpu` potential run in the plain rules, which ask for no GPU.
rule relax_kappa:
    input:
        structures=phonons_wf.role_file("discovery/phonons/structures"),
        potential=lambda wc: potentials_wf.custom_potential_sources(config, wc.potential),
    output:
        out=phonons_wf.RELAXED,
    log:
        "logs/discovery/phonons/{potential}/{material}/relax.log",
    benchmark:
        "benchmarks/runs/discovery/phonons/{potential}/{material}/relax.tsv"
    wildcard_constraints:
        potential=phonons_wf.potential_pattern(config, "cpu"),
        material=phonons_wf.material_pattern(config),
    conda:
        "../../envs/mlip.yaml"
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: 4000 * attempt,
        runtime=lambda wc, attempt: 30 * attempt,
    params:
        custom_potentials=lambda wc: potentials_wf.custom_potential_json(config, wc.potential),
        # a relaxation file of an older meaning reruns, and everything after it
        phonons_format=phonons_wf.FORMAT,
    shell:
        stage.shell(
            "discovery kappa-relax",
            potential="{wildcards.potential:q}",
            material="{wildcards.material:q}",
            device=None,
        )


use rule relax_kappa as relax_kappa_neural with:
    wildcard_constraints:
        potential=phonons_wf.potential_pattern(config, "gpu"),
        material=phonons_wf.material_pattern(config),
    threads: 1
    resources:
        gpu=1,
        mem_mb=lambda wc, attempt: 4000 * attempt,
        runtime=lambda wc, attempt: 30 * attempt,


rule kappa_fc2:
    input:
        structures=phonons_wf.role_file("discovery/phonons/structures"),
        relaxed=phonons_wf.RELAXED,
    output:
        out=phonons_wf.FC2,
    log:
        "logs/discovery/phonons/{potential}/{material}/fc2.log",
    benchmark:
        "benchmarks/runs/discovery/phonons/{potential}/{material}/fc2.tsv"
    wildcard_constraints:
        potential=phonons_wf.potential_pattern(config, "cpu"),
        material=phonons_wf.material_pattern(config),
    conda:
        "../../envs/mlip.yaml"
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: 6000 * attempt,
        runtime=lambda wc, attempt: 30 * attempt,
    params:
        custom_potentials=lambda wc: potentials_wf.custom_potential_json(config, wc.potential),
    shell:
        stage.shell(
            "discovery kappa-fc2",
            potential="{wildcards.potential:q}",
            material="{wildcards.material:q}",
            device=None,
        )


use rule kappa_fc2 as kappa_fc2_neural with:
    wildcard_constraints:
        potential=phonons_wf.potential_pattern(config, "gpu"),
        material=phonons_wf.material_pattern(config),
    threads: 1
    resources:
        gpu=1,
        mem_mb=lambda wc, attempt: 6000 * attempt,
        runtime=lambda wc, attempt: 30 * attempt,


rule kappa_fc3:
    input:
        structures=phonons_wf.role_file("discovery/phonons/structures"),
        relaxed=phonons_wf.RELAXED,
        fc2=phonons_wf.FC2,
    output:
        out=phonons_wf.FC3,
    log:
        "logs/discovery/phonons/{potential}/{material}/fc3_{chunk}.log",
    benchmark:
        "benchmarks/runs/discovery/phonons/{potential}/{material}/fc3_{chunk}.tsv"
    wildcard_constraints:
        potential=phonons_wf.potential_pattern(config, "cpu"),
        material=phonons_wf.material_pattern(config),
        chunk=r"\d+",
    conda:
        "../../envs/mlip.yaml"
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: 4000 * attempt,
        runtime=lambda wc, attempt: 60 * attempt,
    params:
        chunk_size=phonons_wf.chunk_size(config),
        custom_potentials=lambda wc: potentials_wf.custom_potential_json(config, wc.potential),
    shell:
        stage.shell(
            "discovery kappa-fc3",
            potential="{wildcards.potential:q}",
            material="{wildcards.material:q}",
            chunk="{wildcards.chunk}",
            device=None,
        )


use rule kappa_fc3 as kappa_fc3_neural with:
    wildcard_constraints:
        potential=phonons_wf.potential_pattern(config, "gpu"),
        material=phonons_wf.material_pattern(config),
        chunk=r"\d+",
    threads: 1
    resources:
        gpu=1,
        mem_mb=lambda wc, attempt: 4000 * attempt,
        runtime=lambda wc, attempt: 60 * attempt,


rule kappa_conductivity:
    input:
        structures=phonons_wf.role_file("discovery/phonons/structures"),
        relaxed=phonons_wf.RELAXED,
        fc2=phonons_wf.FC2,
        chunks=lambda wc: phonons_wf.chunk_files(config, wc.potential, wc.material),
    output:
        out=phonons_wf.KAPPA,
    log:
        "logs/discovery/phonons/{potential}/{material}/kappa.log",
    benchmark:
        "benchmarks/runs/discovery/phonons/{potential}/{material}/kappa.tsv"
    wildcard_constraints:
        potential=phonons_wf.potential_pattern(config),
        material=phonons_wf.material_pattern(config),
    conda:
        "../../envs/mlip.yaml"
    # phono3py's ph-ph interaction is OpenMP: the 19³ mesh of MgO is ~6 CPU-min
    threads: 4
    resources:
        mem_mb=lambda wc, attempt: 8000 * attempt,
        runtime=lambda wc, attempt: 120 * attempt,
    shell:
        stage.shell("discovery kappa-conductivity", material="{wildcards.material:q}")


rule score_kappa:
    input:
        inputs=lambda wc: phonons_wf.kappa_files(config, wc.potential),
        reference=phonons_wf.role_file("discovery/phonons/pbe-reference"),
    output:
        out_predictions=phonons_wf.PREDICTIONS,
        out_scores=phonons_wf.SCORES,
    log:
        "logs/discovery/phonons/{potential}_score.log",
    benchmark:
        "benchmarks/runs/discovery/phonons/{potential}_score.tsv"
    wildcard_constraints:
        potential=phonons_wf.potential_pattern(config),
    conda:
        "../../envs/mlip.yaml"
    shell:
        stage.shell("discovery kappa-score", potential="{wildcards.potential:q}")


rule tabulate_kappa:
    input:
        inputs=lambda wc: phonons_wf.scores_files(config),
        cards=discovery_wf.card_files(),
        published_run=phonons_wf.role_file("discovery/phonons/chgnet-published"),
    output:
        out_csv=report(
            "results/tables/discovery_kappa.csv", caption="../report/discovery_kappa.rst", category="Discovery"
        ),
        out_md="results/tables/discovery_kappa.md",
        out_tex="results/tables/discovery_kappa.tex",
        out_materials_csv=report(
            "results/tables/discovery_kappa_materials.csv",
            caption="../report/discovery_kappa_materials.rst",
            category="Discovery",
        ),
        out_materials_md="results/tables/discovery_kappa_materials.md",
    log:
        "logs/discovery/kappa_table.log",
    benchmark:
        "benchmarks/runs/discovery/kappa_table.tsv"
    conda:
        "../../envs/mlip.yaml"
    shell:
        stage.shell("discovery kappa-table")


rule plot_kappa:
    input:
        inputs=lambda wc: phonons_wf.scores_files(config),
    output:
        out_kappa_png=report(
            phonons_wf.KAPPA_FIGURE, caption="../report/discovery_kappa_parity.rst", category="Discovery"
        ),
        out_srme_png=report(phonons_wf.SRME_FIGURE, caption="../report/discovery_kappa_srme.rst", category="Discovery"),
    log:
        "logs/discovery/kappa_figures.log",
    benchmark:
        "benchmarks/runs/discovery/kappa_figures.tsv"
    conda:
        "../../envs/mlip.yaml"
    shell:
        stage.shell("discovery kappa-figures")
