"""Plugging in your own model: an estimator by class path (errors named). The estimator and
prediction files made elsewhere, through the DAG: test_workflow_matbench.py."""

from __future__ import annotations

import pytest

from crucible.core.errors import ConfigError
from crucible.models.registry import get_spec


def test_custom_model_class_errors_are_named():
    with pytest.raises(ConfigError, match="cannot import 'nowhere.mod:Model'"):
        get_spec("x", {"x": {"class": "nowhere.mod:Model"}})
    with pytest.raises(ConfigError, match="unknown model 'nope'; known models: .*comp-transformer.*dummy.*gbm-magpie"):
        get_spec("nope")
