# crucible: every table and figure of a materials-ML benchmark paper, rebuilt from raw sources.
#   snakemake --cores all        (profiles/default/ is loaded by itself; SLURM: --workflow-profile profiles/slurm)
# Stages: fetch (SHA-256 checked) -> clean -> folds -> features -> predict -> score -> report.
# The benchmark families are declared in crucible.dag.families: each brings its rule files and one
# aggregate target named after it (`snakemake reactions`); `rule all` builds every family's targets.
from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

from crucible.core.errors import ConfigError
from crucible.report.front_page import CONFIG_KEY, FrontPage
from crucible.run_summary import run_summary, summary_facts
from crucible.core.yaml_files import check_config_files

min_version("9.0")

# Every config file read strictly before Snakemake reads it (crucible.core.yaml_files): its own loader
# keeps the last of a repeated key, and its merge expands an alias bomb for minutes. The
# --configfile files are among them (Snakemake merged them already, but a repeated key is only
# seen here; the workflow profiles read them before that merge, which a bomb of mappings hangs).
try:
    check_config_files(["config/config.yaml", *workflow.overwrite_configfiles])
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/fetch.smk"


# The report's front page (workflow/report/workflow.rst prints it): every family that ran and what
# it built, the sources its jobs read and their pins, the code version and the wall time, computed
# from the config and this run's DAG when `snakemake --report` renders it.
config[CONFIG_KEY] = FrontPage(
    config, lambda: workflow.dag, sources=SOURCES, configfiles=lambda: workflow.configfiles, repo=REPO
)


for _family in FAMILIES:
    for _rule_file in _family.rule_files:

        include: f"workflow/rules/{_rule_file}"

    for _target, _outputs in _family.targets(config).items():

        rule:
            name:
                _target
            input:
                _outputs,


# Every job carries its identity (workflow/rules/common.smk, crucible.identity.records).
for _rule in workflow.rules:
    shared_rules.attach_identity(_rule, NAMES, RULE_FAMILIES)


rule all:
    default_target: True
    input:
        families.final_outputs(config),


# The console: one line per job, its rule and wildcards (each job's log begins with its full
# command); with --printshellcmds (profiles/slurm sets it), Snakemake's full job details and
# commands instead. At the end, a summary naming the run's tables, figures and report, and the
# jobs that failed.
if not workflow.output_settings.printshellcmds:
    for _rule in workflow.rules:
        if _rule.message is None:
            _rule.message = shared_rules.job_message(_rule.name, _rule.wildcard_names)


# The names this run's jobs are made of are recorded as they mean now, with this run among their
# users (not those of sections the targets do not reach: their meaning stays free until a run
# uses them).
onstart:
    NAMES.record(
        sorted(
            set(NAMES.meanings)
            & names_of_jobs(getattr(j.params, "crucible_identity", None) for j in workflow.dag.jobs)
        ),
        run=RUN,
    )


onsuccess:
    print(
        run_summary(
            families.final_outputs(config), log, **summary_facts(workflow, config, FAMILIES, RULE_FAMILIES, SOURCES)
        ),
        file=sys.stderr,
    )


onerror:
    print(
        run_summary(
            families.final_outputs(config),
            log,
            failed=True,
            **summary_facts(workflow, config, FAMILIES, RULE_FAMILIES, SOURCES),
        ),
        file=sys.stderr,
    )
