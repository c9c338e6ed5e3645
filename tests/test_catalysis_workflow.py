"""crucible.catalysis.workflow: datasets, potentials, chunks and rule params as pure functions of
the config (the DAG itself: test_workflow_catalysis.py)."""

from __future__ import annotations

import json

import pytest

from crucible.catalysis import workflow as wf
from crucible.catalysis.calculation import DEFAULTS
from crucible.core.errors import ConfigError


def test_defaults_come_from_the_schema_and_agree_with_the_library():
    assert json.loads(wf.relax_params({})) == DEFAULTS
    assert json.loads(wf.thresholds({})) == {"n_crit_relax": DEFAULTS["max_steps"]}
    assert wf.n_chunks({}) == 1 and wf.final_outputs({}) == []
    spec = wf.dataset_spec({"catalysis": {"datasets": {"d": {"path": "x.json"}}}}, "d")
    assert spec["format"] == "catbench-json" and spec["filtering"] == "catbench" and spec["coefficients"] == {}
    # no tolerance unless configured: the filtering rule set's own (1e-3 eV catbench, 1e-4 eV strict)
    assert "tolerance" not in spec and wf.tolerance(spec) == ""
    assert wf.tolerance({"path": "x.json", "filtering": "strict", "tolerance": 0.01}) == "0.01"


def test_potentials_default_to_mlip_models_and_paths_follow_them():
    cfg = {"mlip": {"models": ["emt"]}, "catalysis": {"chunks": 2, "datasets": {"d": {"path": "x.json"}}}}
    assert wf.models(cfg) == ["emt"]
    assert wf.chunk_files(cfg, "d", "emt") == [
        "results/catalysis/d/calc/emt/chunk_0.json",
        "results/catalysis/d/calc/emt/chunk_1.json",
    ]
    assert wf.analysis_files(cfg, "d", "parquet") == ["results/catalysis/d/analysis/emt.parquet"]
    assert wf.wildcard_constraints(cfg) == {"cat_dataset": "d", "cat_model": "emt"}
    url = {"catalysis": {"datasets": {"Mamun": {"url": "https://z/{name}_adsorption.json"}}}}
    assert wf.download_url(url, "Mamun") == "https://z/Mamun_adsorption.json"
    assert wf.raw_input(url, "Mamun") == "resources/catalysis/Mamun/Mamun_adsorption.json"


@pytest.mark.parametrize(
    "catalysis, message",
    [
        ({"datasets": {"x": {"format": "vasp-tree", "path": "/t"}}, "models": ["emt"]}, "needs 'coefficients'"),
        ({"datasets": {"x": {"path": "/a", "url": "http://b"}}, "models": ["emt"]}, "exactly one of 'path' or 'url'"),
        ({"datasets": {"x": {"path": "/a"}}}, "no potentials"),
    ],
)
def test_check_names_the_dataset(catalysis, message):
    with pytest.raises(ConfigError, match=message):
        wf.check({"catalysis": catalysis})
