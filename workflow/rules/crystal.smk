# Text-to-crystal benchmark: items -> answers of each generator (or language model) -> OpenCompass
# MP-20 scoring -> table and figure per dataset. Thin rules; every decision is in
# crucible.crystal.workflow (pure functions of the config) and the `crucible crystal` CLI.
# Language models' responses/{model}.jsonl come from the LLM inference stage (llm_generate); these
# rules only score them.
from crucible.stages import declaration as stage
from crucible.crystal import workflow as crystal_workflow


rule build_crystal_items:
    input:
        inputs=lambda wc: crystal_workflow.dataset_inputs(config, wc.crystal_dataset),
        templates=str(REPO / "config" / "crystal_prompts.yaml"),
    output:
        prompts="results/crystal/{crystal_dataset}/prompts.jsonl",
        train="results/crystal/{crystal_dataset}/train.jsonl",
    log:
        "logs/crystal/{crystal_dataset}/build_items.log",
    benchmark:
        "benchmarks/runs/crystal/{crystal_dataset}/build_items.tsv"
    wildcard_constraints:
        **crystal_workflow.wildcard_constraints(config),
    conda:
        "../../envs/crystal.yaml"
    params:
        **crystal_workflow.build_params(config),
        source=lambda wc: crystal_workflow.dataset_source(config, wc.crystal_dataset),
    shell:
        stage.shell(
            "crystal build-items",
            dataset="{wildcards.crystal_dataset:q}",
            out_prompts="{output.prompts:q}",
            out_train="{output.train:q}",
        )


rule generate_crystals:
    input:
        **rules.build_crystal_items.output,
        # mlip-search's potential, when it is a user's module beside the project
        potential=lambda wc: crystal_workflow.potential_sources(config, wc.crystal_generator),
    output:
        responses="results/crystal/{crystal_dataset}/responses/{crystal_generator}.jsonl",
        info="results/crystal/{crystal_dataset}/responses/{crystal_generator}.json",
    log:
        "logs/crystal/{crystal_dataset}/generate_{crystal_generator}.log",
    benchmark:
        "benchmarks/runs/crystal/{crystal_dataset}/generate_{crystal_generator}.tsv"
    wildcard_constraints:
        **crystal_workflow.wildcard_constraints(config, device="cpu"),
    conda:
        "../../envs/crystal.yaml"
    resources:
        mem_mb=lambda wc, attempt: 3000 * attempt,
        runtime=lambda wc, attempt: 60 * attempt,
    params:
        params=lambda wc: crystal_workflow.generator_params(config, wc.crystal_generator),
        seed=crystal_workflow.generation_seed(config),
    shell:
        stage.shell(
            "crystal generate",
            generator="{wildcards.crystal_generator:q}",
            out="{output.responses:q}",
            out_info="{output.info:q}",
        )


# Generators that relax candidates with an interatomic potential: a GPU job on a cluster (the
# command uses CUDA when torch sees one, else the CPU).
use rule generate_crystals as generate_crystals_neural with:
    wildcard_constraints:
        **crystal_workflow.wildcard_constraints(config, device="gpu"),
    threads: 2
    resources:
        gpu=1,
        mem_mb=lambda wc, attempt: 8000 * attempt,
        runtime=lambda wc, attempt: 240 * attempt,


rule score_crystals:
    input:
        prompts=rules.build_crystal_items.output.prompts,
        responses="results/crystal/{crystal_dataset}/responses/{responder}.jsonl",
        audit="results/crystal/{crystal_dataset}/audit.json",
    output:
        scores="results/crystal/{crystal_dataset}/scores/{responder}.parquet",
        summary="results/crystal/{crystal_dataset}/scores/{responder}.json",
    log:
        "logs/crystal/{crystal_dataset}/score_{responder}.log",
    benchmark:
        "benchmarks/runs/crystal/{crystal_dataset}/score_{responder}.tsv"
    wildcard_constraints:
        **crystal_workflow.wildcard_constraints(config),
    conda:
        "../../envs/crystal.yaml"
    resources:
        mem_mb=lambda wc, attempt: 3000 * attempt,
        runtime=lambda wc, attempt: 120 * attempt,
    params:
        # the sidecar is optional (a language model's comes from the LLM stage), so it is a
        # param, not an input
        info=lambda wc, input: crystal_workflow.response_info(input.responses),
        timeout=crystal_workflow.score_timeout(config),
    shell:
        stage.shell(
            "crystal score",
            generator="{wildcards.responder:q}",
            out="{output.scores:q}",
            out_summary="{output.summary:q}",
        )


