# What every rule file relies on: the config checked and completed, the global wildcard
# constraints, and the names the shared rules use. Nothing family-specific: each family declares
# itself in crucible.dag.families (rule files, targets, checks), and its rules call its own library
# module (crucible.<family>.workflow: pure functions of the config, unit-tested in tests/).
import os
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from crucible.dag import families
from crucible.dag import snakemake_scheduler
from crucible.dag.console import shorten_reasons
from crucible.dag.runs import name_runs
from crucible.dag import rules as shared_rules
from crucible.dag.config import check_config, check_output_dirs, fill_defaults, put_on_python_path
from crucible.core.errors import ConfigError
from crucible.identity.records import names_of_jobs
from crucible.identity.name_book import NameBook
from crucible.sources.pinned_files import load_sources

FAMILIES = families.families()
# Snakemake's scheduler otherwise wakes once a second more for every job that has finished
# (crucible.dag.snakemake_scheduler): its own CPU grew with the square of the number of jobs.
try:
    snakemake_scheduler.install()
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None
# A job's "Reason:" cut to one line in the console (the `all` job's listed every updated input,
# 20,156 characters), in full in .snakemake/log/ (crucible.dag.console).
shorten_reasons()

# Rules call the `crucible` command: use the one installed beside the Python running Snakemake,
# also when its virtual environment is not activated (conda envs, if used, still come first).
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
# Custom model modules beside the project (matbench.custom_models: {class: "mymodels:MyModel"})
# are imported by the start-up check from the working directory; jobs see the same directory.
put_on_python_path(os.getcwd())

# A config of the user's that runs another set than config/config.yaml and names no run gets a run
# of its own, named after its file: its aggregates never replace the full run's (crucible.dag.runs).
for _line in name_runs(config, FAMILIES, workflow.overwrite_configfiles):
    print(_line, file=sys.stderr)

# Before any job starts: the schema of every family's section (each stands alone; a key that no
# schema knows is refused, naming its path), then each family's own checks (model names, inputs a
# model cannot get, ...). One line with the key and the cause, never the schema.
try:
    check_config(config)
    check_output_dirs(".")
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None
# The schemas' defaults written into the config, as Snakemake's validate() does.
fill_defaults(config)

# What each name of this config means (a model's class and params, a potential, a generator's
# params, a family's settings), against what this results folder recorded: a name that would mean
# something else that another run still uses is refused here, before any job runs, so that no run
# overwrites another's results; a meaning this run alone used is replaced (its jobs rerun) with one
# line saying so. The names are recorded when jobs start (onstart in the Snakefile; not in a dry run).
try:
    NAMES = NameBook.of(config, FAMILIES)
    RUN = families.run_of(config, FAMILIES)
    NAMES.check_recorded(run=RUN)
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None
for _change in NAMES.changes:
    print(_change, file=sys.stderr)
RULE_FAMILIES = {rule_file: f.name for f in FAMILIES for rule_file in f.rule_files}


envvars:
    "PATH",


REPO = Path(workflow.current_basedir).parents[1]  # workflow/rules -> repository root
SOURCES_FILE = str(REPO / "config" / "sources.yaml")
SOURCES = load_sources(SOURCES_FILE)


# Wildcards that several rules of a family share by name (matbench's {task} and {fold}); every
# other wildcard is constrained by the rule that has it.
wildcard_constraints:
    **{name: pattern for f in FAMILIES for name, pattern in f.wildcard_constraints(config).items()},
