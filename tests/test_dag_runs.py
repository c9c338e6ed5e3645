"""crucible.dag.runs: a config merged over config/config.yaml that runs another Matbench set and
names no run gets a run of its own, named after its file, so that its aggregates never replace
the full run's (the README's own-model example rewrote the full run's leaderboard to 2 tasks).
The DAG side: tests/test_workflow_compose.py."""

from __future__ import annotations

import copy

import pytest
import yaml

from crucible.dag.families import families
from crucible.dag.runs import name_from_file, name_runs

FULL = {
    "matbench": {
        "tasks": ["matbench_steels", "matbench_expt_gap", "matbench_glass"],
        "models": ["dummy", "gbm-magpie"],
    },
    "mlip": {"models": ["emt"]},
}


def _merged(base: dict, *overlays: dict) -> dict:
    config = copy.deepcopy(base)
    for overlay in overlays:
        for key, value in overlay.items():
            if isinstance(value, dict) and isinstance(config.get(key), dict):
                config[key] = {**config[key], **value}
            else:
                config[key] = value
    return config


def _files(tmp_path, **overlays):
    (tmp_path / "config").mkdir(exist_ok=True)
    (tmp_path / "config/config.yaml").write_text(yaml.safe_dump(FULL))
    paths = []
    for name, overlay in overlays.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(overlay))
        paths.append(str(tmp_path / f"{name}.yaml"))
    return paths


def _name(tmp_path, monkeypatch, **overlays):
    monkeypatch.chdir(tmp_path)
    paths = _files(tmp_path, **overlays)
    config = _merged(FULL, *overlays.values())
    lines = name_runs(config, families(), paths)
    return config, lines


def test_a_subset_config_runs_under_its_files_name(tmp_path, monkeypatch):
    mine = {"matbench": {"tasks": ["matbench_steels"], "models": ["dummy", "formula-length"]}}
    config, lines = _name(tmp_path, monkeypatch, mine=mine)
    assert config["matbench"]["run_name"] == "mine"
    assert len(lines) == 1 and "results/runs/mine/" in lines[0] and "matbench.run_name: default" in lines[0]
    assert "run_name" not in config["mlip"]  # mlip has no named runs


def test_the_full_set_a_named_run_and_no_config_file_stay_as_they_are(tmp_path, monkeypatch):
    # another setting, the same set: the full run's own (a new meaning is the name book's concern)
    config, lines = _name(tmp_path, monkeypatch, speed={"matbench": {"model_params": {"gbm-magpie": {"max_iter": 3}}}})
    assert "run_name" not in config["matbench"] and lines == []
    # the whole set and more (config/paper.yaml, a model of yours on every task): it grows the
    # full run's aggregates, nothing is lost
    more = {"matbench": {"models": ["dummy", "gbm-magpie", "formula-length"]}}
    config, lines = _name(tmp_path, monkeypatch, more=more)
    assert "run_name" not in config["matbench"] and lines == []
    # the user named the run, `default` included: as it says
    for name in ("steels", "default"):
        subset = {"matbench": {"tasks": ["matbench_steels"], "run_name": name}}
        config, lines = _name(tmp_path, monkeypatch, mine=subset)
        assert config["matbench"]["run_name"] == name and lines == []
    # a family switched off or left to the base: nothing to keep apart
    config, lines = _name(tmp_path, monkeypatch, off={"matbench": {"enabled": False}, "mlip": {"models": []}})
    assert "run_name" not in config["matbench"] and lines == []
    # no --configfile: the base itself is the run
    config = copy.deepcopy(FULL)
    assert name_runs(config, families(), []) == [] and "run_name" not in config["matbench"]


def test_no_base_config_file_names_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({"matbench": {"tasks": ["matbench_steels"]}}))
    config = {"matbench": {"tasks": ["matbench_steels"], "models": ["dummy"]}}
    assert name_runs(config, families(), [str(tmp_path / "mine.yaml")]) == []
    assert "run_name" not in config["matbench"]


def test_the_name_comes_from_the_last_file_that_sets_the_section(tmp_path, monkeypatch):
    subset = {"matbench": {"tasks": ["matbench_steels"]}}
    config, _ = _name(tmp_path, monkeypatch, steels=subset, mirror={"discovery": {"url_prefix": "http://x"}})
    assert config["matbench"]["run_name"] == "steels"


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("mine.yaml", "mine"),
        (".test/matbench/config.yaml", "matbench"),
        ("/tmp/my run (2).yml", "my-run-2"),
        ("__.yaml", "subset"),
    ],
)
def test_run_names_from_file_names_are_valid_run_names(path, name):
    from crucible.dag.config_names import check_name

    assert name_from_file(path) == name
    check_name(name, "matbench.run_name")
