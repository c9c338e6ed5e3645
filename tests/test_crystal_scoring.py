"""OpenCompass MP-20 scoring (``opencompass/datasets/mp20/mp20.py``, 0.5.4): vectors run there, agreement with pymatgen's own
StructureMatcher call on every matched pair of real crystals, the per-item time limit with a
replaced worker, and a scorer that never crashes."""

from __future__ import annotations

import json

import pytest

from crucible.crystal import parsing, scoring


def material(a=4.12, second=(0.5, 0.5, 0.5), elements=("Cs", "Cl"), coords=None, angles=(90, 90, 90), tag=True):
    coords = coords or [(0, 0, 0), second]
    body = json.dumps(
        {
            "lattice_parameters": {"a": a, "b": a, "c": a, "alpha": angles[0], "beta": angles[1], "gamma": angles[2]},
            "atomic_sites": [{"element": e, "coordinate": list(c)} for e, c in zip(elements, coords)],
        }
    )
    return f"<material>{body}</material>" if tag else body


V2 = material()
V3 = "```json\n" + material(a=4.2, second=(0.52, 0.5, 0.5), tag=False) + "\n```"
ONE_SITE = '<material>{"lattice_parameters": {"a": 4.12, "b": 4.12, "c": 4.12}, "atomic_sites": [{"coordinate": [0, 0, 0]}]}</material>'
PLAIN = "I cannot answer."


def test_vectors_2_to_6(cscl_ground_truth):
    g = cscl_ground_truth
    assert scoring.score_text(V2, g) == (0.0, None, "")
    rms, reason, _ = scoring.score_text(V3, g)
    assert reason is None and rms == pytest.approx(0.0125992, abs=1e-6)
    assert scoring.score_text(material(a=6.0), g)[0] == pytest.approx(0.0, abs=1e-12)  # scale=True
    swapped = material(elements=("Na", "K"), coords=[(0.5, 0.5, 0.5), (0, 0, 0)])
    assert scoring.score_text(swapped, g)[0] == pytest.approx(0.0, abs=1e-12)  # labels ignored
    assert scoring.score_text(ONE_SITE, g)[1] == parsing.WRONG_SITE_COUNT
    assert scoring.score_text(PLAIN, g)[1] == parsing.NO_JSON


def test_vector_7_summary(cscl_ground_truth):
    items = [{"id": k, "ground_truth": cscl_ground_truth} for k in "abcd"]
    scores = scoring.score_items({"a": V2, "b": V3, "c": PLAIN, "d": ONE_SITE}, items)
    metric = scoring.MatchRateMetric()
    metric.update(scores)
    out = metric.compute()
    assert {k: out[k] for k in ("match_rate", "mean_rms_dist", "matched", "total")} == {
        "match_rate": 50.0,
        "mean_rms_dist": 0.0063,
        "matched": 2,
        "total": 4,
    }
    assert out["failures"][parsing.NO_JSON] == 1 and out["failures"][parsing.WRONG_SITE_COUNT] == 1
    alone = scoring.MatchRateMetric()
    alone.update(scoring.score_items({"c": PLAIN}, items[2:3]))
    assert {k: alone.compute()[k] for k in ("match_rate", "mean_rms_dist", "matched", "total")} == {
        "match_rate": 0.0,
        "mean_rms_dist": None,
        "matched": 0,
        "total": 1,
    }


def test_empty_set_scores_zero():
    assert scoring.MatchRateMetric().compute()["match_rate"] == 0.0


def test_missing_response_is_counted_not_dropped(cscl_ground_truth):
    scores = scoring.score_items({}, [{"id": "x", "ground_truth": cscl_ground_truth}])
    assert [(s.id, s.matched, s.reason) for s in scores] == [("x", False, parsing.NO_RESPONSE)]


def test_a_zero_volume_cell_is_unmatched(cscl_ground_truth):
    rms, reason, detail = scoring.score_text(material(angles=(10, 10, 150)), cscl_ground_truth)
    assert rms is None and reason == parsing.BAD_CELL and "make no cell" in detail


