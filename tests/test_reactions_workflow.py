"""crucible.reactions.workflow: datasets, models, target lists and rule params as pure functions
of the config (the DAG itself: test_workflow_reactions.py)."""

from __future__ import annotations

import json

import pytest

from crucible.core.errors import ConfigError
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
    assert rxn.system_prompt({}) == "" and rxn.user_dataset({}, "cernak") == ""
    assert rxn.system_prompt({"reactions": {"system_prompt": "be 'brief'"}}) == "be 'brief'"


def test_rule_params_and_constraints():
    cfg = {"reactions": {"datasets": ["cernak"], "models": ["random"], "llm_models": ["gpt"]}}
    constraints = rxn.wildcard_constraints(cfg)
    assert constraints["rxn_dataset"] == "cernak" and constraints["rxn_model"] == "gpt|random"
    assert rxn.llm_responses(cfg)[0] == "results/reactions/cernak/single_varying/responses/gpt.jsonl"
    with pytest.raises(ConfigError, match=r"config reactions: reactions.models: unknown baseline\(s\) gpt-9"):
        rxn.check({"reactions": {"models": ["gpt-9"]}})


USER_TABLE = {
    "csv": "my.csv",
    "substrate_columns": ["A"],
    "yield_column": "y",
    "conditions": [{"key": "ligand", "column": "L"}],
}


def test_user_datasets_under_their_old_name_custom_datasets_mean_the_same_with_a_message(caplog):
    """One word for a user's own table in every family (user_datasets); the reactions key it had,
    custom_datasets, is read the same for one release and says so."""
    from crucible.dag.config import check_config
    from crucible.identity.name_book import Meaning

    new = {"reactions": {"datasets": ["mine"], "models": ["random"], "user_datasets": {"mine": USER_TABLE}}}
    old = {"reactions": {"datasets": ["mine"], "models": ["random"], "custom_datasets": {"mine": USER_TABLE}}}
    check_config(new)
    rxn._told.clear()
    with caplog.at_level("WARNING", logger="crucible.reactions.workflow"):
        check_config(old)
        assert rxn.final_outputs(old) == rxn.final_outputs(new) and rxn.final_outputs(new)
    assert [r.getMessage() for r in caplog.records].count(
        "config reactions.custom_datasets is deprecated: rename it reactions.user_datasets "
        "(the old key is read in this release only)"
    ) == 1
    assert rxn.raw_file(old, "mine") == rxn.raw_file(new, "mine") == "my.csv"
    assert rxn.user_dataset(old, "mine") == rxn.user_dataset(new, "mine") != ""
    names_old, names_new = rxn.names(old), rxn.names(new)
    assert {k: m.digest for k, m in names_old.items()} == {k: m.digest for k, m in names_new.items()}
    assert isinstance(names_new["reactions/dataset/mine"], Meaning)
    assert names_new["reactions/dataset/mine"].key == "reactions.user_datasets.mine"
    # the settings are what they were when the key was custom_datasets: no user table in them
    assert not {"user_datasets", "custom_datasets"} & set(names_new["reactions/settings"].spec)
    with pytest.raises(ConfigError, match="both user_datasets and custom_datasets"):
        rxn.datasets(
            {
                "reactions": {
                    "datasets": ["mine"],
                    "user_datasets": {"mine": USER_TABLE},
                    "custom_datasets": {"x": USER_TABLE},
                }
            }
        )
    with pytest.raises(ConfigError, match="reactions.user_datasets.mine: 'csv' is a required property"):
        check_config({"reactions": {"user_datasets": {"mine": {k: v for k, v in USER_TABLE.items() if k != "csv"}}}})


def test_a_baselines_parameter_it_does_not_take_is_refused_at_its_config_key():
    """A typo in a baseline's params (max_iterr) passed planning and stopped each predict job."""
    config = {"reactions": {"models": ["yield-model", "random"], "model_params": {"yield-model": {"max_iterr": 200}}}}
    with pytest.raises(ConfigError) as err:
        rxn.check(config)
    assert str(err.value) == (
        "config error at reactions.model_params.yield-model.max_iterr: the baseline yield-model takes no "
        "parameter 'max_iterr'; it takes: fp_bits, learning_rate, max_iter, random_state"
    )
    with pytest.raises(ConfigError, match=r"reactions.model_params.random.seed: .* it takes: random_state$"):
        rxn.check({"reactions": {"models": ["random"], "model_params": {"random": {"seed": 1}}}})
    with pytest.raises(ConfigError, match=r"reactions.model_params.oracle.k: .* it takes: none$"):
        rxn.check({"reactions": {"models": ["oracle"], "model_params": {"oracle": {"k": 1}}}})
    # what the baselines take passes, and builds
    taken = {"yield-model": {"max_iter": 5, "learning_rate": 0.2}, "random": {"random_state": 3}}
    rxn.check({"reactions": {"models": ["yield-model", "random"], "model_params": taken}})
