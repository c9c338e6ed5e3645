"""The llm_generate rule family in the real Snakefile on .test/llm: prompt sets of two benchmarks
(one with a nested dataset name) answered by an OpenAI-compatible server on 127.0.0.1, a replay
file and a tiny local checkpoint; a no-op rerun; the GPU rule split; config errors; no secret in
any file the run writes; a failed job's reasons kept where Snakemake does not delete them."""

from __future__ import annotations

import json
import os
import re

import pytest

from crucible.core.errors import ConfigError
from crucible.llm import workflow

from helpers import load_test_config, plant, run_snakemake, write_prompts

KEY = "sk-dag-SECRET-9876543210"


# The rule that makes each benchmark's prompt sets, which these tests write by hand instead.
PROMPTS_RULE = {
    "crystal": ("build_crystal_items", "crystal build-items"),
    "reactions": ("build_questions", "reactions build"),
}


def planted_prompts(workdir, rel, contents, **kwargs):
    """A stand-in prompt set at ``workdir/rel`` with what its rule would leave beside it
    (helpers.plant): a reader refuses a prompt set under results/ without an identity record."""
    write_prompts(workdir / rel, contents, **kwargs)
    return plant(workdir, rel, *PROMPTS_RULE[rel.split("/")[1]])


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
    planted_prompts(tmp_path, "results/crystal/mp-20/prompts.jsonl", ["a cubic oxide", "a metal"])
    ds = "buchwald-hartwig/single_varying"
    planted_prompts(tmp_path, f"results/reactions/{ds}/prompts.jsonl", ["the best base", "the best ligand", "yield"])
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
    assert re.search(r"rule generate_llm_responses_neural:(\n    .*)*?\n    resources: [^\n]*gpu=1", out)
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


# --- issue 22: no secret on disk, failure reasons that outlive the job ---------------------


def files_containing(root, secret: str) -> list[str]:
    found = []
    for sub in ("results", "logs", ".snakemake"):
        for path in (root / sub).rglob("*"):
            if path.is_file() and secret.encode() in path.read_bytes():
                found.append(str(path.relative_to(root)))
    return found


