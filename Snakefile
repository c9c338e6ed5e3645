# crucible: every table and figure of a materials-ML benchmark paper, rebuilt from raw sources.
#   snakemake --cores all        (profiles/default/ is loaded by itself; SLURM: --workflow-profile profiles/slurm)
# Stages: fetch (SHA-256 checked) -> clean -> folds -> features -> predict -> score -> report.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/fetch.smk"
include: "workflow/rules/matbench.smk"
include: "workflow/rules/features.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/mlip.smk"
include: "workflow/rules/reactions.smk"
include: "workflow/rules/llm.smk"
include: "workflow/rules/catalysis.smk"
include: "workflow/rules/crystal.smk"


rule all:
    default_target: True
    input:
        get_final_output(),
