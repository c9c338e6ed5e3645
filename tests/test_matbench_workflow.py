"""crucible.matbench.workflow: the Matbench targets, model routing and params, straight from a
config dict (no Snakemake)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crucible.core.errors import ConfigError
from crucible.matbench import raw_files
from crucible.matbench import selection as sel
from crucible.matbench import workflow as wf
from crucible.sources.pinned_files import find_pin


def _config(**matbench):
    base = {
        "source": "composition-mirror",
        "tasks": ["matbench_expt_is_metal", "matbench_steels"],
        "models": ["dummy", "gbm-magpie", "comp-transformer"],
        "model_params": {},
        "custom_models": {},
        "prediction_files": {},
        "published": "config/published_matbench.yaml",
        "inner_validation": {"fraction": 0.25, "seed": 7},
    }
    return {"matbench": {**base, **matbench}}


def test_tasks_follow_matbench_order_not_config_order():
    assert sel.tasks(_config()) == ["matbench_steels", "matbench_expt_is_metal"]


def test_models_are_routed_to_cpu_gpu_and_files():
    pytest.importorskip("torch", reason="comp-transformer's registry entry needs torch (absent on the 3.12 CI leg)")
    cfg = _config(
        models=["dummy", "comp-transformer", "mine", "theirs"],
        custom_models={"mine": {"class": "sklearn.linear_model:Ridge", "input": "magpie"}},
        prediction_files={"theirs": {"dir": "/data/theirs"}},
    )
    assert sel.models_of_kind(cfg, "cpu") == ["dummy", "mine"]
    assert sel.models_of_kind(cfg, "gpu") == ["comp-transformer"]
    assert sel.models_of_kind(cfg, "files") == ["theirs"]
    assert wf.user_prediction_file(cfg, "theirs", "matbench_steels", 3) == "/data/theirs/matbench_steels/fold_3.parquet"
    assert wf.model_features(cfg, "mine", "matbench_steels") == wf.magpie_features("matbench_steels")
    assert wf.model_features(cfg, "dummy", "matbench_steels") == []
    # GPU models and imported files are never fitted per task
    assert sel.job_granularity(cfg, "comp-transformer", "matbench_steels") == "fold"
    assert sel.job_granularity(cfg, "theirs", "matbench_steels") == "fold"


def _rule_making(cfg, model, task, fold=2):
    """Which CPU rule Snakemake would pick for a prediction file, by the rules' own output
    patterns and the constraints the workflow gives them (Snakemake's regex, not a copy)."""
    import re

    from snakemake.io import regex_from_filepattern, update_wildcard_constraints

    path = wf.prediction_file(model, task, fold)
    outputs = {
        "fold": wf.prediction_file("{model}", "{task}", "{fold}"),
        "task": wf.fold_predictions("{model}", "{task}"),
    }
    making = []
    for granularity, patterns in outputs.items():
        constraint = {"model": sel.cpu_model_pattern(cfg, granularity)}
        for pattern in [patterns] if isinstance(patterns, str) else patterns:
            if re.match(regex_from_filepattern(update_wildcard_constraints(pattern, constraint, {})), path):
                making.append(granularity)
    return making


def test_granularity_is_declared_per_model_and_task_size_and_one_rule_makes_each_file():
    from crucible.matbench.tasks import N_SAMPLES, TASKS

    cfg = _config(
        models=["dummy", "gbm-magpie", "rf-magpie", "mine"],
        custom_models={"mine": {"class": "sklearn.dummy:DummyRegressor", "input": "composition"}},
    )
    assert sel.cpu_models(cfg) == ["dummy", "gbm-magpie", "rf-magpie", "mine"]  # user datasets: fold jobs for all
    expected = {
        "dummy": {t: "task" for t in TASKS},  # a fit costs less than a job's start-up everywhere
        # gradient boosting: 1-5 s fits up to 20k rows go in one job per task, the mp tasks per fold
        "gbm-magpie": {t: "task" if N_SAMPLES[t] <= 20_000 else "fold" for t in TASKS},
        "rf-magpie": {t: "fold" for t in TASKS},
        "mine": {t: "fold" for t in TASKS},  # a user's model: one job per fold unless it says otherwise
    }
    assert expected["gbm-magpie"]["matbench_perovskites"] == "task"
    assert expected["gbm-magpie"]["matbench_mp_gap"] == "fold"
    for model, by_task in expected.items():
        for task, granularity in by_task.items():
            assert sel.job_granularity(cfg, model, task) == granularity, (model, task)
            for fold in wf.FOLDS:
                # exactly one rule can make each fold file, and it is the declared one
                assert _rule_making(cfg, model, task, fold) == [granularity], (model, task, fold)
    # a model name that is a prefix of another must not capture its files
    cfg = _config(models=["gbm-magpie", "gbm"], custom_models={"gbm": {"class": "sklearn.dummy:DummyRegressor"}})
    assert _rule_making(cfg, "gbm", "matbench_steels") == ["fold"]
    assert _rule_making(cfg, "gbm-magpie", "matbench_steels") == ["task"]
    with pytest.raises(ValueError, match="kind must be one of"):
        sel.models_of_kind(cfg, "task")
    with pytest.raises(ValueError, match="granularity must be one of"):
        sel.cpu_model_pattern(cfg, "fold-ish")
    # no model of a granularity: a constraint that matches nothing
    assert _rule_making(_config(models=["rf-magpie"]), "dummy", "matbench_steels") == []


def test_task_sizes_are_the_official_metadata(members):
    from crucible.matbench.tasks import N_SAMPLES, TASKS, load_metadata

    metadata = load_metadata(members["matbench/metadata"])
    assert N_SAMPLES == {t: metadata[t]["n_samples"] for t in TASKS}
    assert list(N_SAMPLES.values()) == sorted(N_SAMPLES.values())  # TASKS is ordered by size


def test_every_task_table_has_its_own_feature_file():
    """One Magpie file per task (and per user dataset), named by it alone: which other tasks are
    configured changes neither a file's path nor the table it is built from."""
    from crucible.features.magpie import MAGPIE_VERSION

    assert wf.magpie_features("matbench_steels") == f"results/features/magpie-{MAGPIE_VERSION}/matbench_steels.parquet"
    cfg = _config(user_datasets={"li_o": _LI_O})
    assert wf.feature_tables(cfg) == ["matbench_steels", "matbench_expt_is_metal", "user/li_o"]
    assert wf.feature_source(cfg, "matbench_steels") == "results/matbench/data/matbench_steels.parquet"
    assert wf.feature_source(cfg, "user/li_o") == "results/matbench/user/li_o/data.parquet"
    assert wf.model_features(cfg, "gbm-magpie", "li_o") == f"results/features/magpie-{MAGPIE_VERSION}/user/li_o.parquet"
    alone = _config(tasks=["matbench_steels"])
    assert wf.model_features(alone, "gbm-magpie", "matbench_steels") == wf.model_features(
        cfg, "gbm-magpie", "matbench_steels"
    )


def test_run_aggregates_carry_the_run_name_and_per_model_outputs_do_not():
    default, named = _config(), _config(run_name="steels-only", tasks=["matbench_steels"])
    assert wf.run_dir(default) == "results" and wf.run_dir(named) == "results/runs/steels-only"
    assert "results/tables/matbench_leaderboard.csv" in wf.final_outputs(default)
    assert "results/matbench/dummy/results.json.gz" in wf.final_outputs(default)
    out = wf.final_outputs(named)
    assert "results/runs/steels-only/tables/matbench_leaderboard.csv" in out
    assert "results/runs/steels-only/tables/matbench_tasks.csv" in out
    assert "results/runs/steels-only/figures/matbench_scaled_error.png" in out
    assert "results/runs/steels-only/matbench/dummy/results.json.gz" in out
    assert not [p for p in out if p.startswith(("results/tables/", "results/matbench/dummy/"))]
    # per (model, task): the same path in every run, so every run reuses it
    shared = set(wf.final_outputs(default)) & set(out)
    assert "results/matbench/scores/dummy/matbench_steels.json" in shared
    assert "results/figures/matbench/gbm-magpie/matbench_steels.png" in shared
    assert all(not p.startswith("results/runs/") for p in shared)


def test_a_per_task_job_writes_every_fold_file():
    assert wf.fold_numbers() == "0 1 2 3 4"
    preds, infos = wf.fold_predictions("dummy", "{task}"), wf.fold_prediction_infos("dummy", "{task}")
    assert len(preds) == len(infos) == len(wf.FOLDS)
    assert [Path(p).with_suffix(".json") for p in preds] == [Path(i) for i in infos]
    assert infos[2] == "results/matbench/predictions/dummy/{task}/fold_2.json"


def test_unknown_model_names_the_config_key():
    with pytest.raises(ConfigError, match=r"config matbench.models: unknown model 'gbm-magpi'"):
        sel.check_models(_config(models=["gbm-magpi"]))


def test_params_are_sorted_json_and_element_tables_resolve():
    cfg = _config(
        model_params={"comp-transformer": {"epochs": 2, "d_model": 16}, "other": {"element_table": "/tables/mine.csv"}}
    )
    assert wf.model_params(cfg, "comp-transformer") == json.dumps({"d_model": 16, "epochs": 2})
    assert wf.model_params(cfg, "dummy") == "{}"
    # the pinned table by its role in config/sources.yaml, where the extract rule writes it
    mat2vec = find_pin("element-table/mat2vec")
    assert wf.element_table(cfg, "comp-transformer") == f"resources/extracted/{mat2vec.artifact}/{mat2vec.member}"
    assert wf.element_table(cfg, "other") == "/tables/mine.csv"


# A sources document of its own: the workflow reads artifacts and pins by role, never by name.
SOURCES_DOC = {
    "artifacts": {
        "mirror-1.0": {
            "filename": "crabnet.whl",
            "sha256": "ab" * 32,
            "members": {
                "steels.csv": {"role": "matbench/mirror/matbench_steels", "path": "x/steels.csv", "sha256": "11" * 32}
            },
        }
    }
}


def test_raw_files_and_provenance_by_source():
    sources = SOURCES_DOC
    cfg = _config()
    steels = find_pin("matbench/mirror/matbench_steels")
    assert raw_files.raw_task_file(cfg, "matbench_steels") == f"resources/extracted/{steels.artifact}/{steels.member}"
    assert raw_files.raw_provenance(cfg, sources, "matbench_steels") == f"crabnet.whl={'ab' * 32}"
    mirror = _config(
        source="matminer", matminer={"url_prefix": "http://127.0.0.1:9/x", "sha256": {"matbench_steels": "cd" * 32}}
    )
    assert raw_files.raw_task_file(mirror, "matbench_steels") == "resources/downloads/matbench_steels.json.gz"
    assert raw_files.matminer_url_prefix(mirror) == "http://127.0.0.1:9/x"
    assert raw_files.matminer_sha256(mirror, "matbench_steels") == "cd" * 32
    assert raw_files.matminer_sha256(mirror, "matbench_glass") == ""
    assert raw_files.raw_provenance(mirror, sources, "matbench_steels").endswith("=" + "cd" * 32)


def test_pins_travel_to_the_jobs_that_read_the_files():
    sources = SOURCES_DOC
    cfg = _config()
    # the mirror's member is checked, not the wheel it came from; a matminer download is its own pin
    assert raw_files.raw_pin(cfg, sources, "matbench_steels") == "11" * 32
    mirror = _config(
        source="matminer", matminer={"url_prefix": "http://127.0.0.1:9/x", "sha256": {"matbench_steels": "cd" * 32}}
    )
    assert raw_files.raw_pin(mirror, sources, "matbench_steels") == "cd" * 32
    spaced = _config(source="matminer", matminer={"url_prefix": "/my mirror/x"})
    assert raw_files.matminer_url_prefix(spaced) == "/my mirror/x"


def test_predictions_are_listed_in_task_then_fold_order():
    files = wf.model_predictions(_config(), "dummy")
    assert len(files) == 10
    assert files[0] == "results/matbench/predictions/dummy/matbench_steels/fold_0.parquet"
    assert files[-1] == "results/matbench/predictions/dummy/matbench_expt_is_metal/fold_4.parquet"
    assert wf.fold_predictions("dummy", "matbench_steels") == files[:5]


def test_final_outputs():
    out = wf.final_outputs(_config())
    assert "results/matbench/comp-transformer/results.json.gz" in out
    assert "results/figures/matbench/gbm-magpie/matbench_expt_is_metal.png" in out
    assert len(out) == len(set(out))
    # no models: data, folds and the task table only
    assert not [p for p in wf.final_outputs(_config(models=[])) if "leaderboard" in p or "scores" in p]
    assert wf.data_outputs(_config()) == [
        "results/matbench/folds/matbench_steels.parquet",
        "results/matbench/folds/matbench_expt_is_metal.parquet",
        "results/tables/matbench_tasks.csv",
    ]


def test_published_table_is_relative_to_the_repository(tmp_path):
    assert wf.published_table(_config(), tmp_path) == str(tmp_path / "config/published_matbench.yaml")
    assert wf.published_table(_config(published="/abs/p.yaml"), tmp_path) == "/abs/p.yaml"


# --- structure models and user datasets (issue 16) ---------------------------------------------

_LI_O = {
    "url": "http://127.0.0.1/li_o.json.gz",
    "sha256": "0" * 64,
    "input": "structure",
    "target": "band_gap",
    "task_type": "regression",
    "unit": "eV",
}


def test_structure_models_stop_at_start_up_on_the_composition_mirror():
    with pytest.raises(ConfigError, match=r"^config matbench: .*set `matbench.source: matminer`"):
        sel.check_models(_config(tasks=["matbench_jdft2d"], models=["rf-scm-magpie"]))
    with pytest.raises(ConfigError, match="needs crystal structures"):
        sel.check_models(_config(tasks=["matbench_steels"], models=["mlip-embed"]))
    with pytest.raises(ConfigError, match="not a valid dataset name"):
        sel.check_models(_config(models=["dummy"], user_datasets={"matbench_x": _LI_O}))
    sel.check_models(_config(tasks=["matbench_jdft2d"], models=["rf-scm-magpie", "mlip-embed"], source="matminer"))


def test_structure_feature_caches_follow_model_and_task():
    cfg = _config(
        tasks=["matbench_steels", "matbench_jdft2d"],
        models=["rf-scm-magpie", "mlip-embed", "dummy"],
        source="matminer",
        user_datasets={"li_o": _LI_O},
    )
    # rf-scm-magpie: Magpie always, the SCM features only where the task has structures
    assert wf.model_features(cfg, "rf-scm-magpie", "li_o") == wf.magpie_features("user/li_o")
    assert wf.model_structure_features(cfg, "rf-scm-magpie", "matbench_jdft2d") == wf.scm_features("matbench_jdft2d")
    assert wf.model_structure_features(cfg, "rf-scm-magpie", "matbench_steels") == []
    assert wf.model_structure_features(cfg, "mlip-embed", "li_o") == wf.embedding_features("user/li_o")
    assert wf.model_structure_features(cfg, "dummy", "li_o") == []
    assert wf.structure_table_pattern(cfg) == "matbench_jdft2d|user/li_o"
    assert wf.scm_features("matbench_jdft2d").startswith("results/features/scm-")
    assert json.loads(sel.user_dataset_spec(cfg, "li_o")) == _LI_O


def test_a_config_of_user_datasets_only_builds_only_their_targets():
    cfg = _config(tasks=[], models=["dummy"], prediction_files={}, user_datasets={"li_o": _LI_O})
    assert wf.final_outputs(cfg) == [
        "results/matbench/user/li_o/folds.parquet",
        "results/matbench/user/li_o/scores/dummy.json",
        "results/tables/matbench_user_li_o.csv",
        "results/tables/matbench_user_li_o.md",
        "results/tables/matbench_user_li_o.tex",
    ]
    assert not any("/user/" in p for p in wf.final_outputs(_config()))


@pytest.mark.parametrize(
    "entry",
    [
        None,
        {"class": "sklearn.linear_model:Ridge", "input": "magpie"},
        {"model": "gbm-magpie", "params": {"max_iter": 3}},
    ],
    ids=["registered", "users-class", "variant"],
)
def test_the_advice_for_another_meaning_is_a_config_that_is_accepted(entry):
    """Issue 44 item 6: the refusal's advice, fed back as the user would, passes the config check
    (for a user's class it was `{model: myreg}`, itself refused as an unknown model)."""
    import yaml

    from crucible.dag.config import check_config, fill_defaults
    from crucible.matbench.meanings import rename_advice

    name = "gbm-magpie" if entry is None else "mine"
    cfg = _config(models=[name], custom_models={} if entry is None else {name: entry})
    advice = rename_advice(cfg, name)
    fragment = advice.split("matbench.custom_models: ", 1)[1].rsplit(", and list", 1)[0]
    added = yaml.safe_load(fragment.replace("{...}", "{max_iter: 5}" if "class" not in fragment else "{alpha: 2.0}"))
    assert list(added) == [f"{name}-2"]
    cfg["matbench"]["custom_models"].update(added)
    cfg["matbench"]["models"].append(f"{name}-2")
    check_config(cfg)
    fill_defaults(cfg)
    sel.check(cfg)
    assert f"matbench/model/{name}-2" in wf.names(cfg)
