"""The JSON scan both answer parsers share: which embedded values it reports, and that hostile
text (deep nests, huge integers, 10^5 openers) is skipped in linear time, never raised."""

from __future__ import annotations

import pytest

from crucible.llm import json_text
from crucible.llm.json_text import decode_prefix, embedded_json


def values(text, openers="{["):
    return [(v, text[s:e]) for v, s, e in embedded_json(text, openers)]


def test_values_left_to_right_with_their_source_span():
    text = 'Sure! {"answer": 2} and [1, 2] then {"a": {"b": 1}} done'
    assert values(text) == [({"answer": 2}, '{"answer": 2}'), ([1, 2], "[1, 2]"), ({"a": {"b": 1}}, '{"a": {"b": 1}}')]
    assert values(text, "{") == [({"answer": 2}, '{"answer": 2}'), ({"a": {"b": 1}}, '{"a": {"b": 1}}')]
    # A value inside an array that decoded is not reported on its own; inside one that did not, it is.
    assert values('[{"answer": 1}]', "{[") == [([{"answer": 1}], '[{"answer": 1}]')]
    assert values('[{"answer": 1}, oops]', "{[") == [({"answer": 1}, '{"answer": 1}')]


def test_openers_that_start_no_value_are_skipped():
    assert values("{not json} {'single': 1} {\"ok\": true}") == [({"ok": True}, '{"ok": true}')]
    assert values("no brackets at all") == [] and values("") == []
    assert values("}{") == []


def test_hostile_text_is_skipped_not_raised(monkeypatch):
    deep = '{"a": ' * 50_000 + "1" + "}" * 50_000
    assert decode_prefix(deep) is None  # RecursionError inside the decoder
    huge = '{"answer": ' + "9" * 5000 + "}"  # past Python's int-string limit: ValueError
    assert decode_prefix(huge) is None and values(huge) == []
    assert values('x {"answer": 1}' + "[" * 100_000) == [({"answer": 1}, '{"answer": 1}')]
    tries = []
    monkeypatch.setattr(json_text, "decode_prefix", lambda *a: tries.append(a) or decode_prefix(*a))
    assert values("[" * 100_000) == [] and values("{" * 100_000 + "x") == []
    assert tries == []  # no closer after them: the scan stops at once, no decode tried
    monkeypatch.undo()
    assert values("[" * 2000 + "]") == [([], "[]")]  # only the innermost pair decodes


def test_decode_prefix_ignores_trailing_text_and_reports_the_end():
    assert decode_prefix('{"a": 1} trailing', 0) == ({"a": 1}, 8)
    assert decode_prefix("xx[1]", 2) == ([1], 5)
    assert decode_prefix("xx", 0) is None


def test_openers_are_checked():
    with pytest.raises(ValueError, match="openers"):
        list(embedded_json("{}", "("))
    with pytest.raises(ValueError, match="openers"):
        list(embedded_json("{}", ""))
