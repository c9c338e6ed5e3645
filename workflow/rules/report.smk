# The paper's Matbench tables and figures. (`snakemake matbench` and `snakemake matbench_data`: the
# aggregate targets the Snakefile makes from crucible.matbench.workflow.FAMILY.)

from crucible.stages import declaration as stage


rule build_matbench_leaderboard:
    input:
        scores=matbench_wf.score_files(config),
        published=matbench_wf.published_table(config, REPO),
        cards=matbench_wf.task_cards(config),
    output:
        csv=report(
            matbench_wf.run_file(config, "tables/matbench_leaderboard.csv"),
            caption="../report/leaderboard.rst",
            category="Matbench",
        ),
        md=matbench_wf.run_file(config, "tables/matbench_leaderboard.md"),
        tex=matbench_wf.run_file(config, "tables/matbench_leaderboard.tex"),
        folds=report(
            matbench_wf.run_file(config, "tables/matbench_folds.csv"),
            caption="../report/folds.rst",
            category="Matbench",
        ),
        png=report(
            matbench_wf.run_file(config, "figures/matbench_scaled_error.png"),
            caption="../report/scaled_error.rst",
            category="Matbench",
        ),
        pdf=matbench_wf.run_file(config, "figures/matbench_scaled_error.pdf"),
    log:
        f"logs/matbench/{matbench_wf.run_name(config)}/leaderboard.log",
    benchmark:
        f"benchmarks/runs/matbench/{matbench_wf.run_name(config)}/leaderboard.tsv"
    priority: shared_rules.PRIORITY["summarize"]
    conda:
        "../../envs/matbench.yaml"
    shell:
        stage.shell(
            "matbench leaderboard",
            out_csv="{output.csv:q}",
            out_md="{output.md:q}",
            out_tex="{output.tex:q}",
            out_folds_csv="{output.folds:q}",
            out_png="{output.png:q}",
            out_pdf="{output.pdf:q}",
        )


rule plot_matbench_model:
    input:
        predictions=lambda wc: matbench_wf.fold_predictions(wc.model, wc.task),
        data=rules.clean_matbench_task.output.data,
        card=rules.clean_matbench_task.output.card,
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
    benchmark:
        "benchmarks/runs/matbench/figures/{model}/{task}.tsv"
    wildcard_constraints:
        model=shared_rules.alternation(matbench_sel.models(config)),
    priority: shared_rules.PRIORITY["summarize"]
    conda:
        "../../envs/matbench.yaml"
    shell:
        stage.shell("matbench figures", model="{wildcards.model:q}", out_png="{output.png:q}", out_pdf="{output.pdf:q}")
