"""The fuzz contract of every YAML file a user gives (crucible.core.yaml_files), and of repeated keys
in the answers a model gives.

From each real file (the workflow's configs, config/sources.yaml, the published tables, the
prompt templates, a language-model job's config file, a Matbench Discovery model card), hypothesis makes mutations: a key given
twice in a mapping anywhere, an alias bomb (lists or mappings, 5 to 12 levels), a mapping that
contains itself, a ``!!python`` tag or a lone surrogate at a leaf, a byte that is not UTF-8,
truncation, a BOM, CRLF, a tab. Passing means: the reader gives the real file's value, or raises
a :class:`~crucible.core.errors.CrucibleError` naming the file (the hostile mutations must be
refused, a bomb before its document is built). Any other exception fails, and so does a module that reads
YAML without a case here. ``derandomize``: the same examples on every run.
"""

from __future__ import annotations

import copy
import json
import re
import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crucible.core import yaml_files
from crucible.core.errors import CrucibleError

from helpers import REPO

FUZZ = settings(
    max_examples=60, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
DUP, LEAF = "zz_dup_marker_", "zz_leaf_marker_"


def _checked_config(path):
    from crucible.core.yaml_files import load_yaml
    from crucible.dag.config import check_config

    doc = load_yaml(path)
    try:
        check_config(doc)
    except CrucibleError as exc:  # the workflow names the key path (its config may be several files)
        raise CrucibleError(f"{path}: {exc}") from None
    return doc


def _sources(path):
    from crucible.sources.pins import load_sources

    return load_sources(path)


def _published_matbench(path):
    from crucible.matbench.leaderboard import load_published

    return load_published(path)


def _published_crystal(path):
    from crucible.crystal.csp_table import load_published

    return load_published(path)


def _prompts(path):
    from crucible.crystal.items import load_templates

    return load_templates(path)


def _model_card(path):
    from crucible.discovery.data import published_row
    from crucible.discovery.wbm import published_rows

    # no role: the card a url_prefix mirror serves, before its pin; its diatomics and discovery rows
    return published_row(path), published_rows(path)


def _llm_entry(path):
    from crucible.llm.model_entry import entry_from_config_files

    return entry_from_config_files([path], "echo")


CASES: dict[str, tuple[Path, Callable[[Path], Any]]] = {
    "config": (REPO / "config" / "config.yaml", _checked_config),
    "config-paper": (REPO / "config" / "paper.yaml", _checked_config),
    "config-matbench-test": (REPO / ".test" / "matbench" / "config.yaml", _checked_config),
    "sources": (REPO / "config" / "sources.yaml", _sources),
    "published-matbench": (REPO / "config" / "published_matbench.yaml", _published_matbench),
    "published-crystal": (REPO / "config" / "published_crystal.yaml", _published_crystal),
    "crystal-prompts": (REPO / "config" / "crystal_prompts.yaml", _prompts),
    "llm-config-file": (REPO / ".test" / "llm" / "config.yaml", _llm_entry),
    "discovery-model-card": (REPO / "tests" / "data" / "discovery" / "chgnet-0.3.0.yml", _model_card),
}
# Each module that reads a user's YAML, and the cases that reach its reader. The Snakefile's
# check of the config files is load_yaml itself (the "config" cases).
READERS = {
    "sources/pins.py": {"sources"},
    "matbench/leaderboard.py": {"published-matbench"},
    "crystal/csp_table.py": {"published-crystal"},
    "crystal/items.py": {"crystal-prompts"},
    "llm/model_entry.py": {"llm-config-file"},
    "discovery/data.py": {"discovery-model-card"},
    "discovery/wbm.py": {"discovery-model-card"},
    "discovery/phonons/report.py": {"discovery-model-card"},
    # config/config.yaml and the user's --configfile files, read to name a subset run
    "dag/runs.py": {"config", "config-matbench-test"},
}
NOT_USER_YAML = {"core/yaml_files.py": "the reader itself", "dag/config.py": "the packaged schemas"}


def test_every_yaml_reader_has_a_fuzz_case():
    src = REPO / "src" / "crucible"
    found = {
        str(p.relative_to(src))
        for p in src.rglob("*.py")
        if re.search(r"\b(load_yaml|load_mapping|loads_yaml|check_config_files)\(", p.read_text(encoding="utf-8"))
    }
    assert found - set(NOT_USER_YAML) == set(READERS)
    assert set().union(*READERS.values()) <= set(CASES)


def _paths(doc, here=()):
    """(mapping paths, leaf paths) of a YAML document."""
    maps, leaves = [], []
    if isinstance(doc, dict):
        maps.append(here) if doc else None
        items = doc.items()
    elif isinstance(doc, list):
        items = enumerate(doc)
    else:
        return maps, [here]
    for k, v in items:
        m, leaf = _paths(v, here + (k,))
        maps += m
        leaves += leaf
    return maps, leaves


def _get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def _dump(doc) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=10**6)


