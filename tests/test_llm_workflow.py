"""crucible.llm.workflow: response targets, models by backend, rule params (the llm_generate rules
in the DAG: test_workflow_llm.py)."""

from __future__ import annotations

import pytest

from crucible.errors import ConfigError
from crucible.llm import workflow


def config(server_url="http://127.0.0.1:9/v1", ckpt="/nonexistent", replay="answers/{benchmark}/{dataset}.jsonl"):
    return {
        "llm": {
            "models": {
                "echo": {
                    "backend": "openai",
                    "model": "echo-7b",
                    "base_url": server_url,
                    "api_key_env": "CRUCIBLE_DAG_KEY",
                    "backoff_s": 0.01,
                    "params": {"max_tokens": 8},
                },
                "replayed": {"backend": "replay", "path": replay},
                "tiny": {"backend": "transformers", "path": ckpt, "batch_size": 4, "params": {"max_tokens": 4}},
            }
        },
        "crystal": {"llm_models": ["echo", "tiny"]},
    }


def test_response_targets_for_a_benchmark():
    cfg = config()
    assert workflow.response_targets(cfg, "crystal", ["mp-20", "perov-5"]) == [
        "results/crystal/mp-20/responses/echo.jsonl",
        "results/crystal/mp-20/responses/tiny.jsonl",
        "results/crystal/perov-5/responses/echo.jsonl",
        "results/crystal/perov-5/responses/tiny.jsonl",
    ]
    assert workflow.response_targets(cfg, "reactions", ["buchwald-hartwig/single_varying"], models=["replayed"]) == [
        "results/reactions/buchwald-hartwig/single_varying/responses/replayed.jsonl"
    ]
    assert workflow.models_by_backend(cfg, ["transformers"]) == ["tiny"]
    assert workflow.replay_input(cfg, "replayed", "reactions", "bh/x") == ["answers/reactions/bh/x.jsonl"]
    assert workflow.replay_input(cfg, "echo", "reactions", "bh/x") == []
    with pytest.raises(ConfigError, match=r"config crystal.llm_models: gpt-9 not defined under llm.models"):
        workflow.response_targets({**cfg, "crystal": {"llm_models": ["gpt-9"]}}, "crystal", ["mp-20"])
    with pytest.raises(ConfigError, match="one path component"):
        workflow.response_targets(cfg, "a/b", ["x"])
    with pytest.raises(ConfigError, match=r"llm.models.bad: backend openai needs base_url"):
        workflow.llm_models({"llm": {"models": {"bad": {"backend": "openai", "model": "m"}}}})


def test_rule_params_and_the_family_target():
    cfg = config()
    assert workflow.replay_flag([]) == "" and workflow.replay_flag(["a b.jsonl"]) == "--replay-file 'a b.jsonl'"
    assert workflow.cache_dir({}) == "results/llm/cache"
    assert workflow.wildcard_constraints(cfg, ["transformers"])["llm_model"] == "tiny"
    # `snakemake llm`: every response file a benchmark asks for, nothing when none asks
    cfg["crystal"]["datasets"] = ["aflow-prototypes"]
    assert workflow.final_outputs(cfg) == [
        "results/crystal/aflow-prototypes/responses/echo.jsonl",
        "results/crystal/aflow-prototypes/responses/tiny.jsonl",
    ]
    assert workflow.final_outputs({"llm": cfg["llm"]}) == []
