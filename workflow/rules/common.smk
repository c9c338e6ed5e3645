# Helpers only: config access, validation, target lists. No rules here.
import json
import os
import re
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from snakemake.utils import validate

from crucible import __version__ as CRUCIBLE_VERSION
from crucible.config import check_config, check_output_dirs, put_on_python_path
from crucible.errors import ConfigError
from crucible.matbench.tasks import TASKS as ALL_TASKS
from crucible.models.registry import get_spec
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
MATBENCH = config["matbench"]
TASKS = [t for t in ALL_TASKS if t in MATBENCH["tasks"]]
FOLDS = range(5)
MODELS = list(MATBENCH["models"])
MLIP = config.get("mlip", {})


def _model_kind(name):
    """'files' for user-supplied predictions, else the registered model's device, cpu or gpu."""
    if name in MATBENCH["prediction_files"]:
        return "files"
    try:
        return get_spec(name, MATBENCH["custom_models"]).device
    except ConfigError as exc:
        raise WorkflowError(f"config matbench.models: {exc}")


MODEL_KIND = {m: _model_kind(m) for m in MODELS}


def _alternation(names):
    # A regex matching exactly these names; a never-matching one when the list is empty.
    return "|".join(re.escape(n) for n in sorted(names)) or "(?!x)x"


wildcard_constraints:
    task=_alternation(ALL_TASKS),
    fold="[0-4]",
    cpu_model=_alternation([m for m in MODELS if MODEL_KIND[m] == "cpu"]),
    gpu_model=_alternation([m for m in MODELS if MODEL_KIND[m] == "gpu"]),
    files_model=_alternation([m for m in MODELS if MODEL_KIND[m] == "files"]),
    model=_alternation(MODELS),


def artifact_file(name):
    return f"resources/downloads/{SOURCES['artifacts'][name]['filename']}"


def get_artifact_name(wildcards):
    for name, spec in SOURCES["artifacts"].items():
        if spec["filename"] == wildcards.filename:
            return name
    raise WorkflowError(f"no artifact in {SOURCES_FILE} is saved as {wildcards.filename}")


def artifact_members(name):
    return [f"resources/extracted/{name}/{m}" for m in sorted(SOURCES["artifacts"][name]["members"])]


MATBENCH_METADATA = "resources/extracted/matbench-0.6/matbench_v0.1_dataset_metadata.json"
MATBENCH_VALIDATION = "resources/extracted/matbench-0.6/matbench_v0.1_validation.json"


def get_raw_task_file(wildcards):
    if MATBENCH["source"] == "matminer":
        return f"resources/downloads/{wildcards.task}.json.gz"
    return f"resources/extracted/crabnet-2.0.8/{wildcards.task}.csv"


def get_raw_provenance(wildcards):
    """``filename=sha256`` of the artifact the task's raw file came from, for its task card."""
    if MATBENCH["source"] == "matminer":
        from crucible.sources import matminer_artifact

        mirror = MATBENCH.get("matminer", {})
        spec = matminer_artifact(wildcards.task, mirror.get("url_prefix"), mirror.get("sha256", {}).get(wildcards.task))
    else:
        spec = SOURCES["artifacts"]["crabnet-2.0.8"]
    return f"{spec['filename']}={spec['sha256']}"


def get_raw_pin(wildcards):
    """The pinned SHA-256 of the task's raw file: checked where it is read, and the task card must record it."""
    return get_raw_provenance(wildcards).rsplit("=", 1)[1] if MATBENCH["source"] == "matminer" else \
        SOURCES["artifacts"]["crabnet-2.0.8"]["members"][f"{wildcards.task}.csv"]["sha256"]


def member_pin(artifact, member):
    return SOURCES["artifacts"][artifact]["members"][member]["sha256"]


def features_flag(wildcards, input):
    return f"--features {shlex.quote(str(input.features))}" if input.features else ""


def get_matminer_fetch_args(wildcards):
    mirror = MATBENCH.get("matminer", {})
    args = []
    if mirror.get("url_prefix"):
        args += ["--url-prefix", mirror["url_prefix"]]
    pinned = mirror.get("sha256", {}).get(wildcards.task)
    if pinned:
        args += ["--sha256", pinned]
    return " ".join(shlex.quote(a) for a in args)


def get_clean_data_files():
    return expand("results/matbench/data/{task}.parquet", task=TASKS)


def get_task_cards():
    return expand("results/matbench/data/{task}.json", task=TASKS)


def get_magpie_cache():
    from crucible.features.magpie import MAGPIE_VERSION

    return f"results/features/magpie-{MAGPIE_VERSION}.parquet"


def get_model_features(wildcards):
    model = getattr(wildcards, "cpu_model", None) or getattr(wildcards, "gpu_model", None)
    if get_spec(model, MATBENCH["custom_models"]).input_kind == "magpie":
        return get_magpie_cache()
    return []


def get_model_name(wildcards):
    return getattr(wildcards, "cpu_model", None) or getattr(wildcards, "gpu_model", None) or wildcards.model


