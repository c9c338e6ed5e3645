"""crucible.workflow: helpers every family's rules share (constraints, flags); the fetch rules' are
in test_sources_workflow.py."""

from __future__ import annotations

import re

from crucible import workflow as wf


def test_alternation_matches_exactly_the_names():
    pattern = re.compile(f"^(?:{wf.alternation(['gbm-magpie', 'a.b'])})$")
    assert pattern.match("gbm-magpie") and pattern.match("a.b")
    assert not pattern.match("axb") and not pattern.match("gbm")
    assert not re.match(f"^(?:{wf.alternation([])})$", "")


def test_flag_quotes_and_drops_empty_values():
    assert wf.flag("--features", "results/with space.parquet") == "--features 'results/with space.parquet'"
    assert wf.flag("--features", []) == "" and wf.flag("--x", None) == ""
