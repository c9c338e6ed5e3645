"""Config checks at start-up (issue 10, points 4, 5, 10): a config that would run the wrong
thing, or nothing, is refused before any job starts, with the key path and the cause only."""

from __future__ import annotations

import sys

import pytest
import yaml

from crucible.core.errors import ConfigError
from crucible.dag.config import SERVICE_SECTIONS, check_config
from crucible.dag.families import families
from crucible.mlip.eos import eos_volumes
from crucible.report import front_page

from helpers import REPO


def _cfg(**matbench):
    return {"matbench": {"tasks": ["matbench_steels"], "models": ["dummy"], **matbench}}


@pytest.mark.parametrize(
    "config, message",
    [
        (_cfg(model_params={"gbm-magpi": {"max_iter": 5}}), "matbench.model_params.gbm-magpi: no model of that name"),
        (_cfg(tasks=[]), "matbench.tasks: [] should be non-empty"),
        (_cfg(tasks=[], user_datasets={}), "matbench.tasks: [] should be non-empty"),
        (_cfg(models=[]), "matbench.models: [] should be non-empty"),
        (
            {**_cfg(), "mlip": {"models": ["emt"], "eos": {"elements": ["Cu", "Xx"]}}},
            "mlip.eos.elements: Xx not in the Delta set",
        ),
        ({**_cfg(), "mlip": {"eos": {"volume_range": [0.5, 3.0]}}}, "mlip.eos.volume_range"),
        ({**_cfg(), "mlip": {"eos": {"volume_range": [0.97, 1.03]}}}, "mlip.eos.volume_range"),
        ({"matbench": {"taks": ["matbench_steels"], "tasks": ["matbench_steels"]}}, "matbench: unexpected key 'taks'"),
        (_cfg(tasks=["matbench_steel"]), "matbench.tasks[0]: 'matbench_steel' is not one of"),
        (
            {"crystal": {"generator_params": {"random-symmetric": {"max_triess": 3}}}},
            "crystal.generator_params.random-symmetric: unexpected key 'max_triess' (it takes no keys)",
        ),
    ],
)
def test_bad_configs_are_refused_with_the_key_path(config, message):
    with pytest.raises(ConfigError) as info:
        check_config(config)
    text = str(info.value)
    assert message in text
    # The cause and the key path, not the schema.
    assert len(text.splitlines()) <= 3 and "additionalProperties" not in text and len(text) < 600


def test_good_configs_pass():
    check_config(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))
    check_config(yaml.safe_load((REPO / "config" / "paper.yaml").read_text()))
    check_config(
        _cfg(
            model_params={"dummy": {}},
            custom_models={"mine": {"class": "a.b:C"}},
            prediction_files={"theirs": {"dir": "x"}},
        )
    )
    check_config({**_cfg(), "mlip": {"eos": {"volume_range": [0.9, 1.1]}}})


@pytest.mark.parametrize("volume_range", [(0.5, 3.0), (0.97, 1.03), (0.94, 1.3)])
def test_eos_volume_range_the_fit_and_delta_cannot_use_is_refused(volume_range):
    with pytest.raises(ConfigError, match="volume_range"):
        eos_volumes(16.0, 7, volume_range)
    assert len(eos_volumes(16.0, 7, (0.94, 1.06))) == 7


def test_a_file_where_an_output_folder_goes_is_named(tmp_path):
    from crucible.dag.config import check_output_dirs

    check_output_dirs(tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "tables").write_text("oops")
    with pytest.raises(ConfigError, match=r"results/tables is a file"):
        check_output_dirs(tmp_path)


def test_troubleshooting_names_unlock_and_the_configfile_trap():
    section = (REPO / "docs" / "troubleshooting.md").read_text()
    assert "--unlock" in section and "--configfile" in section and "targets" in section
    assert "--report-after-run" in (REPO / "docs" / "report.md").read_text()


def test_the_schema_file_is_the_schema_crucible_assembles(tmp_path):
    """config/config.schema.json, which config/config.yaml names for editors, is what
    crucible.dag.config.schema() assembles from the sections' schemas, byte for byte."""
    from crucible.core.io import write_json
    from crucible.dag.config import schema

    write_json(schema(), tmp_path / "schema.json")
    kept = REPO / "config" / "config.schema.json"
    assert kept.read_text() == (tmp_path / "schema.json").read_text(), (
        "config/config.schema.json is stale: `make config-schema` writes it again"
    )
    first_lines = (REPO / "config" / "config.yaml").read_text().splitlines()[:3]
    assert "# yaml-language-server: $schema=config.schema.json" in first_lines


def test_the_project_directory_goes_on_the_jobs_python_path(tmp_path, monkeypatch):
    import os

    from crucible.dag.config import put_on_python_path

    monkeypatch.setenv("PYTHONPATH", "/somewhere/src")
    monkeypatch.setattr(sys, "path", list(sys.path))
    put_on_python_path(tmp_path)
    put_on_python_path(tmp_path)  # idempotent
    assert os.environ["PYTHONPATH"].split(os.pathsep) == [str(tmp_path), "/somewhere/src"]
    assert sys.path[0] == str(tmp_path)


