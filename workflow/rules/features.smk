# Composition and structure features: one file per task table (each official task, and
# user/<name> for each user dataset), built from that table alone, so that a task's features --
# and the predictions made from them -- never change when other tasks join or leave the run.
# The directory carries the featurizer version (matminer, element tables, our code), so a change
# there makes new files rather than reusing stale numbers.
from crucible.stages import declaration as stage


rule build_magpie_features:
    input:
        lambda wc: matbench_wf.feature_source(config, wc.table),
    output:
        matbench_wf.magpie_features("{table}"),
    log:
        "logs/features/magpie/{table}.log",
    benchmark:
        "benchmarks/runs/features/magpie/{table}.tsv"
    wildcard_constraints:
        table=matbench_wf.feature_table_pattern(config),
    priority: shared_rules.PRIORITY["prepare"]
    conda:
        "../../envs/matbench.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=20,
    shell:
        stage.shell("features build", data="{input:q}", out="{output:q}")


# Structure features (issue 16): every distinct structure of the table featurized once, keyed by
# its canonical hash.
rule build_structure_features:
    input:
        lambda wc: matbench_wf.feature_source(config, wc.table),
    output:
        matbench_wf.scm_features("{table}"),
    log:
        "logs/features/scm/{table}.log",
    benchmark:
        "benchmarks/runs/features/scm/{table}.tsv"
    wildcard_constraints:
        table=matbench_wf.structure_table_pattern(config),
    conda:
        "../../envs/matbench.yaml"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 60 * attempt,
    shell:
        stage.shell("features build-structures", data="{input:q}", out="{output:q}")


# Pretrained-potential embeddings: a GPU job on a cluster (runs on the CPU when there is none).
rule build_mlip_embeddings:
    input:
        lambda wc: matbench_wf.feature_source(config, wc.table),
    output:
        matbench_wf.embedding_features("{table}"),
    log:
        "logs/features/mlip-embed/{table}.log",
    benchmark:
        "benchmarks/runs/features/mlip-embed/{table}.tsv"
    wildcard_constraints:
        table=matbench_wf.structure_table_pattern(config),
    conda:
        "../../envs/mlip.yaml"
    threads: 2
    resources:
        gpu=1,
        mem_mb=lambda wildcards, attempt: 8000 * attempt,
        runtime=lambda wildcards, attempt: 120 * attempt,
    shell:
        stage.shell(
            "features build-embeddings",
            data="{input:q}",
            model="chgnet-0.3.0",
            device=None,
            out="{output:q}",
        )
