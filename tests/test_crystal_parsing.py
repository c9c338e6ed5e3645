"""The OpenCompass MP-20 extraction and lattice rules (OpenCompass's ``opencompass/datasets/mp20/mp20.py``, opencompass 0.5.4; vectors run there),
and a parser that never raises, whatever the text."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from crucible.crystal import parsing


def material(a=4.12, second=(0.5, 0.5, 0.5), elements=("Cs", "Cl"), coords=None, angles=(90, 90, 90)):
    coords = coords or [(0, 0, 0), second]
    return json.dumps(
        {
            "lattice_parameters": {"a": a, "b": a, "c": a, "alpha": angles[0], "beta": angles[1], "gamma": angles[2]},
            "atomic_sites": [{"element": e, "coordinate": list(c)} for e, c in zip(elements, coords)],
        }
    )


def test_lattice_matrices_of_the_vectors():
    np.testing.assert_allclose(parsing.lattice_matrix(4, 4, 4, 90, 90, 90), np.diag([4.0, 4, 4]), atol=1e-12)
    np.testing.assert_allclose(
        parsing.lattice_matrix(3, 3, 5, 90, 90, 120), [[3, 0, 0], [-1.5, 2.598076, 0], [0, 0, 5]], atol=1e-6
    )
    np.testing.assert_allclose(
        parsing.lattice_matrix(5, 6, 7, 80, 95, 105),
        [[5, 0, 0], [-1.552914, 5.795555, 0], [-0.610090, 1.094944, 6.886863]],
        atol=1e-6,
    )


def test_impossible_angles_give_a_flat_cell_not_nan():
    m = parsing.lattice_matrix(4, 4, 4, 10, 10, 150)  # no cell has these angles
    assert np.all(np.isfinite(m))
    assert m[2, 2] == 0.0 and np.linalg.det(m) == 0.0


def test_material_tag_is_read():
    parsed = parsing.parse_crystal_response("Here: <material>" + material() + "</material>")
    assert parsed.lattice_parameters == (4.12, 4.12, 4.12, 90.0, 90.0, 90.0)
    assert parsed.coordinates == [[0.0, 0.0, 0.0], [0.5, 0.5, 0.5]]


def test_json_block_wins_over_material_tag():  # vector 8
    text = "<material>" + material(a=9.0) + "</material>\nor rather\n```json\n" + material(a=4.12) + "\n```"
    parsed = parsing.parse_crystal_response(text)
    np.testing.assert_allclose(parsing.lattice_matrix(*parsed.lattice_parameters)[0], [4.12, 0, 0])


def test_think_output_block_beats_material_but_not_json_block():
    think = "output:\n" + material(a=5.0) + "\n </think>"
    assert (
        parsing.parse_crystal_response("<material>" + material(a=9.0) + "</material>" + think).lattice_parameters[0]
        == 5.0
    )
    assert parsing.parse_crystal_response(think + "```json" + material(a=6.0) + "```").lattice_parameters[0] == 6.0


def test_without_tags_the_last_large_json_is_used():  # vector 9
    text = 'First {"a": 1} then ' + material(a=4.3) + ' then {"short": true}'
    assert parsing.parse_crystal_response(text).lattice_parameters[0] == 4.3


def test_fifty_character_boundary():  # vector 10
    short = '{"k": "' + "v" * 40 + '"}'
    exact = '{"k": "' + "v" * 41 + '"}'
    assert (len(short), len(exact)) == (49, 50)
    assert parsing.last_large_json(short) is None
    assert parsing.last_large_json(exact) == {"k": "v" * 41}
    assert parsing.parse_crystal_response(short).reason == parsing.NO_JSON


def test_values_nested_in_a_decoded_value_are_not_candidates():
    inner = material(a=7.0)
    outer = '{"wrapper": ' + inner + ', "pad": "' + "x" * 10 + '"}'
    assert parsing.last_large_json(outer) == json.loads(outer)


def test_python_literal_fallback():  # vector 11
    text = (
        "<material>{'lattice_parameters': {'a': 4.12, 'b': 4.12, 'c': 4.12}, 'ok': True, 'atomic_sites': "
        "[{'element': 'Cs', 'coordinate': [0, 0, 0]}, {'element': 'Cl', 'coordinate': [0.5, 0.5, 0.5]}]}</material>"
    )
    parsed = parsing.parse_crystal_response(text)
    assert parsed.coordinates == [[0, 0, 0], [0.5, 0.5, 0.5]]
    assert parsed.lattice_parameters[3:] == (90.0, 90.0, 90.0)  # angles default to 90


def test_quote_rewrite_fallback_after_literal_fails():
    # not a Python literal (true), not JSON (single quotes): only the third stage reads it
    text = (
        "<material>{'lattice_parameters': {'a': 4, 'b': 4, 'c': 4}, 'x': true, "
        "'atomic_sites': [{'coordinate': [0, 0, 0]}]}</material>"
    )
    assert parsing.parse_crystal_response(text).lattice_parameters[0] == 4.0


def test_trailing_text_after_the_json_is_ignored():
    text = "```json\n" + material() + "\nThat is my answer {not json}```"
    assert parsing.parse_crystal_response(text).lattice_parameters[0] == 4.12


@pytest.mark.parametrize(
    "text, reason",
    [
        ("I cannot answer.", parsing.NO_JSON),
        ("<material>[1, 2, 3]</material>", parsing.BAD_JSON),  # no '{': a top-level array fails
        ("<material>{broken</material>", parsing.BAD_JSON),
        ('<material>{"lattice_parameters": {"a": "4.2 Å"}, "atomic_sites": []}</material>', parsing.BAD_FIELDS),
        (
            '<material>{"lattice_parameters": {"a": 4}, "atomic_sites": [{"element": "Cs"}]}</material>',
            parsing.BAD_FIELDS,
        ),
        ('<material>{"lattice_parameters": 4, "atomic_sites": []}</material>', parsing.BAD_FIELDS),
        ('<material>{"lattice_parameters": {"a": 4}}</material>', parsing.BAD_FIELDS),
        ("[" + ", ".join(["1.0"] * 30) + "]", parsing.BAD_JSON),  # large value, but not an object
    ],
)
def test_failures_carry_a_reason(text, reason):
    result = parsing.parse_crystal_response(text)
    assert isinstance(result, parsing.ParseFailure)
    assert result.reason == reason


def test_missing_lengths_default_to_zero_and_strings_are_numbers_like_float():
    parsed = parsing.parse_crystal_response(
        '<material>{"lattice_parameters": {"a": 4, "b": "3.5", "c": 5}, "atomic_sites": []}</material>'
    )
    assert parsed.lattice_parameters == (4.0, 3.5, 5.0, 90.0, 90.0, 90.0)
    # a length left out is 0, as in OpenCompass, and 0 makes no cell
    failure = parsing.parse_crystal_response(
        '<material>{"lattice_parameters": {"b": "3.5"}, "atomic_sites": []}</material>'
    )
    assert failure == parsing.ParseFailure(parsing.BAD_CELL, "lattice length a = 0 is not positive")


def test_no_response_is_its_own_reason():
    assert parsing.parse_crystal_response(None).reason == parsing.NO_RESPONSE


# ---- fuzzing: the parser returns, never raises --------------------------------------------

ADVERSARIAL = [
    "",
    " ",
    "{",
    "}",
    "[" * 100_000,
    "{" * 100_000,
    '{"a":' * 50_000,
    "<material>" + "[" * 100_000 + "</material>",
    "<material>" + "{" * 100_000 + "</material>",
    "```json" + '{"x": [' * 20_000 + "```",
    "<material>{'a': " + "(" * 5000 + "}</material>",
    '<material>{"lattice_parameters": {"a": 1e999, "b": -1e999, "c": NaN}, "atomic_sites": []}</material>',
    '<material>{"lattice_parameters": {"a": ' + "9" * 5000 + '}, "atomic_sites": []}</material>',
    "<material>{'lattice_parameters': {'a': " + "9" * 5000 + "}, 'atomic_sites': []}</material>",
    '<material>{"lattice_parameters": {"a": Infinity}, "atomic_sites": [{"coordinate": [NaN, 0, 0]}]}</material>',
    '<material>{"atomic_sites": [{"coordinate": "abc"}]}</material>',
    '<material>{"atomic_sites": [{"coordinate": {"x": 1}}]}</material>',
    '<material>{"atomic_sites": 5}</material>',
    '<material>{"atomic_sites": [5]}</material>',
    "<material>{'atomic_sites': [{'coordinate': [1j, 0, 0]}]}</material>",
    "output:\n\n </think>",
    "```json```",
    "<material></material>",
    "\x00\xff\ud800" * 100,
    "<material>{" + '"k": "' + "\\u" * 1000 + "}</material>",
    '{"lattice_parameters": {"a": 4}, "atomic_sites": ['
    + ", ".join(['{"coordinate": [0.1, 0.2, 0.3]}'] * 100_000)
    + "]}",
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_adversarial_texts_do_not_raise(text):
    result = parsing.parse_crystal_response(text)
    assert isinstance(result, (parsing.ParsedCrystal, parsing.ParseFailure))


def test_hundred_thousand_sites_parse():
    text = (
        "<material>"
        + json.dumps(
            {
                "lattice_parameters": {"a": 4, "b": 4, "c": 4},
                "atomic_sites": [{"element": "Cs", "coordinate": [0.1, 0.2, 0.3]}] * 100_000,
            }
        )
        + "</material>"
    )
    assert len(parsing.parse_crystal_response(text).coordinates) == 100_000


def test_random_strings_do_not_raise():
    rng = random.Random(13)
    alphabet = "{}[]\"':,.0123456789eE+-truefalsnNaIiy <>/material```json\n\\ "
    pieces = ["<material>", "</material>", "```json", "```", "output:\n", "\n </think>", material(), "{", "["]
    for _ in range(1500):
        parts = [
            rng.choice(pieces)
            if rng.random() < 0.3
            else "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
            for _ in range(rng.randint(1, 8))
        ]
        text = "".join(parts)
        result = parsing.parse_crystal_response(text)
        assert isinstance(result, (parsing.ParsedCrystal, parsing.ParseFailure)), text


def test_mutated_answers_do_not_raise():
    rng = random.Random(7)
    base = "<material>" + material() + "</material>"
    for _ in range(1500):
        chars = list(base)
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(chars))
            op = rng.random()
            if op < 0.4:
                del chars[i]
            elif op < 0.8:
                chars.insert(i, rng.choice("{}[]\",:'0.9e-NaI"))
            else:
                chars[i] = rng.choice("{}[]\",:'0.9e-")
        assert isinstance(parsing.parse_crystal_response("".join(chars)), (parsing.ParsedCrystal, parsing.ParseFailure))
