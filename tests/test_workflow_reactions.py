"""The reactions DAG end to end on one small real table (.test/reactions), with a language model
plugged in through its responses file; config errors that stop the run."""

from __future__ import annotations

import hashlib
import json

import pytest

from crucible.reactions import workflow as rxn

from helpers import load_test_config, plant, provide_downloads, run_snakemake

# The test config's section, and a language model whose replies this test writes by hand.
CONFIG = load_test_config("reactions")
CONFIG["reactions"]["llm_models"] = ["replayed"]

# Answers the old parser read as options 3, 1, 2, 1 and 0 (issue 22), and why each is invalid.
MALFORMED = [
    ("answer: -3", "'-3' has a sign"),
    ("The answer is -1", "'-1' has a sign"),
    ("Answer: 2.5", "'2.5' is a fraction"),
    ("answer 1e1", "'1e1' has an exponent"),
    ("answer=0x5", "'0x5' is written in another base"),
]


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_reactions_dag_end_to_end(tmp_path, venv_env):
    work = tmp_path
    provide_downloads(work, "reactions/cernak")  # from the test cache, not fetched by the DAG
    env = {**venv_env, "SOURCE_DATE_EPOCH": "1767225600"}
    questions = rxn.questions_files(CONFIG, "deoxyfluorination")
    proc = run_snakemake(work, CONFIG, *questions, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]

    # The LLM stage's output, here replayed: the right answer as text, except for a timed-out
    # reply and, in multiple choice, the malformed answers and an option past the last.
    past_the_last = {}  # question type -> the reason its out-of-range answer must carry
    for qfile in questions:
        qs = json.loads((work / qfile).read_text())
        out = work / qfile.replace("questions.json", "responses/replayed.jsonl")
        out.parent.mkdir(parents=True, exist_ok=True)
        lines = []
        for i, q in enumerate(qs):
            if "query_keys" in q:
                best = max(q["meta"]["legal_combinations"], key=lambda c: c["relative_score"])
                answer = json.dumps({"answer": best["combination"]})
            elif 1 <= i <= len(MALFORMED):
                answer = MALFORMED[i - 1][0]
            elif i == len(MALFORMED) + 1:
                n = len(q["options"])
                answer = f"The answer is {n}."
                past_the_last[q["question_type"]] = f"option {n} is out of range 0..{n - 1}"
            else:
                answer = f'I pick this one. {{"answer": {q["answer"][0]}}}'
            lines.append(
                {"id": q["id"], "response": None if i == 0 else answer, "error": "timeout" if i == 0 else None}
            )
        out.write_text("".join(json.dumps(x) + "\n" for x in lines))
        # with the identity record its rule would write: a reader refuses a response file without one
        plant(
            work, qfile.replace("questions.json", "responses/replayed.jsonl"), "generate_llm_responses", "llm generate"
        )

    targets = rxn.final_outputs(CONFIG)
    proc = run_snakemake(work, CONFIG, *targets, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    for rel in targets:
        assert (work / rel).stat().st_size > 0, rel
    for name in (
        "multiple_choice_all_varying.json",
        "fill_in_blank_all_blank.json",
        "prompt_all_varying.txt",
        "example_prediction_all_blank.json",
    ):
        assert (work / "results/reactions/deoxyfluorination/package" / name).is_file()

    score = json.loads((work / "results/reactions/deoxyfluorination/scores/replayed.json").read_text())
    for qtype, res in score["types"].items():
        n = res["summary"]["num_questions"]
        reasons = [x["reason"] for x in res["invalid"]]  # counted with their reason, not fatal
        assert reasons[0] == "no reply (timeout)", qtype
        if "exact_match_accuracy" in res["summary"]:
            expected = [why for _, why in MALFORMED] + [past_the_last[qtype]]
            assert len(reasons) == 1 + len(expected), (qtype, reasons)
            assert all(why in got for why, got in zip(expected, reasons[1:])), (qtype, reasons)
            assert res["summary"]["avg_relative_score"] == pytest.approx((n - len(reasons)) / n)
        else:
            assert len(reasons) == 1, qtype
            assert res["summary"]["avg_relative_score"] == 1.0
    table = (work / "results/tables/reactions_deoxyfluorination.csv").read_text()
    assert "replayed," in table and "random (expected)," in table and "oracle," in table

    # No-op re-run; then the deterministic outputs, deleted and rebuilt, are byte-identical.
    proc = run_snakemake(work, CONFIG, *targets, "-n", env=env)
    assert "Nothing to be done" in proc.stdout + proc.stderr
    watched = list(questions) + [
        "results/reactions/data/deoxyfluorination.parquet",
        "results/reactions/data/deoxyfluorination.json",
        "results/tables/reactions_deoxyfluorination.csv",
        "results/tables/reactions_deoxyfluorination_paired.csv",
        "results/figures/reactions_deoxyfluorination.png",
        "results/reactions/deoxyfluorination/all_blank/prompts.jsonl",
    ]
    before = {p: _sha(work / p) for p in watched}
    for p in watched:
        (work / p).unlink()
    proc = run_snakemake(work, CONFIG, *targets, "--rerun-triggers", "params", env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert {p: _sha(work / p) for p in watched} == before


def test_bad_reactions_config_stops_the_run(tmp_path, venv_env):
    bad = {**CONFIG, "reactions": {**CONFIG["reactions"], "models": ["gpt-9"]}}
    proc = run_snakemake(tmp_path, bad, "-n", env=venv_env)
    assert proc.returncode != 0 and "gpt-9" in proc.stdout + proc.stderr
    bad = {**CONFIG, "reactions": {**CONFIG["reactions"], "datasets": ["buchwald"]}}
    proc = run_snakemake(tmp_path, bad, "-n", env=venv_env)
    assert proc.returncode != 0 and "unknown reaction dataset" in proc.stdout + proc.stderr
