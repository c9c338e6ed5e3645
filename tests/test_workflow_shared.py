"""crucible.workflow: helpers every family's rules share (artifacts, constraints, flags)."""

from __future__ import annotations

import re

import pytest

from crucible import workflow as wf
from crucible.errors import ConfigError

SOURCES = {
    "artifacts": {
        "crabnet-2.0.8": {
            "filename": "crabnet-2.0.8-py3-none-any.whl",
            "members": {"b.csv": {}, "a.csv": {"sha256": "ab" * 32}},
        }
    }
}


def test_artifacts():
    assert wf.artifact_file(SOURCES, "crabnet-2.0.8") == "resources/downloads/crabnet-2.0.8-py3-none-any.whl"
    assert wf.artifact_name(SOURCES, "crabnet-2.0.8-py3-none-any.whl") == "crabnet-2.0.8"
    assert wf.artifact_members(SOURCES, "crabnet-2.0.8") == [
        "resources/extracted/crabnet-2.0.8/a.csv",
        "resources/extracted/crabnet-2.0.8/b.csv",
    ]
    with pytest.raises(ConfigError, match="no artifact in config/sources.yaml is saved as x.whl"):
        wf.artifact_name(SOURCES, "x.whl")
    assert wf.member_pin(SOURCES, "crabnet-2.0.8", "a.csv") == "ab" * 32


def test_alternation_matches_exactly_the_names():
    pattern = re.compile(f"^(?:{wf.alternation(['gbm-magpie', 'a.b'])})$")
    assert pattern.match("gbm-magpie") and pattern.match("a.b")
    assert not pattern.match("axb") and not pattern.match("gbm")
    assert not re.match(f"^(?:{wf.alternation([])})$", "")


def test_flag_quotes_and_drops_empty_values():
    assert wf.flag("--features", "results/with space.parquet") == "--features 'results/with space.parquet'"
    assert wf.flag("--features", []) == "" and wf.flag("--x", None) == ""