@pytest.mark.parametrize(
    "a, angles, says",
    [
        # the first two were scored a match (rms 7e-17 and 1.5e-16): -a is the mirror image's axis
        ((-4.12, -4.12, -4.12), (90, 90, 90), "lattice length a = -4.12 is not positive"),
        ((4.12, -4.12, 4.12), (90, 90, 90), "lattice length b = -4.12 is not positive"),
        ((4.12, 4.12, 0), (90, 90, 90), "lattice length c = 0 is not positive"),
        ((4.12, 4.12, 4.12), (-90, 90, 90), "angle alpha = -90 is not between 0 and 180"),  # matched, rms 0
        ((4.12, 4.12, 4.12), (90, 180, 90), "angle beta = 180 is not between 0 and 180"),
        ((4.12, 4.12, 4.12), (60, 60, 120), "make no cell"),  # flat: pymatgen's SVD failed on it
        ((4.12, 4.12, 4.12), (170, 170, 20), "make no cell"),  # the matcher never returned
        ((1e-4, 4.12, 4.12), (90, 90, 90), "degenerate cell: volume 0.0017"),
        ((4.12, 4.12, 4.12), (60, 60, 119.99999), "degenerate cell"),
    ],
)
def test_numbers_that_make_no_cell_are_a_bad_cell(cscl_ground_truth, a, angles, says):
    body = json.loads(material(angles=angles, tag=False))
    body["lattice_parameters"].update(zip("abc", a))
    rms, reason, detail = scoring.score_text(f"<material>{json.dumps(body)}</material>", cscl_ground_truth)
    assert (rms, reason) == (None, parsing.BAD_CELL) and says in detail


def test_a_skewed_cell_that_is_a_cell_is_scored():
    assert parsing.cell_problem(4.0, 5.0, 6.0, 60.0, 60.0, 119.0) is None  # V/abc 0.09: oblique, not flat
    assert parsing.cell_problem(4.0, 4.0, 4.0, 89.0, 91.0, 179.0) is None


def test_a_distorted_answer_does_not_match(cscl_ground_truth):
    far = material(a=4.12, angles=(60, 60, 60), second=(0.1, 0.2, 0.3))
    rms, reason, _ = scoring.score_text(far, cscl_ground_truth)
    assert rms is None and reason == parsing.NO_MATCH


def test_timeout_replaces_the_worker_and_scoring_goes_on(cscl_ground_truth):
    # the quadratic JSON scan of 30,000 nested objects (a flat cell, the case here before, is now
    # refused before the matcher sees it)
    with scoring.MatcherWorker(timeout=1.0) as worker:
        first_pid = None
        rms, reason, detail = worker.score(NESTED, cscl_ground_truth)
        assert (rms, reason) == (None, parsing.TIMEOUT) and "replaced" in detail
        assert worker.restarts == 1
        worker.timeout = 300.0  # the next items must not depend on how loaded the machine is
        assert worker.score(V2, cscl_ground_truth) == (0.0, None, "")
        first_pid = worker._proc.pid
        assert worker.score(V3, cscl_ground_truth)[0] == pytest.approx(0.0125992, abs=1e-6)
        assert worker._proc.pid == first_pid  # persistent between items


@pytest.mark.parametrize("timeout", [0, -1, float("nan")])
def test_a_time_limit_that_is_not_positive_is_refused(timeout):
    """--timeout -1 timed every answer out: a match rate of 0 with no error."""
    from crucible.core.errors import ConfigError

    with pytest.raises(ConfigError, match="time limit \\(--timeout\\) must be a positive number of seconds"):
        scoring.MatcherWorker(timeout)


