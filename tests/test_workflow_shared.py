"""crucible.dag.rules: helpers every family's rules share (constraints); the fetch rules' are
in test_sources_workflow.py."""

from __future__ import annotations

import re

from crucible.dag import rules as wf


def test_alternation_matches_exactly_the_names():
    pattern = re.compile(f"^(?:{wf.alternation(['gbm-magpie', 'a.b'])})$")
    assert pattern.match("gbm-magpie") and pattern.match("a.b")
    assert not pattern.match("axb") and not pattern.match("gbm")
    assert not re.match(f"^(?:{wf.alternation([])})$", "")