rule tabulate_crystals:
    input:
        inputs=lambda wc: crystal_workflow.score_summaries(config, wc.crystal_dataset),
    output:
        csv=report(
            "results/tables/crystal_{crystal_dataset}.csv",
            caption="../report/crystal_table.rst",
            category="Crystal",
            labels={"dataset": "{crystal_dataset}", "kind": "table"},
        ),
        md="results/tables/crystal_{crystal_dataset}.md",
        tex="results/tables/crystal_{crystal_dataset}.tex",
    log:
        "logs/crystal/{crystal_dataset}/table.log",
    benchmark:
        "benchmarks/runs/crystal/{crystal_dataset}/table.tsv"
    wildcard_constraints:
        **crystal_workflow.wildcard_constraints(config),
    conda:
        "../../envs/crystal.yaml"
    shell:
        stage.shell("crystal table", dataset="{wildcards.crystal_dataset:q}")


rule plot_crystals:
    input:
        inputs=lambda wc: crystal_workflow.score_summaries(config, wc.crystal_dataset),
        chance=lambda wc: crystal_workflow.chance_scores(config, wc.crystal_dataset),
        prompts="results/crystal/{crystal_dataset}/prompts.jsonl",
    output:
        out_png=report(
            "results/figures/crystal_{crystal_dataset}_match_by_nsites.png",
            caption="../report/crystal_figure.rst",
            category="Crystal",
            labels={"dataset": "{crystal_dataset}", "kind": "figure"},
        ),
        out_pdf="results/figures/crystal_{crystal_dataset}_match_by_nsites.pdf",
    log:
        "logs/crystal/{crystal_dataset}/figure.log",
    benchmark:
        "benchmarks/runs/crystal/{crystal_dataset}/figure.tsv"
    wildcard_constraints:
        **crystal_workflow.wildcard_constraints(config),
    conda:
        "../../envs/crystal.yaml"
    shell:
        stage.shell("crystal figure", dataset="{wildcards.crystal_dataset:q}")


# Leakage and duplicate audit of each set (all its splits, before any subsampling): duplicates
# inside and across splits under the matcher, polymorphs, distinct prompts per template; the
# de-duplicated test ids it writes (chosen among the scored items) are scored beside the whole test set.
rule audit_crystal_set:
    input:
        inputs=lambda wc: crystal_workflow.audit_inputs(config, wc.crystal_dataset),
        templates=str(REPO / "config" / "crystal_prompts.yaml"),
    output:
        out_items="results/crystal/{crystal_dataset}/audit.parquet",
        summary="results/crystal/{crystal_dataset}/audit.json",
        csv=report(
            "results/tables/crystal_{crystal_dataset}_audit.csv",
            caption="../report/crystal_audit.rst",
            category="Crystal",
            labels={"dataset": "{crystal_dataset}", "kind": "audit"},
        ),
        md="results/tables/crystal_{crystal_dataset}_audit.md",
    log:
        "logs/crystal/{crystal_dataset}/audit.log",
    benchmark:
        "benchmarks/runs/crystal/{crystal_dataset}/audit.tsv"
    wildcard_constraints:
        **crystal_workflow.wildcard_constraints(config),
    conda:
        "../../envs/crystal.yaml"
    # one matcher process per worker
    threads: crystal_workflow.audit_params(config)["workers"]
    resources:
        mem_mb=lambda wc, attempt: 4000 * attempt,
        runtime=lambda wc, attempt: 240 * attempt,
    params:
        **crystal_workflow.build_params(config),
        **crystal_workflow.audit_params(config),
        source=lambda wc: crystal_workflow.dataset_source(config, wc.crystal_dataset),
        timeout=crystal_workflow.score_timeout(config),
    shell:
        stage.shell("crystal audit", dataset="{wildcards.crystal_dataset:q}", out_summary="{output.summary:q}")


