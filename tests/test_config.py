"""Config checks at start-up (issue 10, points 4, 5, 10): a config that would run the wrong
thing, or nothing, is refused before any job starts, with the key path and the cause only."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from crucible.config import check_config
from crucible.errors import ConfigError
from crucible.mlip.eos import eos_volumes

from helpers import REPO

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


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
    ],
)
def test_bad_configs_are_refused_with_the_key_path(config, message):
    with pytest.raises(ConfigError) as info:
        check_config(config, SCHEMA)
    text = str(info.value)
    assert message in text
    # The cause and the key path, not the schema.
    assert len(text.splitlines()) <= 3 and "additionalProperties" not in text and len(text) < 600


def test_good_configs_pass():
    check_config(yaml.safe_load((REPO / "config" / "config.yaml").read_text()), SCHEMA)
    check_config(yaml.safe_load((REPO / "config" / "paper.yaml").read_text()), SCHEMA)
    check_config(
        _cfg(
            model_params={"dummy": {}},
            custom_models={"mine": {"class": "a.b:C"}},
            prediction_files={"theirs": {"dir": "x"}},
        ),
        SCHEMA,
    )
    check_config({**_cfg(), "mlip": {"eos": {"volume_range": [0.9, 1.1]}}}, SCHEMA)


@pytest.mark.parametrize("volume_range", [(0.5, 3.0), (0.97, 1.03), (0.94, 1.3)])
def test_eos_volume_range_the_fit_and_delta_cannot_use_is_refused(volume_range):
    with pytest.raises(ConfigError, match="volume_range"):
        eos_volumes(16.0, 7, volume_range)
    assert len(eos_volumes(16.0, 7, (0.94, 1.06))) == 7


@pytest.mark.slow
def test_snakemake_prints_the_cause_not_the_schema(tmp_path, venv_env):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(_cfg(model_params={"gbm-magpi": {"max_iter": 5}})))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--snakefile",
            str(REPO / "Snakefile"),
            "--directory",
            str(tmp_path),
            "--configfile",
            str(cfg),
            "--dry-run",
        ],
        env=venv_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "matbench.model_params.gbm-magpi" in out
    assert len(out.splitlines()) < 15, out


def test_a_file_where_an_output_folder_goes_is_named(tmp_path):
    from crucible.config import check_output_dirs

    check_output_dirs(tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "tables").write_text("oops")
    with pytest.raises(ConfigError, match=r"results/tables is a file"):
        check_output_dirs(tmp_path)


def test_readme_troubleshooting_names_unlock_and_the_configfile_trap():
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Troubleshooting") :]
    assert "--unlock" in section and "--configfile" in section and "targets" in section
    assert "--report-after-run" in readme


def test_the_project_directory_goes_on_the_jobs_python_path(tmp_path, monkeypatch):
    import os

    from crucible.config import put_on_python_path

    monkeypatch.setenv("PYTHONPATH", "/somewhere/src")
    monkeypatch.setattr(sys, "path", list(sys.path))
    put_on_python_path(tmp_path)
    put_on_python_path(tmp_path)  # idempotent
    assert os.environ["PYTHONPATH"].split(os.pathsep) == [str(tmp_path), "/somewhere/src"]
    assert sys.path[0] == str(tmp_path)