def get_model_params(wildcards):
    return json.dumps(MATBENCH["model_params"].get(get_model_name(wildcards), {}), sort_keys=True)


def get_custom_models():
    return json.dumps(MATBENCH["custom_models"], sort_keys=True)


def get_element_table(wildcards):
    """The element embedding table of a composition network, as a hash-checked input."""
    table = MATBENCH["model_params"].get(get_model_name(wildcards), {}).get("element_table", "mat2vec")
    if table in ("mat2vec", "magpie"):
        return f"resources/extracted/crabnet-2.0.8/{table}.csv"
    return table


def get_element_table_pin(wildcards):
    table = MATBENCH["model_params"].get(get_model_name(wildcards), {}).get("element_table", "mat2vec")
    if table in ("mat2vec", "magpie"):
        return f"--element-table-sha256 {member_pin('crabnet-2.0.8', f'{table}.csv')}"
    return ""


def get_prediction_file(wildcards):
    root = MATBENCH["prediction_files"][wildcards.files_model]["dir"]
    return str(Path(root) / wildcards.task / f"fold_{wildcards.fold}.parquet")


def get_fold_predictions(wildcards):
    return expand(
        "results/matbench/predictions/{model}/{task}/fold_{fold}.parquet",
        model=wildcards.model, task=wildcards.task, fold=FOLDS,
    )


def get_model_predictions(wildcards):
    return expand(
        "results/matbench/predictions/{model}/{task}/fold_{fold}.parquet",
        model=wildcards.model, task=TASKS, fold=FOLDS,
    )


def get_published_table():
    path = Path(MATBENCH["published"])
    return str(path if path.is_absolute() else REPO / path)


def get_matbench_outputs():
    out = [
        "results/tables/matbench_tasks.csv",
        "results/tables/matbench_tasks.md",
        "results/tables/matbench_task_overlap.csv",
    ]
    out += expand("results/matbench/folds/{task}.parquet", task=TASKS)
    if MODELS:
        out += expand("results/matbench/scores/{model}/{task}.json", model=MODELS, task=TASKS)
        out += expand("results/matbench/{model}/results.json.gz", model=MODELS)
        out += expand("results/matbench/{model}/info.json", model=MODELS)
        out += expand("results/tables/matbench_leaderboard.{ext}", ext=["csv", "md", "tex"])
        out += ["results/tables/matbench_folds.csv"]
        out += expand("results/figures/matbench_scaled_error.{ext}", ext=["png", "pdf"])
        out += expand("results/figures/matbench/{model}/{task}.png", model=MODELS, task=TASKS)
    return out


def get_final_output():
    return get_matbench_outputs() + get_mlip_outputs() + get_catalysis_outputs()


def mlip_models():
    return list(MLIP.get("models", []))


def _check_mlip_models():
    from crucible.mlip.calculators import registered_models

    known = registered_models()
    unknown = [m for m in mlip_models() if m not in known]
    if unknown:
        raise WorkflowError(f"config mlip.models: unknown potential(s) {', '.join(unknown)}; known: {', '.join(known)}")


_check_mlip_models()


def mlip_eos_params():
    eos = MLIP.get("eos", {})
    elements = eos.get("elements", "all")
    return {
        # Sorted, so that reordering the list in config does not rerun anything.
        "elements": elements if isinstance(elements, str) else ",".join(sorted(elements)),
        "points": eos.get("points", 7),
        "volume_range": " ".join(str(v) for v in eos.get("volume_range", [0.94, 1.06])),
    }


def mlip_s2ef_datasets():
    return dict(MLIP.get("s2ef", {}).get("datasets", {}))


def mlip_s2ef_input(name):
    """The dataset file, so that editing it reruns its predictions; built-in names have none."""
    from crucible.mlip.s2ef_data import ASE_VASP_TESTDATA

    source = mlip_s2ef_datasets()[name]
    if source == ASE_VASP_TESTDATA:
        return []
    if not Path(source).is_file():
        raise WorkflowError(f"config mlip.s2ef.datasets.{name}: no such file {source}")
    return source


def get_mlip_outputs():
    models = mlip_models()
    if not models:
        return []
    out = expand("results/mlip/eos/{model}.parquet", model=models)
    out += expand("results/tables/mlip_eos.{ext}", ext=["csv", "md", "tex"])
    out += expand("results/figures/mlip_eos_{kind}.{ext}", kind=["delta", "b0_parity"], ext=["png", "pdf"])
    datasets = sorted(mlip_s2ef_datasets())
    if datasets:
        out += expand("results/mlip/s2ef/{dataset}/{model}.parquet", dataset=datasets, model=models)
        out += expand("results/tables/mlip_s2ef_{dataset}.{ext}", dataset=datasets, ext=["csv", "md", "tex"])
    return out


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
    return expand("results/catalysis/{d}/calc/{m}/chunk_{k}.json", d=wc.cat_dataset, m=wc.cat_model,
                  k=range(catalysis_workflow.n_chunks(config)))


def _cat_models():
    return catalysis_workflow.models(config)