# Crystal structure prediction at k samples per item (crystal.csp): generators draw k candidates,
# language models answer the repeated prompt set (the LLM stage), samples files are read as given.
rule sample_crystals:
    input:
        prompts="results/crystal/{crystal_dataset}/prompts.jsonl",
        train="results/crystal/{crystal_dataset}/train.jsonl",
        # mlip-search's potential, when it is a user's module beside the project
        potential=lambda wc: crystal_workflow.potential_sources(config, wc.crystal_generator),
    output:
        samples="results/crystal/{crystal_dataset}/samples/k{crystal_k}/{crystal_generator}.jsonl",
        info="results/crystal/{crystal_dataset}/samples/k{crystal_k}/{crystal_generator}.json",
    log:
        "logs/crystal/{crystal_dataset}/sample_k{crystal_k}_{crystal_generator}.log",
    benchmark:
        "benchmarks/runs/crystal/{crystal_dataset}/sample_k{crystal_k}_{crystal_generator}.tsv"
    wildcard_constraints:
        **crystal_workflow.wildcard_constraints(config, device="cpu"),
        crystal_k=r"[0-9]+",
    conda:
        "../../envs/crystal.yaml"
    resources:
        mem_mb=lambda wc, attempt: 3000 * attempt,
        runtime=lambda wc, attempt: 240 * attempt,
    params:
        params=lambda wc: crystal_workflow.generator_params(config, wc.crystal_generator),
        seed=crystal_workflow.generation_seed(config),
    shell:
        stage.shell(
            "crystal sample",
            generator="{wildcards.crystal_generator:q}",
            k="{wildcards.crystal_k}",
            out="{output.samples:q}",
            out_info="{output.info:q}",
        )


use rule sample_crystals as sample_crystals_neural with:
    wildcard_constraints:
        **crystal_workflow.wildcard_constraints(config, device="gpu"),
        crystal_k=r"[0-9]+",
    threads: 2
    resources:
        gpu=1,
        mem_mb=lambda wc, attempt: 8000 * attempt,
        runtime=lambda wc, attempt: 480 * attempt,


rule build_crystal_sample_prompts:
    input:
        prompts="results/crystal/{crystal_dataset}/prompts.jsonl",
    output:
        prompts="results/crystal/{crystal_dataset}/k{crystal_k}/prompts.jsonl",
    log:
        "logs/crystal/{crystal_dataset}/sample_prompts_k{crystal_k}.log",
    benchmark:
        "benchmarks/runs/crystal/{crystal_dataset}/sample_prompts_k{crystal_k}.tsv"
    wildcard_constraints:
        **crystal_workflow.wildcard_constraints(config),
        crystal_k=r"[0-9]+",
    conda:
        "../../envs/crystal.yaml"
    shell:
        stage.shell("crystal sample-prompts", k="{wildcards.crystal_k}", out="{output.prompts:q}")


rule score_crystal_samples:
    input:
        prompts="results/crystal/{crystal_dataset}/prompts.jsonl",
        samples=lambda wc: crystal_workflow.samples_input(config, wc.crystal_dataset, wc.responder),
        audit="results/crystal/{crystal_dataset}/audit.json",
    output:
        scores="results/crystal/{crystal_dataset}/csp/{responder}.parquet",
        summary="results/crystal/{crystal_dataset}/csp/{responder}.json",
        # the matches with other items' references (METRe)
        pairs="results/crystal/{crystal_dataset}/csp_pairs/{responder}.parquet",
    log:
        "logs/crystal/{crystal_dataset}/score_csp_{responder}.log",
    benchmark:
        "benchmarks/runs/crystal/{crystal_dataset}/score_csp_{responder}.tsv"
    wildcard_constraints:
        **crystal_workflow.wildcard_constraints(config),
        responder=r"[^/]+",
    conda:
        "../../envs/crystal.yaml"
    # one matcher process per worker (METRe's cross matches)
    threads: crystal_workflow.csp_section(config)["workers"]
    resources:
        mem_mb=lambda wc, attempt: 4000 * attempt,
        runtime=lambda wc, attempt: 480 * attempt,
    params:
        k=crystal_workflow.csp_section(config)["k"],
        format=lambda wc: crystal_workflow.samples_format(config, wc.responder),
        info=lambda wc, input: crystal_workflow.samples_info(input.samples),
        timeout=crystal_workflow.score_timeout(config),
        workers=crystal_workflow.csp_section(config)["workers"],
    shell:
        stage.shell(
            "crystal score-samples",
            responder="{wildcards.responder:q}",
            out="{output.scores:q}",
            out_summary="{output.summary:q}",
            out_pairs="{output.pairs:q}",
            unrelaxed=None,
        )


