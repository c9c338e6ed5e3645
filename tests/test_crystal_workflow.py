"""crucible.crystal.workflow: the crystal family's targets and rule params, as pure functions of
the config (the DAG itself: test_workflow_crystal.py)."""

from __future__ import annotations

import json

import pytest

from crucible.crystal import workflow as wf
from crucible.errors import ConfigError


def test_defaults_come_from_the_schema():
    assert wf.final_outputs({}) == []  # no dataset unless asked for
    assert wf.generators({}) == ["template", "random-symmetric"]
    assert wf.build_params({}) == {
        "template": "composition-v1",
        "test_fraction": 0.5,
        "seed": 0,
        "max_sites": 20,
        "max_test_items": 0,
        "max_train_items": 0,
    }
    assert wf.generation_seed({}) == 0 and wf.score_timeout({}) == 10


def test_targets_and_responders():
    cfg = {
        "crystal": {"datasets": ["aflow-prototypes"], "generators": ["template"], "llm_models": ["gpt"]},
        "llm": {"models": {"gpt": {"backend": "replay", "path": "a/{benchmark}/{dataset}.jsonl"}}},
    }
    assert wf.responders(cfg) == ["template", "gpt"]
    assert wf.score_summaries(cfg, "aflow-prototypes") == [
        "results/crystal/aflow-prototypes/scores/template.json",
        "results/crystal/aflow-prototypes/scores/gpt.json",
    ]
    assert "results/tables/crystal_aflow-prototypes.tex" in wf.final_outputs(cfg)
    assert wf.llm_responses(cfg) == ["results/crystal/aflow-prototypes/responses/gpt.jsonl"]
    assert json.loads(wf.generator_params(cfg, "template")) == {}
    assert wf.response_info("results/crystal/x/responses/gpt.jsonl") == "results/crystal/x/responses/gpt.json"


def test_wildcards_match_only_configured_names():
    cfg = {"crystal": {"datasets": ["mp-20"]}}
    assert wf.wildcard_constraints(cfg) == {"crystal_dataset": r"mp\-20"}
    assert wf.wildcard_constraints(cfg, device="gpu")["crystal_generator"] == "mlip\\-search"


@pytest.mark.parametrize(
    "crystal, message",
    [
        ({"datasets": ["mp-21"]}, "config crystal.datasets: unknown mp-21"),
        ({"llm_models": ["gpt-9"]}, "config crystal.llm_models: gpt-9 not defined under llm.models"),
    ],
)
def test_check_names_the_key(crystal, message):
    with pytest.raises(ConfigError, match=message):
        wf.check({"crystal": crystal})
