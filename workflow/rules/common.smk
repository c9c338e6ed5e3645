# Thin import layer: config validation, global wildcard constraints, and the names the rule files
# use. All logic (target lists, model routing, params) lives in the library as pure functions of
# the config dict: crucible.workflow (shared) and crucible.<family>.workflow, unit-tested in tests/.
import os
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from crucible import __version__ as CRUCIBLE_VERSION
from crucible import workflow as shared_wf
from crucible.config import check_config, check_output_dirs, put_on_python_path
from crucible.errors import ConfigError
from crucible.matbench import workflow as matbench_wf
from crucible.matbench.tasks import TASKS as ALL_TASKS
from crucible.mlip import workflow as mlip_wf
from crucible.sources import load_sources

# Our own check first: it names the key path and the cause in one line (Snakemake's validate
# prints the whole schema), and also checks what a schema cannot say. validate then fills defaults.
try:
    check_config(config, Path(workflow.current_basedir) / "../schemas/config.schema.yaml")
    check_output_dirs(".")
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None
validate(config, schema="../schemas/config.schema.yaml")


envvars:
    "PATH",


# Rules call the `crucible` command: use the one installed beside the Python running Snakemake,
# also when its virtual environment is not activated (conda envs, if used, still come first).
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
# Custom model modules beside the project (matbench.custom_models: {class: "mymodels:MyModel"})
# are imported by the start-up check from the working directory; jobs see the same directory.
put_on_python_path(os.getcwd())

REPO = Path(workflow.current_basedir).parents[1]  # workflow/rules -> repository root
SOURCES_FILE = str(REPO / "config" / "sources.yaml")
SOURCES = load_sources(SOURCES_FILE)

# A bad model name stops the run here, before any job starts.
try:
    matbench_wf.check_models(config)
    mlip_wf.check_models(config)
except ConfigError as exc:
    raise WorkflowError(str(exc))


wildcard_constraints:
    task=shared_wf.alternation(ALL_TASKS),
    fold="[0-4]",


# Names that rule files written against the previous common.smk use (other branches); each only
# delegates to the library. New rules call crucible.workflow / crucible.<family>.workflow directly.
_alternation = shared_wf.alternation
MATBENCH = config["matbench"]
MLIP = config.get("mlip", {})
TASKS = matbench_wf.tasks(config)
MODELS = matbench_wf.models(config)
FOLDS = matbench_wf.FOLDS
MODEL_KIND = {m: matbench_wf.model_kind(config, m) for m in MODELS}


def artifact_file(name):
    return shared_wf.artifact_file(SOURCES, name)


def artifact_members(name):
    return shared_wf.artifact_members(SOURCES, name)


def get_clean_data_files():
    return matbench_wf.clean_data_files(config)


def get_task_cards():
    return matbench_wf.task_cards(config)


def get_magpie_cache():
    return matbench_wf.magpie_cache()


def get_model_name(wildcards):
    return getattr(wildcards, "cpu_model", None) or getattr(wildcards, "gpu_model", None) or wildcards.model


def get_model_features(wildcards):
    return matbench_wf.model_features(config, get_model_name(wildcards), wildcards.task)


def get_model_params(wildcards):
    return matbench_wf.model_params(config, get_model_name(wildcards))


def get_custom_models():
    return matbench_wf.custom_models(config)


def get_raw_provenance(wildcards):
    return matbench_wf.raw_provenance(config, SOURCES, wildcards.task)


def get_reactions_outputs():
    from crucible.reactions.workflow import outputs

    try:
        return outputs(config)
    except ConfigError as exc:
        raise WorkflowError(f"config reactions: {exc}")


def mlip_models():
    return mlip_wf.models(config)


def get_matbench_outputs():
    return matbench_wf.final_outputs(config)


def get_mlip_outputs():
    return mlip_wf.final_outputs(config)


def get_final_output():
    return (
        get_matbench_outputs()
        + get_mlip_outputs()
        + get_catalysis_outputs()
        + get_crystal_outputs()
        + get_reactions_outputs()
    )


def get_crystal_outputs():
    from crucible.crystal.workflow import get_crystal_outputs as crystal_targets

    return crystal_targets(config)


# --- language models (rule family llm_generate, workflow/rules/llm.smk) ---
from crucible.llm import workflow as llm_workflow

try:
    LLM_MODELS = llm_workflow.llm_models(config)
except ConfigError as exc:
    raise WorkflowError(str(exc))


def llm_model_alternation(backends):
    return _alternation(llm_workflow.models_by_backend(config, backends))


def get_llm_model_sha256(name):
    return llm_workflow.model_sha256(config, name)


def get_llm_config_flags():
    return llm_workflow.config_file_flags(workflow.configfiles, workflow.overwrite_configfiles)


def get_llm_replay_input(wildcards):
    return llm_workflow.replay_input(config, wildcards.llm_model, wildcards.llm_benchmark, wildcards.llm_dataset)


def get_llm_replay_flag(replay):
    import shlex

    files = [replay] if isinstance(replay, str) else list(replay)
    return f"--replay-file {shlex.quote(files[0])}" if files else ""


def get_llm_cache_dir():
    return llm_workflow.cache_dir(config)


# Catalysis (CatBench semantics): all logic in crucible.catalysis.workflow.
from crucible.catalysis import workflow as catalysis_workflow

for _problem in catalysis_workflow.check(config):
    raise WorkflowError(_problem)


def get_catalysis_outputs():
    return catalysis_workflow.final_outputs(config)


# Wildcards match only configured names, so that e.g. catalysis_{dataset}_anomaly.csv can never
# be read as a dataset called "X_anomaly".
_CAT_DATASETS = _alternation(catalysis_workflow.datasets(config))
_REL_DATASETS = _alternation(catalysis_workflow.relative_datasets(config))
_CAT_MODELS = _alternation(catalysis_workflow.models(config))


def _cat_spec(wc):
    return catalysis_workflow.datasets(config)[wc.cat_dataset]


def _cat_chunks(wc):
    return expand(
        "results/catalysis/{d}/calc/{m}/chunk_{k}.json",
        d=wc.cat_dataset,
        m=wc.cat_model,
        k=range(catalysis_workflow.n_chunks(config)),
    )


def _cat_models():
    return catalysis_workflow.models(config)


# Reactions (RxnOptBench semantics): input functions of reactions.smk; logic in crucible.reactions.workflow.
def _rxn_raw(wildcards):
    from crucible.reactions.workflow import raw_file

    return raw_file(config, wildcards.rxn_dataset)


def _rxn_artifact_sha(wildcards):
    from crucible.reactions.data import DATASETS

    spec = DATASETS.get(wildcards.rxn_dataset)
    return f"--artifact-sha256 {SOURCES['artifacts'][spec.artifact]['sha256']}" if spec else ""