@pytest.mark.slow
def test_dag_writes_no_secret_and_keeps_failure_reasons(tmp_path, chat_server, venv_env):
    """The issue's runs: a password in base_url reached .snakemake/log and .snakemake/metadata
    (the spec was a shell argument) and the server got Basic auth; the reasons of a failed job
    were in the response file, which Snakemake deletes."""
    env = {**venv_env, "CRUCIBLE_DAG_KEY": KEY, "NO_PROXY": "127.0.0.1", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    cfg = config(chat_server.base_url)
    cfg["llm"]["models"]["echo"]["max_retries"] = 1
    ds = "bench-ds"
    planted_prompts(tmp_path, f"results/crystal/{ds}/prompts.jsonl", ["a cubic oxide", "a metal #500", "an alloy"])
    target = f"results/crystal/{ds}/responses/echo.jsonl"
    password = "PASSWORD-0f3c9e"
    bad = json.loads(json.dumps(cfg))
    bad["llm"]["models"]["echo"]["base_url"] = chat_server.base_url.replace("http://", f"http://user:{password}@")
    proc = run_snakemake(tmp_path, bad, target, env=env, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "credentials in the URL (user:password@) are refused" in out
    assert "api_key_env" in out and password not in out
    assert chat_server.count() == 0
    assert files_containing(tmp_path, password) == []

    proc = run_snakemake(tmp_path, cfg, target, env=env, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-4000:]
    assert not (tmp_path / target).exists(), "Snakemake removed the failed job's outputs"
    failed = json.loads((tmp_path / f"results/crystal/{ds}/responses/failed/echo.json").read_text())
    assert [f["id"] for f in failed["failed"]] == ["q001"] and "HTTP 500" in failed["failed"][0]["error"]
    log = (tmp_path / f"logs/llm/crystal/{ds}/echo.log").read_text()
    assert f"each item's reason is in results/crystal/{ds}/responses/failed/echo.json" in log
    assert {auth for _, auth in chat_server.requests} == {f"Bearer {KEY}"}
    # What Snakemake printed and recorded names the model and the config file, not its entry.
    recorded = "".join(p.read_text() for p in (tmp_path / ".snakemake/metadata").rglob("*") if p.is_file())
    assert "--config-file" in recorded and "--model-spec" not in recorded and chat_server.base_url not in recorded
    assert files_containing(tmp_path, KEY) == [] and files_containing(tmp_path, KEY[8:]) == []

    # Accepting the failure reruns the job (its entry's hash is a param); answers come from the
    # cache but the failed item's, and the failure file goes.
    cfg["llm"]["models"]["echo"]["max_failed_fraction"] = 0.5
    proc = run_snakemake(tmp_path, cfg, target, env=env, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert chat_server.count() == 2 + 2 + 2  # two answers, then the 500 item twice per run
    assert not (tmp_path / f"results/crystal/{ds}/responses/failed/echo.json").exists()
    assert files_containing(tmp_path, KEY) == []


@pytest.mark.slow
def test_dag_with_structured_output_stops_at_a_server_that_ignores_it(tmp_path, chat_server, venv_env):
    """Issue 33: a model with structured_output through the rule: a server that ignores
    response_format fails the job on the canary, naming the served model, before any real
    request; one that enforces it answers every prompt in its schema, and the record says so."""
    env = {**venv_env, "CRUCIBLE_DAG_KEY": KEY, "NO_PROXY": "127.0.0.1", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    cfg = config(chat_server.base_url)
    cfg["llm"]["models"]["echo"]["structured_output"] = True
    schema = {"type": "object", "properties": {"answer": {"type": "integer", "minimum": 0, "maximum": 3}}}
    schema = {**schema, "required": ["answer"], "additionalProperties": False}
    ds = "cernak/single_varying"
    planted_prompts(tmp_path, f"results/reactions/{ds}/prompts.jsonl", ["the best base", "yield"], schemas=[schema] * 2)
    targets = workflow.response_targets(cfg, "reactions", [ds], models=["echo"])
    proc = run_snakemake(tmp_path, cfg, *targets, env=env, timeout=600)
    assert proc.returncode != 0
    log = (tmp_path / "logs/llm/reactions/cernak/single_varying/echo.log").read_text()
    assert "does not enforce response_format json_schema" in log and "served model echo-7b" in log
    assert "Traceback" not in log
    assert chat_server.count() == 1, "only the canary was sent"
    chat_server.honour_schema = True
    proc = run_snakemake(tmp_path, cfg, *targets, env=env, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    rows = [json.loads(line) for line in (tmp_path / targets[0]).read_text().splitlines()]
    assert [json.loads(r["response"]) for r in rows] == [{"answer": 0}, {"answer": 0}]
    record = json.loads((tmp_path / targets[0].replace(".jsonl", ".json")).read_text())
    assert record["structured_output"]["canary"]["passed"] and record["n_not_matching_schema"] == 0


# --- issue 46 item 5: planted secrets, none of them in any file a run writes ------------------

HF_TOKEN = "hf_" + "PlAnTeDtOkEn0123456789abcdefGHIJ"
SK_TOKEN = "sk-" + "planted-Q9w8E7r6T5y4U3i2O1p0"
QUERY_KEY = "QueryKey" + "0a9b8c7d6e5f4g3h"
PASSWORD = "Pass" + "W0rdPlanted77xyz"
ENV_KEY = "sk-" + "envPlanted-5e4d3c2b1a0z9y8x7w"


@pytest.mark.slow
def test_dag_with_planted_secrets_writes_none_of_them(tmp_path, chat_server, venv_env):
    """A token in api_key_env (one that passes the name pattern, one that does not), a password
    in base_url's userinfo and a key in its query string are refused at planning, each message
    naming the fix and not the value; a key in the variable itself, echoed back by a server that
    refuses it (HTTP 401), is redacted. Then no file under logs/, results/ or .snakemake/ holds
    any of them, nor Snakemake's output."""
    env = {
        **venv_env,
        "CRUCIBLE_DAG_KEY": ENV_KEY,
        "NO_PROXY": "127.0.0.1",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    cfg = config(chat_server.base_url)
    cfg["llm"]["models"]["echo"]["max_retries"] = 0
    ds = "bench-ds"
    planted_prompts(tmp_path, f"results/crystal/{ds}/prompts.jsonl", ["a cubic oxide", "a metal #401"])
    target = f"results/crystal/{ds}/responses/echo.jsonl"
    base = chat_server.base_url
    planted = [
        ({"api_key_env": HF_TOKEN}, "has the form of a key, not of a variable's name", HF_TOKEN),
        ({"api_key_env": SK_TOKEN}, "api_key_env: sk-… (31 characters) does not match", SK_TOKEN),
        ({"base_url": base.replace("http://", f"http://user:{PASSWORD}@")}, "(user:password@) are refused", PASSWORD),
        ({"base_url": f"{base}?api_key={QUERY_KEY}"}, "a query string or fragment in the URL", QUERY_KEY),
    ]
    printed = ""
    for change, says, secret in planted:
        bad = json.loads(json.dumps(cfg))
        bad["llm"]["models"]["echo"].update(change)
        proc = run_snakemake(tmp_path, bad, target, env=env, timeout=600)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0 and says in out, out[-3000:]
        assert secret not in out and "put the key in" in out, out[-3000:]
        printed += out
    assert chat_server.count() == 0, "nothing was sent with a refused config"

    proc = run_snakemake(tmp_path, cfg, target, env=env, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-4000:]
    assert {auth for _, auth in chat_server.requests} == {f"Bearer {ENV_KEY}"}, "the key was sent, as a header"
    failed = json.loads((tmp_path / f"results/crystal/{ds}/responses/failed/echo.json").read_text())
    assert [f["id"] for f in failed["failed"]] == ["q001"] and "Incorrect API key provided: ***" in failed["failed"][0][
        "error"
    ]
    cfg["llm"]["models"]["echo"]["max_failed_fraction"] = 0.5
    again = run_snakemake(tmp_path, cfg, target, env=env, timeout=600)
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    printed += out + again.stdout + again.stderr
    record = json.loads((tmp_path / target.replace(".jsonl", ".json")).read_text())
    assert record["base_url"] == base and record["api_key_env"] == "CRUCIBLE_DAG_KEY"
    assert (tmp_path / ".snakemake/log").is_dir() and any((tmp_path / "logs").rglob("*.log"))
    for secret in (HF_TOKEN, SK_TOKEN, PASSWORD, QUERY_KEY, ENV_KEY):
        for part in (secret, secret[3:15]):
            assert files_containing(tmp_path, part) == [], part
            assert part not in printed, part


# --- issue 52 items 6 and 7: a server that echoes the key and names another model --------------


@pytest.mark.slow
def test_dag_with_an_echoing_impostor_server_writes_no_form_of_the_key(tmp_path, chat_server, venv_env):
    """One generation job against a server that quotes its Authorization header in every answer
    (raw, base64, Basic auth, URL-encoded, JSON-escaped) and reports another model than the one
    configured: no file of the run (results/, logs/, .snakemake/ with its log) holds any form of
    the key; the job's log warns about both; the record names the model that answered."""
    from helpers import key_encodings

    env = {**venv_env, "CRUCIBLE_DAG_KEY": KEY, "NO_PROXY": "127.0.0.1", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    chat_server.served_model = "impostor-1b"
    cfg = config(chat_server.base_url)
    ds = "bench-ds"
    planted_prompts(tmp_path, f"results/crystal/{ds}/prompts.jsonl", ["#echoauth a", "#echoauth b"])
    target = f"results/crystal/{ds}/responses/echo.jsonl"
    proc = run_snakemake(tmp_path, cfg, target, env=env, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert {auth for _, auth in chat_server.requests} == {f"Bearer {KEY}"}
    rows = [json.loads(line) for line in (tmp_path / target).read_text().splitlines()]
    assert all(r["response"].startswith("you sent 'Bearer ***'; exact: ***") for r in rows), rows
    log = (tmp_path / f"logs/llm/crystal/{ds}/echo.log").read_text()
    assert log.count("the server's answer held the API key (from CRUCIBLE_DAG_KEY, raw or encoded)") == 2
    assert "asked for model 'echo-7b', but another model answered 2 of 2 items ('impostor-1b' answered 2)" in log
    record = json.loads((tmp_path / target.replace(".jsonl", ".json")).read_text())
    assert record["model_ids_not_configured"] == ["impostor-1b"]
    assert (tmp_path / ".snakemake/log").is_dir() and (tmp_path / "logs").is_dir()
    for name, form in key_encodings(KEY).items():
        assert files_containing(tmp_path, form) == [], name
        assert form not in proc.stdout + proc.stderr, name