def _key_text(key) -> str:
    return yaml.safe_dump(key).split("\n")[0]


def list_bomb(levels: int) -> str:
    lines = ['zz0: &zz0 ["lol"]'] + [f"zz{i}: &zz{i} [{', '.join([f'*zz{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def mapping_bomb(levels: int) -> str:
    lines = ["zz0: &zz0 {x: lol}"]
    lines += [f"zz{i}: &zz{i} {{{', '.join(f'k{j}: *zz{i - 1}' for j in range(10))}}}" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


HOSTILE_LEAVES = {
    "python-tag": "!!python/object/apply:os.system ['true']",
    "python-name": "!!python/name:os.system",
    "surrogate": '"\\ud800"',
    "low-surrogate": '"x\\udfff"',
}
COUNTS: dict[str, dict[str, int]] = {}


def _outcome(name: str, data: bytes, expected, read, other_ok: bool = False) -> str:
    """ "same", "refused" (naming the file) or, where ``other_ok`` (a cut that leaves a shorter
    valid file), "other"; any other exception fails."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzzed.yaml"
        path.write_bytes(data)
        try:
            got = read(path)
        except CrucibleError as exc:
            assert str(path) in str(exc), f"{name}: refusal does not name the file: {exc}"
            return "refused"
        if got != expected and other_ok:
            return "other"
        assert got == expected, f"{name}: another value than the real file's, without an error"
        return "same"


@pytest.fixture(scope="module")
def canonical():
    out = {}
    for name, (path, read) in CASES.items():
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        text = _dump(doc)
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "c.yaml").write_text(text, encoding="utf-8")
            expected = read(Path(tmp) / "c.yaml")
        assert expected == read(path), f"{name}: the dumped file reads otherwise than the real one"
        out[name] = (doc, text, expected)
    yield out
    print("\nYAML fuzz cases per file (mutation: outcome count):")
    for name, counts in sorted(COUNTS.items()):
        print(f"  {name}: {json.dumps(counts, sort_keys=True)}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_yaml_mutations_give_the_same_value_or_a_refusal_naming_the_file(canonical, name, monkeypatch):
    doc, text, expected = canonical[name]
    read = CASES[name][1]
    maps, leaves = _paths(doc)
    counts = COUNTS.setdefault(name, {})
    # documents the strict loader built: a bomb must be refused before its document is (on the
    # composed nodes, never expanded), whatever the machine's speed
    built: list[int] = []
    construct = yaml_files.StrictLoader.construct_document
    monkeypatch.setattr(
        yaml_files.StrictLoader, "construct_document", lambda self, node: built.append(1) or construct(self, node)
    )
    kinds = ["duplicate", "bomb", "self", "leaf", "bad-byte", "truncate", "bom", "crlf", "tab"]

    @FUZZ
    @given(st.data())
    def run(draw):
        how = draw.draw(st.sampled_from(kinds))
        must_refuse = how in ("duplicate", "bomb", "self", "leaf", "bad-byte")
        if how == "duplicate":
            mutated = copy.deepcopy(doc)
            target = _get(mutated, draw.draw(st.sampled_from(maps)))
            first = next(iter(target))
            target[DUP] = target[first]
            body = _dump(mutated).replace(f"{DUP}:", f"{_key_text(first)}:", 1)
        elif how == "bomb":
            levels, bomb = draw.draw(st.integers(5, 12)), draw.draw(st.sampled_from([list_bomb, mapping_bomb]))
            body = text + bomb(levels)
        elif how == "self":
            body = text + "zz_self: &zz_self {x: [1, *zz_self]}\n"
        elif how == "leaf":
            mutated = copy.deepcopy(doc)
            path = draw.draw(st.sampled_from(leaves))
            _get(mutated, path[:-1])[path[-1]] = LEAF
            how = draw.draw(st.sampled_from(sorted(HOSTILE_LEAVES)))
            body = _dump(mutated).replace(LEAF, HOSTILE_LEAVES[how], 1)
        elif how == "bad-byte":
            cut = draw.draw(st.integers(0, len(text)))
            data = text.encode()
            body = data[:cut] + draw.draw(st.sampled_from([b"\xff", b"\xc3(", b"\xed\xa0\x80"])) + data[cut:]
        elif how == "truncate":
            body = text[: draw.draw(st.integers(1, len(text) - 1))]
        elif how == "bom":
            body = "\ufeff" + text
        elif how == "crlf":
            body = text.replace("\n", "\r\n")
        else:
            lines = text.split("\n")
            indented = [i for i, line in enumerate(lines) if line.startswith("  ")] or [0]
            i = draw.draw(st.sampled_from(indented))
            lines[i] = "\t" + lines[i].lstrip(" ")
            body = "\n".join(lines)
        data = body if isinstance(body, bytes) else body.encode()
        before = len(built)
        outcome = _outcome(name, data, expected, read, other_ok=how == "truncate")
        counts[f"{how}:{outcome}"] = counts.get(f"{how}:{outcome}", 0) + 1
        if must_refuse or how in HOSTILE_LEAVES:
            assert outcome == "refused", f"{name}: {how} was read"
        if how in ("bom", "crlf"):
            assert outcome == "same", f"{name}: {how} changed the reading"
        if how == "bomb":
            assert len(built) == before, f"{name}: a bomb's document was built before its refusal"

    run()
    monkeypatch.setenv("CRUCIBLE_MAX_INPUT_MB", "1")  # a file past the bound: refused, not read
    assert _outcome(name, (text + "#" * 2**21 + "\n").encode(), expected, read) == "refused"
    assert counts.get("duplicate:refused", 0) > 0 and counts.get("bomb:refused", 0) > 0


# ------------------------------------------------------------------- repeated keys in answers

ANSWER_KEYS = st.sampled_from(["answer", "reasoning", "confidence", "a", "lattice_parameters"])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(0, 5) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANSWER_KEYS, inner, max_size=3),
    max_leaves=6,
)


@FUZZ
@given(
    st.dictionaries(ANSWER_KEYS, JSON_VALUES, min_size=1, max_size=4),
    st.data(),
    st.sampled_from(["", "Sure! ", "```json\n"]),
)
def test_an_answer_with_a_key_given_twice_is_invalid_in_both_answer_parsers(obj, data, prefix):
    from crucible.crystal.parsing import ParseFailure, parse_crystal_response
    from crucible.reactions.prompts import read_conditions_answer

    key = data.draw(st.sampled_from(sorted(obj)))
    other = data.draw(JSON_VALUES)
    text = json.dumps(obj)[:-1] + f", {json.dumps(key)}: {json.dumps(other)}}}"
    text = prefix + text + ("\n```" if prefix.startswith("```") else "")
    answer, why = read_conditions_answer(text, {"options": list(range(6))})
    assert answer is None and f"key {key!r} is given twice" in why, (text, answer, why)
    crystal = parse_crystal_response(text.ljust(60))
    assert isinstance(crystal, ParseFailure) and "given twice" in crystal.detail, (text, crystal)
