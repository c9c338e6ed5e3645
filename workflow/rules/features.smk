# Shared composition features: every distinct formula of the configured tasks featurized once.
# The output name carries the featurizer version (matminer, element tables, our code), so a
# change there makes a new cache file rather than reusing stale numbers.


rule build_magpie_cache:
    input:
        matbench_wf.feature_data_files(config),
    output:
        cache=matbench_wf.magpie_cache(),
        # each task's rows of the cache (same --data order), so fold jobs read only their task's
        slices=matbench_wf.magpie_slices(config),
    log:
        "logs/features/build_magpie_cache.log",
    benchmark:
        "benchmarks/runs/features/build_magpie_cache.tsv"
    conda:
        "../../envs/matbench.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=20,
    shell:
        "crucible features build --data {input:q} --out {output.cache:q} --out-slices {output.slices:q} 2> {log:q}"


# Structure features (issue 16): every distinct structure featurized once, keyed by its
# canonical hash; the version in the name changes with the featurizer.
rule build_structure_cache:
    input:
        matbench_wf.structure_data_files(config),
    output:
        matbench_wf.scm_cache(),
    log:
        "logs/features/build_structure_cache.log",
    benchmark:
        "benchmarks/runs/features/build_structure_cache.tsv"
    conda:
        "../../envs/matbench.yaml"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 60 * attempt,
    shell:
        "crucible features build-structures --data {input:q} --out {output:q} 2> {log:q}"


# Pretrained-potential embeddings: a GPU job on a cluster (runs on the CPU when there is none).
rule build_mlip_embeddings:
    input:
        matbench_wf.structure_data_files(config),
    output:
        matbench_wf.embedding_cache(),
    log:
        "logs/features/build_mlip_embeddings.log",
    benchmark:
        "benchmarks/runs/features/build_mlip_embeddings.tsv"
    conda:
        "../../envs/mlip.yaml"
    threads: 2
    resources:
        gpu=1,
        mem_mb=lambda wildcards, attempt: 8000 * attempt,
        runtime=lambda wildcards, attempt: 120 * attempt,
    shell:
        "crucible features build-embeddings --model chgnet-0.3.0 --data {input:q} --threads {threads} "
        "--out {output:q} 2> {log:q}"