# Relax-then-match (crystal.csp.relax.potentials): each CSP responder's first k samples relaxed with
# a potential through crucible.potentials.relax, then scored like any samples, the summary keeping
# the scores before relaxation beside its own. A potential whose spec says gpu runs in the _neural rule.
rule relax_crystal_samples:
    input:
        prompts="results/crystal/{crystal_dataset}/prompts.jsonl",
        samples=lambda wc: crystal_workflow.samples_input(config, wc.crystal_dataset, wc.responder),
        # the potential's module, when it is a user's beside the project
        potential_module=lambda wc: crystal_workflow.relax_potential_sources(config, wc.crystal_potential),
    output:
        samples="results/crystal/{crystal_dataset}/relaxed/{crystal_potential}/{responder}.jsonl",
        info="results/crystal/{crystal_dataset}/relaxed/{crystal_potential}/{responder}.json",
    log:
        "logs/crystal/{crystal_dataset}/relax_{crystal_potential}_{responder}.log",
    benchmark:
        "benchmarks/runs/crystal/{crystal_dataset}/relax_{crystal_potential}_{responder}.tsv"
    wildcard_constraints:
        **crystal_workflow.relax_constraints(config, "cpu"),
    conda:
        "../../envs/crystal.yaml"
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: 3000 * attempt,
        runtime=lambda wc, attempt: 240 * attempt,
    params:
        **crystal_workflow.relax_params(config),
        k=crystal_workflow.csp_section(config)["k"],
        format=lambda wc: crystal_workflow.samples_format(config, wc.responder),
        custom_potentials=lambda wc: crystal_workflow.relax_custom_potential(config, wc.crystal_potential),
        timeout=crystal_workflow.score_timeout(config),
    shell:
        stage.shell(
            "crystal relax-samples",
            potential="{wildcards.crystal_potential:q}",
            out="{output.samples:q}",
            out_info="{output.info:q}",
            device=None,
        )


use rule relax_crystal_samples as relax_crystal_samples_neural with:
    wildcard_constraints:
        **crystal_workflow.relax_constraints(config, "gpu"),
    threads: 2
    resources:
        gpu=1,
        mem_mb=lambda wc, attempt: 8000 * attempt,
        runtime=lambda wc, attempt: 480 * attempt,


rule score_relaxed_crystal_samples:
    input:
        prompts="results/crystal/{crystal_dataset}/prompts.jsonl",
        samples="results/crystal/{crystal_dataset}/relaxed/{crystal_potential}/{responder}.jsonl",
        audit="results/crystal/{crystal_dataset}/audit.json",
        unrelaxed="results/crystal/{crystal_dataset}/csp/{responder}.json",
    output:
        scores="results/crystal/{crystal_dataset}/csp_relaxed/{crystal_potential}/{responder}.parquet",
        summary="results/crystal/{crystal_dataset}/csp_relaxed/{crystal_potential}/{responder}.json",
        pairs="results/crystal/{crystal_dataset}/csp_relaxed/{crystal_potential}/pairs/{responder}.parquet",
    log:
        "logs/crystal/{crystal_dataset}/score_csp_{crystal_potential}_{responder}.log",
    benchmark:
        "benchmarks/runs/crystal/{crystal_dataset}/score_csp_{crystal_potential}_{responder}.tsv"
    wildcard_constraints:
        **crystal_workflow.relax_constraints(config),
    conda:
        "../../envs/crystal.yaml"
    threads: crystal_workflow.csp_section(config)["workers"]
    resources:
        mem_mb=lambda wc, attempt: 4000 * attempt,
        runtime=lambda wc, attempt: 480 * attempt,
    params:
        k=crystal_workflow.csp_section(config)["k"],
        format="jsonl",
        info=lambda wc, input: crystal_workflow.samples_info(input.samples),
        timeout=crystal_workflow.score_timeout(config),
        workers=crystal_workflow.csp_section(config)["workers"],
    shell:
        stage.shell(
            "crystal score-samples",
            responder="{wildcards.responder:q}",
            out="{output.scores:q}",
            out_summary="{output.summary:q}",
            out_pairs="{output.pairs:q}",
        )


rule tabulate_crystal_csp:
    input:
        inputs=crystal_workflow.csp_summaries(config),
        published=str(REPO / "config" / "published_crystal.yaml"),
    output:
        csv=report(
            "results/tables/crystal_csp.csv",
            caption="../report/crystal_csp.rst",
            category="Crystal",
            labels={"dataset": "all", "kind": "CSP table"},
        ),
        md="results/tables/crystal_csp.md",
        tex="results/tables/crystal_csp.tex",
    log:
        "logs/crystal/csp_table.log",
    benchmark:
        "benchmarks/runs/crystal/csp_table.tsv"
    conda:
        "../../envs/crystal.yaml"
    shell:
        stage.shell("crystal csp-table")
