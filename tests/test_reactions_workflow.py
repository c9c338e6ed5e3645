"""crucible.reactions.workflow: datasets, models, target lists and rule params as pure functions
of the config (the DAG itself: test_workflow_reactions.py)."""

from __future__ import annotations

import json

import pytest

from crucible.errors import ConfigError
from crucible.reactions import workflow as rxn
from crucible.reactions.questions import DEFAULTS
from crucible.reactions.scoring import QUESTION_TYPES


def test_target_lists():
    cfg = {
        "reactions": {
            "datasets": ["direct-arylation", "cernak"],
            "models": ["random", "yield-model"],
            "llm_models": ["m1"],
        }
    }
    assert rxn.models(cfg, "direct-arylation") == ["random", "m1"]  # one substrate: nothing to leave out
    assert rxn.models(cfg, "cernak") == ["random", "yield-model", "m1"]
    assert "results/tables/reactions_cernak.tex" in rxn.final_outputs(cfg)
    with pytest.raises(ConfigError, match="also a baseline"):
        rxn.llm_models({"reactions": {"llm_models": ["random"]}})
    assert rxn.final_outputs({}) == []


def test_defaults_come_from_the_schema_and_agree_with_the_library():
    assert rxn.question_types({}) == list(QUESTION_TYPES)
    assert json.loads(rxn.question_params({})) == DEFAULTS
    assert rxn.bootstrap({}) == {"n": 1000, "seed": 0}
    assert rxn.system_prompt({}) == "" and rxn.custom_dataset({}, "cernak") == ""
    assert rxn.system_prompt({"reactions": {"system_prompt": "be 'brief'"}}) == "be 'brief'"


def test_rule_params_and_constraints():
    cfg = {"reactions": {"datasets": ["cernak"], "models": ["random"], "llm_models": ["gpt"]}}
    constraints = rxn.wildcard_constraints(cfg)
    assert constraints["rxn_dataset"] == "cernak" and constraints["rxn_model"] == "gpt|random"
    assert rxn.llm_responses(cfg)[0] == "results/reactions/cernak/single_varying/responses/gpt.jsonl"
    with pytest.raises(ConfigError, match=r"config reactions: reactions.models: unknown baseline\(s\) gpt-9"):
        rxn.check({"reactions": {"models": ["gpt-9"]}})
