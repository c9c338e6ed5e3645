# Shared composition features: every distinct formula of the configured tasks featurized once.
# The output name carries the featurizer version (matminer, element tables, our code), so a
# change there makes a new cache file rather than reusing stale numbers.


rule build_magpie_cache:
    input:
        matbench_wf.clean_data_files(config),
    output:
        matbench_wf.magpie_cache(),
    log:
        "logs/features/build_magpie_cache.log",
    benchmark:
        "benchmarks/runs/features/build_magpie_cache.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=20,
    conda:
        "../../envs/matbench.yaml"
    shell:
        "crucible features build --data {input:q} --out {output:q} 2> {log:q}"
