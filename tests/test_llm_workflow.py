"""crucible.llm.workflow: response targets, models by backend, rule params (the llm_generate rules
in the DAG: test_workflow_llm.py)."""

from __future__ import annotations

import os

import pytest

from crucible.core.errors import ConfigError
from crucible.identity import records as identity
from crucible.identity.name_book import Meaning
from crucible.llm import workflow

from helpers import write_prompts


def config(server_url="http://127.0.0.1:9/v1", ckpt="/nonexistent", replay="answers/{benchmark}/{dataset}.jsonl"):
    return {
        "llm": {
            "models": {
                "echo": {
                    "backend": "openai",
                    "model": "echo-7b",
                    "base_url": server_url,
                    "api_key_env": "CRUCIBLE_DAG_KEY",
                    "backoff_s": 0.01,
                    "params": {"max_tokens": 8},
                },
                "replayed": {"backend": "replay", "path": replay},
                "tiny": {"backend": "transformers", "path": ckpt, "batch_size": 4, "params": {"max_tokens": 4}},
            }
        },
        "crystal": {"llm_models": ["echo", "tiny"]},
    }


def test_response_targets_for_a_benchmark():
    cfg = config()
    assert workflow.response_targets(cfg, "crystal", ["mp-20", "perov-5"]) == [
        "results/crystal/mp-20/responses/echo.jsonl",
        "results/crystal/mp-20/responses/tiny.jsonl",
        "results/crystal/perov-5/responses/echo.jsonl",
        "results/crystal/perov-5/responses/tiny.jsonl",
    ]
    assert workflow.response_targets(cfg, "reactions", ["buchwald-hartwig/single_varying"], models=["replayed"]) == [
        "results/reactions/buchwald-hartwig/single_varying/responses/replayed.jsonl"
    ]
    assert workflow.models_by_backend(cfg, ["transformers"]) == ["tiny"]
    assert workflow.replay_input(cfg, "replayed", "reactions", "bh/x") == ["answers/reactions/bh/x.jsonl"]
    assert workflow.replay_input(cfg, "echo", "reactions", "bh/x") == []
    with pytest.raises(ConfigError, match=r"config crystal.llm_models: gpt-9 not defined under llm.models"):
        workflow.response_targets({**cfg, "crystal": {"llm_models": ["gpt-9"]}}, "crystal", ["mp-20"])
    with pytest.raises(ConfigError, match="one path component"):
        workflow.response_targets(cfg, "a/b", ["x"])
    with pytest.raises(ConfigError, match=r"llm.models.bad: backend openai needs base_url"):
        workflow.llm_models({"llm": {"models": {"bad": {"backend": "openai", "model": "m"}}}})


def test_rule_params_and_the_family_target():
    cfg = config()
    assert workflow.cache_dir({}) == "results/llm/cache"
    assert workflow.wildcard_constraints(cfg, ["transformers"])["llm_model"] == "tiny"
    # `snakemake llm`: every response file a benchmark asks for, nothing when none asks
    cfg["crystal"]["datasets"] = ["aflow-prototypes"]
    assert workflow.final_outputs(cfg) == [
        "results/crystal/aflow-prototypes/responses/echo.jsonl",
        "results/crystal/aflow-prototypes/responses/tiny.jsonl",
    ]
    assert workflow.final_outputs({"llm": cfg["llm"]}) == []


# --- issue 22: the entry reaches the job by name, no credentials in base_url ---------------


def test_credentials_in_base_url_are_refused_without_repeating_them():
    entry = {"backend": "openai", "model": "m", "base_url": "http://alice:hunter2@gpu-7:8000/v1"}
    with pytest.raises(ConfigError) as err:
        workflow.llm_models({"llm": {"models": {"echo": entry}}})
    message = str(err.value)
    assert "llm.models.echo.base_url: credentials in the URL (user:password@) are refused" in message
    assert "use http://gpu-7:8000/v1 and put the key in the variable that api_key_env names" in message
    assert "hunter2" not in message and "alice" not in message
    with pytest.raises(ConfigError, match="are refused"):
        workflow.llm_models({"llm": {"models": {"echo": {**entry, "base_url": "https://tok@api.example/v1"}}}})


def test_the_job_reads_its_model_from_the_config_files_by_name(tmp_path):
    from crucible.llm.model_entry import entry_from_config_files

    base, extra = tmp_path / "config.yaml", tmp_path / "site.yaml"
    base.write_text("llm:\n  models:\n    echo: {backend: openai, model: a, base_url: 'http://h:1/v1'}\n")
    extra.write_text("llm:\n  models:\n    echo: {model: b}\n    other: {backend: replay, path: x.jsonl}\n")
    merged = entry_from_config_files([base, extra], "echo")
    assert merged == {"backend": "openai", "model": "b", "base_url": "http://h:1/v1"}, "merged as Snakemake does"
    with pytest.raises(ConfigError, match=r"llm.models has no 'gpt' \(has: echo, other\)"):
        entry_from_config_files([base, extra], "gpt")
    # Snakemake's precedence: the Snakefile's configfile first, then each --configfile.
    flags = workflow.config_file_flags(["config/config.yaml", str(extra)], [str(extra)])
    assert flags == f"--config-file {os.path.abspath('config/config.yaml')} --config-file {extra}"
    assert workflow.config_file_flags(["/a b/c.yaml"], []) == "--config-file '/a b/c.yaml'"
    # The hash names the checked entry: defaults spelled out or not, the same model.
    cfg = {"llm": {"models": {"echo": merged}}}
    spelled = {"llm": {"models": {"echo": {**merged, "concurrency": 4, "params": {"temperature": 0}}}}}
    assert workflow.model_sha256(cfg, "echo") == workflow.model_sha256(spelled, "echo")
    assert workflow.model_sha256(cfg, "echo") != workflow.model_sha256(
        {"llm": {"models": {"echo": {**merged, "model": "c"}}}}, "echo"
    )


