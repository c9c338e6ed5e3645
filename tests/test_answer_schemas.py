"""The answer schemas the two LLM benchmarks write into prompts.jsonl (issue 33), on real items:
the reference answer of every item follows its schema, a wrong one does not, the schema holds
the item's own site count / options / candidates, and it is part of the prompt set's hash."""

from __future__ import annotations

import json
import re
from pathlib import Path

from jsonschema import Draft202012Validator

from crucible.crystal import data, items
from crucible.crystal.generation import answer_from_structure
from crucible.crystal.parsing import ParsedCrystal, parse_crystal_response
from crucible.llm.files import read_prompts
from crucible.reactions import prompts as rxn_prompts

from helpers import reaction_questions

TEMPLATES = items.load_templates(Path(__file__).resolve().parents[1] / "config" / "crystal_prompts.yaml")


def valid(schema, value) -> bool:
    return Draft202012Validator(schema).is_valid(value)


def test_each_crystal_item_has_a_schema_with_its_own_site_count(aflow_file, tmp_path):
    train, test = data.load_dataset("aflow", [str(aflow_file)], 0.5, 0)
    built, _ = items.build_items("aflow-prototypes", train, test, "composition-v1", TEMPLATES["composition-v1"])
    structures = dict(test)
    counts = set()
    for item in built:
        schema, n = item["response_schema"], item["meta"]["nsites"]
        Draft202012Validator.check_schema(schema)
        counts.add(n)
        # The reference written as the prompt asks (without the tags a constrained reply has none of)
        text = answer_from_structure(structures[item["id"]], item["meta"]["elements"])
        answer = json.loads(re.fullmatch(r"<material>(.*)</material>", text).group(1))
        assert valid(schema, answer), item["id"]
        # ... and that bare JSON is what the scorer reads from a structured reply
        assert isinstance(parse_crystal_response(json.dumps(answer)), ParsedCrystal)
        assert not valid(schema, {**answer, "atomic_sites": answer["atomic_sites"][:-1]}), "one site short"
        assert not valid(schema, {**answer, "atomic_sites": answer["atomic_sites"] * 2}), "twice the sites"
        other = {**answer["atomic_sites"][0], "element": "Og"}
        assert not valid(schema, {**answer, "atomic_sites": [other] + answer["atomic_sites"][1:]}), "foreign element"
        no_gamma = {k: v for k, v in answer["lattice_parameters"].items() if k != "gamma"}
        assert not valid(schema, {**answer, "lattice_parameters": no_gamma})
    assert len(counts) > 3, "the items span several site counts, each with its own schema"
    path = tmp_path / "prompts.jsonl"
    items.write_jsonl(built, path)
    assert all(p.response_schema == b["response_schema"] for p, b in zip(read_prompts(path), built))


def test_reaction_schemas_allow_exactly_the_options_and_candidates():
    sets, _ = reaction_questions("deoxyfluorination")
    mc = sets["all_varying_reference"]
    for rec, q in zip(rxn_prompts.prompt_records(mc), sorted(mc, key=lambda q: q["id"])):
        schema, n = rec["response_schema"], len(q["options"])
        Draft202012Validator.check_schema(schema)
        assert all(valid(schema, {"answer": i}) for i in range(n))
        assert not any(valid(schema, {"answer": v}) for v in (n, -1, 1.5, "0", True))
        assert not valid(schema, {"answer": 0, "why": "best yield"})
        assert rxn_prompts.read_conditions_answer(json.dumps({"answer": n - 1}), q) == (n - 1, None)
    fb = sets["all_blank"]
    for rec, q in zip(rxn_prompts.prompt_records(fb), sorted(fb, key=lambda q: q["id"])):
        schema, keys = rec["response_schema"], q["query_keys"]
        cands = q["input"]["candidate_values"]
        best = {k: cands[k][-1]["index"] for k in keys}
        assert valid(schema, {"answer": best})
        assert not valid(schema, {"answer": {k: v for k, v in best.items() if k != keys[0]}}), "a key left out"
        assert not valid(schema, {"answer": {**best, keys[0]: len(cands[keys[0]]) + 5}}), "not a candidate"
        assert rxn_prompts.read_conditions_answer(json.dumps({"answer": best}), q) == (best, None)


def test_the_schema_is_part_of_the_prompt_set_hash(tmp_path):
    from crucible.llm.files import prompt_set_hash

    sets, _ = reaction_questions("deoxyfluorination")
    path = tmp_path / "p.jsonl"
    path.write_text(rxn_prompts.prompts_jsonl(sets["single_varying"]))
    with_schema = read_prompts(path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[0]["response_schema"]["properties"]["answer"]["enum"].append(99)
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert prompt_set_hash(read_prompts(path)) != prompt_set_hash(with_schema)
    for r in lines:
        del r["response_schema"]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    bare = read_prompts(path)
    assert prompt_set_hash(bare) != prompt_set_hash(with_schema)
    # no schema: the hash of the ids and messages alone, as before schemas existed
    canon = json.dumps(
        [[p.id, list(p.messages)] for p in bare], sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    import hashlib

    assert prompt_set_hash(bare) == hashlib.sha256(canon.encode()).hexdigest()


def test_a_constrained_answer_keeps_the_prompts_order_although_the_file_sorts_keys(aflow_file, tmp_path):
    from crucible.llm.files import schema_in_answer_order

    train, test = data.load_dataset("aflow", [str(aflow_file)], 0.5, 0)
    built, _ = items.build_items("aflow-prototypes", train, test, "composition-v1", TEMPLATES["composition-v1"])
    path = tmp_path / "prompts.jsonl"
    items.write_jsonl(built[:1], path)
    stored = read_prompts(path)[0].response_schema
    assert list(stored["properties"]) == ["atomic_sites", "lattice_parameters"], "the file sorts keys"
    ordered = schema_in_answer_order(stored)
    assert list(ordered["properties"]) == ["lattice_parameters", "atomic_sites"], "as the prompt shows it"
    assert list(ordered["properties"]["atomic_sites"]["items"]["properties"]) == ["element", "coordinate"]
    assert ordered == stored, "the same schema"


# The JSON Schema keywords every constrained decoder crucible drives enforces (xgrammar 0.2.8 and
# llama-cpp-python 0.3.36's grammar, which ignores minimum/maximum, pattern and format): an answer
# schema uses these alone, so that no engine lets through an answer the scorer then refuses.
PORTABLE = {"type", "properties", "required", "additionalProperties", "enum", "items", "minItems", "maxItems"}


def _keywords(schema) -> set[str]:
    found = set(schema)
    for sub in schema.get("properties", {}).values():
        found |= _keywords(sub)
    if isinstance(schema.get("items"), dict):
        found |= _keywords(schema["items"])
    return found


def test_answer_schemas_use_only_keywords_every_engine_enforces(aflow_file):
    sets, _ = reaction_questions("deoxyfluorination")
    records = [r for qs in sets.values() for r in rxn_prompts.prompt_records(qs)]
    train, test = data.load_dataset("aflow", [str(aflow_file)], 0.5, 0)
    built, _ = items.build_items("aflow-prototypes", train, test, "composition-v1", TEMPLATES["composition-v1"])
    for rec in records + built:
        assert _keywords(rec["response_schema"]) <= PORTABLE, rec["id"]