# ---- per-family schema sections: each stands alone, and its enums are the library's registries


def _at(schema: dict, path: str):
    """The sub-schema at a dotted path of properties ('[]' descends into array items, '*' into
    additionalProperties)."""
    node = schema
    for part in path.split("."):
        node = (
            node["items"] if part == "[]" else node["additionalProperties"] if part == "*" else node["properties"][part]
        )
    return node


def _registries():
    from crucible.catalysis import FORMATS, RELATIVE_TASKS
    from crucible.crystal.generators import GENERATORS
    from crucible.llm.model_entry import BACKENDS, PARAM_KEYS
    from crucible.matbench.clean import RAW_ORIGINS
    from crucible.matbench.tasks import TASKS
    from crucible.reactions.baselines import BASELINES
    from crucible.reactions.scoring import QUESTION_TYPES

    return [
        ("matbench", "tasks.[]", TASKS),
        ("matbench", "source", RAW_ORIGINS),
        ("reactions", "models.[]", tuple(BASELINES)),
        ("reactions", "question_types.[]", QUESTION_TYPES),
        ("crystal", "generators.[]", tuple(GENERATORS)),
        ("catalysis", "datasets.*.format", FORMATS),
        ("catalysis", "relative.*.task", RELATIVE_TASKS),
        ("llm", "models.*.backend", BACKENDS),
    ] + [("llm", "models.*.params", PARAM_KEYS)]


@pytest.mark.parametrize("family, path, names", _registries(), ids=lambda v: v if isinstance(v, str) else None)
def test_schema_enums_are_the_python_registries(family, path, names):
    from crucible.dag.config import family_schema

    node = _at(family_schema(family), path)
    listed = node.get("enum") or list(node["properties"])
    assert sorted(listed) == sorted(names), f"{family}.{path}: schema and registry differ"


def test_model_names_the_schema_cannot_list_are_checked_against_the_registries():
    """Matbench models (custom ones too) and potentials are free strings in the schema: the
    families' start-up checks take exactly the registered names."""
    from crucible.matbench import selection as matbench_sel
    from crucible.mlip import workflow as mlip_wf
    from crucible.models.registry import builtin_models
    from crucible.potentials.registry import registered_models

    config = {"matbench": {"tasks": ["matbench_steels"], "models": sorted(builtin_models())}}
    assert {matbench_sel.model_kind(config, m) for m in builtin_models()} <= set(matbench_sel.MODEL_KINDS)
    with pytest.raises(ConfigError, match="unknown model 'not-a-model'"):
        matbench_sel.check({"matbench": {"tasks": ["matbench_steels"], "models": ["not-a-model"]}})
    mlip_wf.check({"mlip": {"models": list(registered_models())}})
    with pytest.raises(ConfigError):
        mlip_wf.check({"mlip": {"models": ["not-a-potential"]}})


@pytest.mark.parametrize("family", [f.name for f in families()])
def test_a_config_with_only_one_section_is_complete(family):
    from crucible.dag.config import fill_defaults
    from crucible.dag.families import family as get

    config = {family: yaml.safe_load((REPO / ".test" / family / "config.yaml").read_text())[family]}
    check_config(config)
    filled = fill_defaults(json_copy(config))
    # every registered family's section and the shared potentials: section
    assert set(filled) == {f.name for f in families()} | set(SERVICE_SECTIONS)
    assert filled["potentials"] == {}
    # the other families' sections hold their defaults only: none of them builds anything (the
    # llm service answers what the families ask)
    for other in set(filled) - {family, "potentials"}:
        assert get(other).final_outputs(filled) == [] or get(other).layer == "services", other


def test_defaults_are_the_schemas():
    from crucible.dag.config import fill_defaults, section

    filled = fill_defaults({})
    assert filled["matbench"]["models"] == ["dummy"] and filled["mlip"]["eos"]["points"] == 7
    assert section({}, "crystal") == filled["crystal"] and section({"crystal": {"seed": 3}}, "crystal")["seed"] == 3
    # a section's copy: changing it changes neither the config nor the next call's answer
    section({}, "reactions")["bootstrap"]["n"] = 5
    assert section({}, "reactions")["bootstrap"]["n"] == 1000


def json_copy(value):
    import json

    return json.loads(json.dumps(value))


ALL_FAMILIES = ["matbench", "mlip", "crystal", "reactions", "catalysis", "llm"]


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_enabled_false_switches_a_family_off_and_leaves_the_others(family):
    """One switch, the same in every section: off, the family has no targets, names or checks
    (even a section that would be refused on, e.g. matbench's empty tasks), the others keep theirs."""
    from crucible.dag.families import families
    from crucible.dag.families import family as get

    config = yaml.safe_load((REPO / ".test" / "all-stages.yaml").read_text())
    off = {**config, family: {**(config.get(family) or {}), "enabled": False}}
    check_config(off)
    check_config({family: {"enabled": False}})
    f = get(family)
    assert f.final_outputs(config), f"{family}: the all-stages config builds nothing of it"
    assert f.final_outputs(off) == [] and f.names(off) == {} and front_page.built_by(f, off) == {}
    assert all(outputs == [] for outputs in f.targets(off).values())
    for other in families():
        if other.name not in (family, "llm"):  # llm answers the prompts of the families switched on
            assert other.final_outputs(off) == other.final_outputs(config), other.name
            assert other.names(off) == other.names(config), other.name
    # switched on explicitly is the same family as without the key: same targets, same meanings
    on = {**config, family: {**(config.get(family) or {}), "enabled": True}}
    assert f.final_outputs(on) == f.final_outputs(config) and f.names(on) == f.names(config)