def test_matches_equal_pymatgens_own_call_on_real_crystals(aflow_file):
    """Every matched pair: our RMS is exactly StructureMatcher(0.3, 0.5, 10).get_rms_dist(pred, ref)[0]."""
    from pymatgen.analysis.structure_matcher import StructureMatcher

    from crucible.crystal import data, generation, items, template_generator

    train, test = data.load_dataset("aflow", [str(aflow_file)], 0.5, 0, 8)
    tpl = {"system": "s", "user": "{reduced_formula}"}
    prompts, train_rec = items.build_items("aflow-prototypes", train, test[:40], "t", tpl)
    answers = {}
    for p in prompts:  # the reference itself, a perturbed copy, and the template generator's guess
        ref = scoring.reference_structure(p["ground_truth"])
        answers[p["id"]] = generation.answer_from_structure(ref, p["meta"]["elements"])
    gen = template_generator.TemplateGenerator(train_rec)
    guesses = {p["id"]: gen.answer(p) for p in prompts}
    matcher = StructureMatcher(ltol=0.3, stol=0.5, angle_tol=10)
    matched = 0
    for source in (answers, guesses):
        for p, s in zip(prompts, scoring.score_items(source, prompts)):
            parsed = parsing.parse_crystal_response(source[p["id"]])
            pred = scoring.predicted_structure(parsed, p["ground_truth"])
            ref = scoring.reference_structure(p["ground_truth"])
            theirs = matcher.get_rms_dist(pred, ref)
            assert (theirs is not None) == s.matched, p["id"]
            if s.matched:
                matched += 1
                assert s.rms_dist == float(theirs[0])
    assert matched >= len(prompts)  # every self-answer matches, plus any template hits


NESTED = '{"a": ' * 30_000 + "1" + "}" * 30_000

FUZZ = [
    "[" * 100_000,
    "{" * 100_000,
    "<material>{'a': " + "[" * 3000 + "}</material>",
    '<material>{"lattice_parameters": {"a": 1e308, "b": 1e308, "c": 1e308}, "atomic_sites": [{"coordinate": [0,0,0]}, {"coordinate": [0.5,0.5,0.5]}]}</material>',
    '<material>{"lattice_parameters": {"a": NaN, "b": 4, "c": 4}, "atomic_sites": [{"coordinate": [0,0,0]}, {"coordinate": [0.5,0.5,0.5]}]}</material>',
    '<material>{"lattice_parameters": {"a": 4, "b": 4, "c": 4}, "atomic_sites": [{"coordinate": [NaN,0,0]}, {"coordinate": [Infinity,0.5,0.5]}]}</material>',
    '<material>{"lattice_parameters": {"a": -4, "b": 4, "c": 4, "gamma": 0}, "atomic_sites": [{"coordinate": [0,0,0]}, {"coordinate": [0.5,0.5,0.5]}]}</material>',
    '<material>{"lattice_parameters": {"a": 0}, "atomic_sites": [{"coordinate": [0,0,0]}, {"coordinate": [0.5,0.5,0.5]}]}</material>',
    '<material>{"lattice_parameters": {"a": 4, "b": 4, "c": 4}, "atomic_sites": [{"coordinate": [0,0]}, {"coordinate": [0.5,0.5,0.5,0.5]}]}</material>',
    '<material>{"lattice_parameters": {"a": 4, "b": 4, "c": 4}, "atomic_sites": [{"coordinate": [1e300,0,0]}, {"coordinate": [0.5,0.5,0.5]}]}</material>',
    "<material>"
    + json.dumps(
        {"lattice_parameters": {"a": 4, "b": 4, "c": 4}, "atomic_sites": [{"coordinate": [0.1, 0.2, 0.3]}] * 100_000}
    )
    + "</material>",
    "\ud800\x00" * 1000,
]


def test_fuzzed_answers_are_scored_never_raised(cscl_ground_truth):
    items = [{"id": f"{i:02d}", "ground_truth": cscl_ground_truth} for i in range(len(FUZZ))]
    # a limit no item reaches, even on a loaded machine: each must get its own verdict
    scores = scoring.score_items({it["id"]: text for it, text in zip(items, FUZZ)}, items, timeout=300.0)
    assert len(scores) == len(FUZZ)
    # 1e300 is a whole number: as a fractional coordinate it is the origin, a periodic image
    assert [s.id for s in scores if s.matched] == ["09"]
    assert all(s.matched or s.reason in parsing.REASONS for s in scores)
    assert scores[10].reason == parsing.WRONG_SITE_COUNT  # the 10^5 sites


def test_a_pathological_json_scan_times_out(cscl_ground_truth):
    # 30,000 nested objects, no tag: the JSON scan is quadratic; the limit cuts it off
    scores = scoring.score_items({"x": NESTED}, [{"id": "x", "ground_truth": cscl_ground_truth}], timeout=1.0)
    assert scores[0].reason == parsing.TIMEOUT