def test_an_entry_other_than_the_planned_one_is_refused(tmp_path, capsys):
    from crucible.cli import main

    cfg = tmp_path / "config.yaml"
    cfg.write_text("llm:\n  models:\n    echo: {backend: openai, model: a, base_url: 'http://127.0.0.1:9/v1'}\n")
    write_prompts(tmp_path / "prompts.jsonl", ["hi"])
    args = ["llm", "generate", "--prompts", str(tmp_path / "prompts.jsonl"), "--model", "echo"]
    args += ["--config-file", str(cfg), "--model-sha256", "0" * 64, "--out", str(tmp_path / "r.jsonl")]
    args += ["--out-record", str(tmp_path / "r.json")]
    assert main(args) == 2
    assert "is not the entry the workflow was planned with" in capsys.readouterr().err
    assert not (tmp_path / "r.jsonl").exists()


def test_benchmarks_declare_what_they_ask_for_to_the_llm_service():
    """The family registry carries nothing of the LLM stage: each benchmark declares its response
    files to crucible.llm, once."""
    import dataclasses

    from crucible.dag.families import Family, families

    assert "llm_responses" not in {f.name for f in dataclasses.fields(Family)}
    families()  # every family's workflow module imported: all declared
    assert {"crystal", "reactions"} <= set(workflow._ASKED_BY)
    with pytest.raises(ValueError, match="'crystal' declares its language-model responses twice"):
        workflow.asks_language_models("crystal")(lambda config: [])


def test_a_model_asked_at_another_address_keeps_its_name():
    """A name's meaning in a results folder is what answers, not where or how patiently it is
    asked: the llama.cpp server on a new port, or a vLLM server back on another node, used to make
    the folder refuse the config (the cache already ignored the address). The job still checks
    the whole entry it was planned with."""

    def asked(**kwargs):
        return {**config(**kwargs), "crystal": {"datasets": ["aflow-prototypes"], "llm_models": ["echo", "tiny"]}}

    names = workflow.names(asked())
    assert set(names) == {"llm/echo", "llm/tiny"}
    moved = asked(server_url="http://gpu-node-3:8000/v1")
    moved["llm"]["models"]["echo"].update(concurrency=1, timeout_s=900, max_retries=0, api_key_env="OTHER_KEY")
    assert {k: m.digest for k, m in workflow.names(moved).items()} == {k: m.digest for k, m in names.items()}
    assert workflow.model_sha256(moved, "echo") != workflow.model_sha256(asked(), "echo")
    other = asked()
    other["llm"]["models"]["echo"]["params"] = {"max_tokens": 9}
    assert workflow.names(other)["llm/echo"].digest != names["llm/echo"].digest


def test_a_local_models_weights_are_part_of_its_jobs_code_identity(tmp_path):
    """Issue 44 item 2: the folder a transformers entry loads is hashed into the code identity of
    the jobs made of that model's name, and an edit of one weight file changes it."""
    from crucible.identity.name_book import NameBook

    ckpt = tmp_path / "tiny"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"\0" * 64)
    book = NameBook()
    asked = {**config(ckpt=str(ckpt)), "crystal": {"datasets": ["aflow-prototypes"], "llm_models": ["echo", "tiny"]}}
    book.meanings.update(workflow.names(asked))
    assert book.meanings["llm/tiny"].files == (str(ckpt),) and book.meanings["llm/echo"].files == ()
    code = book.code_of(["llm/tiny"])
    before = identity.job_code_digest("crystal", "generate", code)
    assert identity.job_code_digest("crystal", "generate", book.code_of(["llm/echo"])) != before
    (ckpt / "model.safetensors").write_bytes(b"\1" * 64)
    assert identity.job_code_digest("crystal", "generate", code) != before


def test_a_folder_named_under_the_whole_entry_takes_the_new_meaning(tmp_path):
    """Folders whose names were recorded under the whole entry's hash (before the address left
    it) record the new meaning instead of refusing the same config; another entry is refused."""
    from crucible.core.io import write_json
    from crucible.identity.name_book import NameBook

    cfg = {**config(), "crystal": {"datasets": ["aflow-prototypes"], "llm_models": ["echo", "tiny"]}}
    book = tmp_path / "names.json"
    old = {"entry_sha256": workflow.model_sha256(cfg, "echo")}
    write_json({"llm/echo": {"digest": Meaning(old, "k").digest, "spec": old, "key": "llm.models.echo"}}, book)
    names = NameBook()
    names.meanings.update(workflow.names(cfg))
    assert names.check_recorded(book) == ["llm/echo", "llm/tiny"], "recorded anew"
    other = {"entry_sha256": "0" * 64}
    write_json({"llm/echo": {"digest": Meaning(other, "k").digest, "spec": other, "key": "llm.models.echo"}}, book)
    with pytest.raises(ConfigError, match="'llm/echo' already means"):
        names.check_recorded(book)