def test_the_switch_is_a_boolean_and_declared_once_for_all_sections():
    from crucible.dag.config import family_schema, fill_defaults

    with pytest.raises(ConfigError, match=r"matbench\.enabled: 'no' is not of type 'boolean'"):
        check_config({"matbench": {"enabled": "no", "tasks": ["matbench_steels"]}})
    for family in ALL_FAMILIES:
        assert "enabled" not in family_schema(family).get("properties", {}), family
    # no default: a config that does not use the switch is unchanged by it
    assert all("enabled" not in section for section in fill_defaults({}).values())
    with pytest.raises(ConfigError, match="matbench.tasks: \\[\\] should be non-empty.*enabled: false"):
        check_config({"matbench": {"tasks": []}})


RIDGE = {"class": "sklearn.linear_model:Ridge", "input": "magpie"}


@pytest.mark.parametrize(
    "config, where, accepted",
    [
        # a scikit-learn estimator: the names of its get_params()
        (_cfg(models=["gbm-magpie"], model_params={"gbm-magpie": {"max_iterr": 3}}), "matbench.model_params.gbm-magpie.max_iterr", "learning_rate, loss, max_bins"),
        (_cfg(models=["rf-magpie"], model_params={"rf-magpie": {"n_estimator": 3}}), "matbench.model_params.rf-magpie.n_estimator", "min_weight_fraction_leaf, monotonic_cst, n_estimators"),
        # a variant of a registered model, under its own name
        (_cfg(models=["gq"], custom_models={"gq": {"model": "gbm-magpie", "params": {"max_iterr": 3}}}), "matbench.custom_models.gq.params.max_iterr", "max_iter"),
        # a user's own class, its params in either place
        (_cfg(models=["mine"], custom_models={"mine": {**RIDGE, "params": {"alphaa": 1}}}), "matbench.custom_models.mine.params.alphaa", "alpha, copy_X, fit_intercept"),
        (_cfg(models=["mine"], custom_models={"mine": RIDGE}, model_params={"mine": {"alphaa": 1}}), "matbench.model_params.mine.alphaa", "alpha, copy_X"),
        # a factory that takes no params, a network whose class is not imported to plan
        (_cfg(model_params={"dummy": {"strategy": "median"}}), "matbench.model_params.dummy.strategy", "none"),
        (_cfg(models=["comp-transformer"], model_params={"comp-transformer": {"epoch": 3}}), "matbench.model_params.comp-transformer.epoch", "element_table, epochs"),
        (_cfg(models=["rf-scm-magpie"], model_params={"rf-scm-magpie": {"max_depth": 3}}), "matbench.model_params.rf-scm-magpie.max_depth", "n_estimators, n_jobs"),
    ],
)  # fmt: skip
def test_a_model_param_the_estimator_does_not_take_is_refused_when_the_config_is_checked(config, where, accepted):
    # was a bare TypeError in the job
    with pytest.raises(ConfigError) as info:
        check_config(config)
    assert (
        str(info.value).startswith(f"config error at {where}: ") and accepted in str(info.value).split("it takes: ")[1]
    )


def test_params_the_estimator_takes_pass_and_those_crucible_sets_are_named():
    check_config(_cfg(models=["gbm-magpie"], model_params={"gbm-magpie": {"max_iter": 3, "early_stopping": True}}))
    check_config(_cfg(models=["mine"], custom_models={"mine": RIDGE}, model_params={"mine": {"random_state": 1}}))
    with pytest.raises(
        ConfigError, match="matbench.model_params.rf-magpie.random_state: rf-magpie sets random_state itself"
    ):
        check_config(_cfg(models=["rf-magpie"], model_params={"rf-magpie": {"random_state": 3}}))
    # a classifier-only name is refused for a config that runs a regression task
    with pytest.raises(ConfigError, match=r"gbm-magpie \(regression\) takes no parameter 'class_weight'"):
        check_config(_cfg(models=["gbm-magpie"], model_params={"gbm-magpie": {"class_weight": "balanced"}}))
    check_config(
        _cfg(
            tasks=["matbench_expt_is_metal"],
            models=["gbm-magpie"],
            model_params={"gbm-magpie": {"class_weight": "balanced"}},
        )
    )


def test_planning_checks_a_networks_params_without_importing_torch(tmp_path):
    import subprocess

    code = (
        "import sys; from crucible.dag.config import check_config\n"
        "check_config({'matbench': {'tasks': ['matbench_steels'], 'models': ['comp-transformer'],"
        " 'model_params': {'comp-transformer': {'epochs': 2}}}})\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
