# Raw artifacts -> resources/, SHA-256 checked (config/sources.yaml). Downloads need the network,
# so on a cluster they run on the submit host.
localrules:
    fetch_artifact,
    fetch_matminer_dataset,


rule fetch_artifact:
    output:
        "resources/downloads/{filename}",
    wildcard_constraints:
        filename=r"[^/]+\.whl",
    params:
        artifact=get_artifact_name,
        sources=SOURCES_FILE,
    log:
        "logs/fetch/{filename}.log",
    retries: 2
    conda:
        "../../envs/fetch.yaml"
    shell:
        "crucible sources fetch --artifact {params.artifact:q} --sources {params.sources:q} --out {output:q} 2> {log:q}"


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
        "crucible sources fetch --matminer-task {wildcards.task} {params.mirror} --out {output:q} 2> {log:q}"


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
        "crucible sources extract --artifact matbench-0.6 --sources {params.sources:q} "
        "--archive {input:q} --out-dir resources/extracted/matbench-0.6 2> {log:q}"


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
        "crucible sources extract --artifact crabnet-2.0.8 --sources {params.sources:q} "
        "--archive {input:q} --out-dir resources/extracted/crabnet-2.0.8 2> {log:q}"
