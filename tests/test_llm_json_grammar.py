"""crucible.llm.json_grammar (issue 33): the JSON a constrained model may write is what llama.cpp's
grammar for the same schema allows, so that the transformers backend (xgrammar) and llama.cpp's
server choose among the same replies. On the benchmarks' real answer schemas: what is allowed and
refused, and, where llama-cpp-python is installed, the same verdict as llama.cpp's own grammar on
every one of a few hundred respaced answers. Without xgrammar only the refusals run."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from crucible.crystal import data, items
from crucible.llm.files import schema_in_answer_order
from crucible.llm.json_grammar import UnsupportedSchemaError, schema_ebnf
from crucible.reactions import prompts as rxn_prompts

from helpers import reaction_questions

TEMPLATES = items.load_templates(Path(__file__).resolve().parents[1] / "config" / "crystal_prompts.yaml")


def test_keywords_it_does_not_enforce_are_refused():
    with pytest.raises(UnsupportedSchemaError, match="keyword.s. maximum, minimum not enforced"):
        schema_ebnf({"type": "integer", "minimum": 0, "maximum": 3})
    with pytest.raises(UnsupportedSchemaError, match="must require every property"):
        schema_ebnf({"type": "object", "properties": {"a": {"type": "number"}}, "additionalProperties": False})
    with pytest.raises(UnsupportedSchemaError, match="type 'null'"):
        schema_ebnf({"type": "null"})


@pytest.fixture(scope="module")
def answers(aflow_file):
    """(schema, a valid answer) for a few crystal items and reaction questions of each kind."""
    train, test = data.load_dataset("aflow", [str(aflow_file)], 0.5, 0)
    built, _ = items.build_items("aflow-prototypes", train, test, "composition-v1", TEMPLATES["composition-v1"])
    out = []
    for item in built[:3]:
        schema = schema_in_answer_order(item["response_schema"])
        elements = schema["properties"]["atomic_sites"]["items"]["properties"]["element"]["enum"]
        sites = [
            {"element": elements[k % len(elements)], "coordinate": [0, 0.25, 0.1234567890123456]}
            for k in range(item["meta"]["nsites"])
        ]
        lattice = {"a": 4.05, "b": 4, "c": 12.5e-1, "alpha": 90, "beta": 90.0, "gamma": -120}
        out.append((schema, {"lattice_parameters": lattice, "atomic_sites": sites}))
    sets, _ = reaction_questions("deoxyfluorination")
    for kind in ("single_varying", "all_blank"):
        for rec in rxn_prompts.prompt_records(sets[kind][:2]):
            schema = schema_in_answer_order(rec["response_schema"])
            answer = schema["properties"]["answer"]
            value = (
                answer["enum"][-1] if "enum" in answer else {k: v["enum"][0] for k, v in answer["properties"].items()}
            )
            out.append((schema, {"answer": value}))
    return out


def test_what_the_grammar_allows_and_refuses(answers):
    xgr = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string as accepts

    for schema, value in answers:
        grammar = xgr.Grammar.from_ebnf(schema_ebnf(schema))
        text = json.dumps(value)  # '"a": 1, "b": ...', the way the model mostly writes it
        allowed = [json.dumps(value, separators=(",", ":")), text, "{ " + text[1:] + " "]
        refused = [
            text.replace(": ", ":  ", 1),  # two spaces
            json.dumps(value, indent=1),  # new lines
            text + "  ",
        ]
        if "atomic_sites" in value:
            allowed.append(text.replace("4.05,", "4.05 ,"))  # a space after a number
            refused += [
                json.dumps(dict(reversed(list(value.items())))),  # not the order of "required"
                text.replace("4.05", "4.05000000000000001"),  # 17 decimals
                text.replace(f'"{value["atomic_sites"][0]["element"]}",', '"Og",', 1),
                text.replace(
                    f'"{value["atomic_sites"][0]["element"]}",', f'"{value["atomic_sites"][0]["element"]}" ,', 1
                ),
            ]  # no space after a constant (an enum value), as in llama.cpp
        else:
            refused.append(text.replace("}", " }", 1) if isinstance(value["answer"], dict) else text.replace("}", " }"))
        for t in allowed:
            assert accepts(grammar, t), t
        for t in refused:
            assert not accepts(grammar, t), t


def test_the_same_replies_as_llama_cpps_grammar(answers):
    """llama.cpp's grammar of each schema (json_schema_to_gbnf, llama-cpp-python 0.3.36), compiled
    by xgrammar too, and ours give the same verdict on a few hundred respaced answers."""
    xgr = pytest.importorskip("xgrammar")
    pytest.importorskip("llama_cpp", reason="llama.cpp's grammar comes with llama-cpp-python: `make install-llm-local`")
    from llama_cpp.llama_grammar import json_schema_to_gbnf
    from xgrammar.testing import _is_grammar_accept_string as accepts

    rng = random.Random(0)
    verdicts = []
    for schema, value in answers:
        ours = xgr.Grammar.from_ebnf(schema_ebnf(schema))
        theirs = xgr.Grammar.from_ebnf(json_schema_to_gbnf(json.dumps(schema)))
        compact = list(json.dumps(value, separators=(",", ":")))
        for _ in range(40):
            text = compact[:]
            for _ in range(rng.randint(0, 4)):
                text.insert(rng.randint(0, len(text)), rng.choice([" ", " ", " ", "  ", "\n"]))
            t = "".join(text)
            verdicts.append(accepts(ours, t))
            assert verdicts[-1] == accepts(theirs, t), (t, verdicts[-1])
    assert 0.1 < sum(verdicts) / len(verdicts) < 0.9, "both kinds of reply were tried"
