"""The llm_generate rule family in the real Snakefile on .test/llm: prompt sets of two benchmarks
(one with a nested dataset name) answered by an OpenAI-compatible server on 127.0.0.1, a replay
file and a tiny local checkpoint; a no-op rerun; the GPU rule split; config errors."""

from __future__ import annotations

import json
import os
import re

import pytest

from crucible.errors import ConfigError
from crucible.llm import workflow

from helpers import load_test_config, run_snakemake, write_prompts

KEY = "sk-dag-SECRET-9876543210"


def config(server_url="http://127.0.0.1:9/v1", ckpt="/nonexistent"):
    """.test/llm/config.yaml, pointed at this test's server and checkpoint."""
    cfg = load_test_config("llm")
    cfg["llm"]["models"]["echo"]["base_url"] = server_url
    cfg["llm"]["models"]["tiny"]["path"] = ckpt
    return cfg


@pytest.mark.slow
def test_dag_answers_prompt_sets_of_two_benchmarks(tmp_path, chat_server, tiny_causal_lm, venv_env):
    env = {**venv_env, "CRUCIBLE_DAG_KEY": KEY, "NO_PROXY": "127.0.0.1", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    cfg = config(chat_server.base_url, str(tiny_causal_lm))
    crystal = {**cfg, "crystal": {"llm_models": ["echo", "tiny"]}}  # who asks, for the target list
    write_prompts(tmp_path / "results/crystal/mp-20/prompts.jsonl", ["a cubic oxide", "a metal"])
    ds = "buchwald-hartwig/single_varying"
    write_prompts(tmp_path / f"results/reactions/{ds}/prompts.jsonl", ["the best base", "the best ligand", "yield"])
    (tmp_path / f"answers/reactions/{ds}.jsonl").parent.mkdir(parents=True)
    (tmp_path / f"answers/reactions/{ds}.jsonl").write_text(
        "".join(json.dumps({"id": f"q{k:03d}", "response": f"base {k}"}) + "\n" for k in range(3))
    )
    targets = workflow.response_targets(crystal, "crystal", ["mp-20"]) + workflow.response_targets(
        cfg, "reactions", [ds], models=["echo", "replayed"]
    )
    proc = run_snakemake(tmp_path, cfg, *targets, "--printshellcmds", env=env, timeout=600)  # full job details
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    # The transformers job asks for a GPU; the others do not.
    assert re.search(r"rule generate_llm_responses_gpu:(\n    .*)*?\n    resources: [^\n]*gpu=1", out)
    assert not re.search(r"rule generate_llm_responses:(\n    .*)*?\n    resources: [^\n]*gpu=", out)
    for target in targets:
        rows = [json.loads(line) for line in (tmp_path / target).read_text().splitlines()]
        assert [r["id"] for r in rows] == [f"q{k:03d}" for k in range(len(rows))]
        assert all(isinstance(r["response"], str) and r["error"] is None for r in rows), target
        record = json.loads((tmp_path / target.replace(".jsonl", ".json")).read_text())
        assert record["n_failed"] == 0 and record["n_items"] == len(rows)
    echo = [
        json.loads(line)
        for line in (tmp_path / f"results/reactions/{ds}/responses/echo.jsonl").read_text().splitlines()
    ]
    assert echo[0]["response"] == "echo: the best base"
    replayed = (tmp_path / f"results/reactions/{ds}/responses/replayed.jsonl").read_text()
    assert json.loads(replayed.splitlines()[2])["response"] == "base 2"
    assert json.loads((tmp_path / "results/crystal/mp-20/responses/tiny.json").read_text())["device"] == "cpu"
    assert chat_server.count() == 5
    assert (tmp_path / "logs/llm/reactions/buchwald-hartwig/single_varying/echo.log").is_file()
    # Nothing to do the second time; a forced rerun is answered from the cache.
    (tmp_path / "results/crystal/mp-20/responses/echo.jsonl").unlink()
    again = run_snakemake(tmp_path, cfg, *targets, env=env, timeout=600)
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    assert "1 of 1 steps" in again.stdout + again.stderr
    assert chat_server.count() == 5
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


@pytest.mark.slow
def test_config_errors_stop_the_run(tmp_path, venv_env):
    cfg = config()
    cfg["llm"]["models"]["echo"]["temperture"] = 0
    proc = run_snakemake(tmp_path, cfg, "-n", env=venv_env, timeout=600)
    assert proc.returncode != 0 and "temperture" in proc.stdout + proc.stderr
    with pytest.raises(ConfigError, match=r"llm.models.echo.backend: 'vllm' is not one of openai"):
        workflow.llm_models({"llm": {"models": {"echo": {**cfg["llm"]["models"]["echo"], "backend": "vllm"}}}})
