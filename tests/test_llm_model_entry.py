"""A language model's config entry: found by name in a config file or given as JSON, checked with
backend defaults filled in; every error names the key."""

from __future__ import annotations

import pytest
import yaml

from crucible.core.errors import ConfigError
from crucible.llm.model_entry import DEFAULT_PARAMS, OPENAI_DEFAULTS, model_entry, model_spec


def test_entry_from_the_config_file_or_json(tmp_path):
    cfg = tmp_path / "config.yaml"
    entry = {"backend": "replay", "path": "answers/{benchmark}/{dataset}.jsonl"}
    cfg.write_text(yaml.safe_dump({"llm": {"models": {"replayed": entry}}}))
    assert model_entry("replayed", config_file=str(cfg)) == entry
    assert model_entry("x", spec_json='{"backend": "replay", "path": "p"}') == {"backend": "replay", "path": "p"}
    with pytest.raises(ConfigError, match=r"config.yaml: llm.models has no 'gpt' \(has: replayed\)"):
        model_entry("gpt", config_file=str(cfg))
    with pytest.raises(ConfigError, match="--model-spec: not valid JSON"):
        model_entry("x", spec_json="{backend: replay}")
    cfg.write_text("")
    with pytest.raises(ConfigError, match=r"has: none"):
        model_entry("gpt", config_file=str(cfg))


def test_spec_fills_backend_defaults_and_names_wrong_keys():
    spec = model_spec("m", {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"})
    assert {k: spec[k] for k in OPENAI_DEFAULTS} == OPENAI_DEFAULTS
    assert spec["params"] == DEFAULT_PARAMS and spec["max_failed_fraction"] == 0.0
    with pytest.raises(ConfigError, match=r"llm.models.m: backend openai needs base_url"):
        model_spec("m", {"backend": "openai", "model": "m"})
    with pytest.raises(ConfigError, match=r"llm.models.m.params: unknown key\(s\) temprature"):
        model_spec("m", {"backend": "replay", "path": "p", "params": {"temprature": 0}})


@pytest.mark.parametrize(
    "spec, match",
    [
        # a hand-run job skips the workflow's schema check: a bare ValueError, an unknown key ignored
        (
            '{"backend": "replay", "path": "p", "params": {"temperature": "hot"}}',
            r"llm.models.x.params.temperature: 'hot' is not",
        ),
        ('{"backend": "replay", "path": "p", "pathh": "x"}', r"llm.models.x: unexpected key 'pathh'"),
        ('["x"]', r"llm.models.x: \['x'\] is not of type 'object'"),
    ],
)
def test_an_entry_given_by_hand_is_checked_against_the_schema(tmp_path, spec, match):
    with pytest.raises(ConfigError, match=f"--model-spec: config error at {match}"):
        model_entry("x", spec_json=spec)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"llm": {"models": {"x": yaml.safe_load(spec)}}}))
    with pytest.raises(ConfigError, match=f"config.yaml: config error at {match}"):
        model_entry("x", config_file=str(cfg))
