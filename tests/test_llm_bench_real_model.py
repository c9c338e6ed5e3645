"""benchmarks/bench_llm_real_model.py without a model (issue 33): each engine runs with what is
installed, either without the other, and the config it writes is one the workflow accepts, with
llama.cpp's server asked as it understands (the schema as json_object, no repeat penalty)."""

from __future__ import annotations

import argparse
import importlib.util

import pytest

from crucible.dag.config import check_schema
from crucible.llm.model_entry import model_spec

from helpers import REPO

SPEC = importlib.util.spec_from_file_location("bench_llm_real_model", REPO / "benchmarks" / "bench_llm_real_model.py")
bench = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bench)

TF, SERVER, JSON = bench.TF, bench.SERVER, bench.JSON


@pytest.mark.parametrize(
    "missing, structured, engines",
    [
        (set(), True, {TF: [TF, TF + JSON], SERVER: [SERVER, SERVER + JSON]}),
        ({"llama_cpp.server.app"}, True, {TF: [TF, TF + JSON]}),
        ({"gguf"}, True, {SERVER: [SERVER, SERVER + JSON]}),
        ({"xgrammar"}, True, {TF: [TF], SERVER: [SERVER, SERVER + JSON]}),
        (set(), False, {TF: [TF], SERVER: [SERVER]}),
    ],
)
def test_each_engine_runs_with_what_is_installed(monkeypatch, missing, structured, engines):
    monkeypatch.setattr(bench, "installed", lambda *modules: [m for m in modules if m in missing])
    found, skipped = bench.engines_available(structured)
    assert found == engines
    assert len(skipped) == len(missing), skipped


def test_the_config_it_writes_is_valid_and_asks_the_server_as_it_understands():
    args = argparse.Namespace(
        max_tokens=384,
        batch_size=4,
        crystal_items=6,
        reactions_dataset="cernak",
        question_types=["single_varying", "all_blank"],
        reaction_items=6,
    )
    models = [TF, TF + JSON, SERVER, SERVER + JSON]
    config = bench.bench_config(args, "resources/model.gguf", "http://127.0.0.1:9/v1", models)
    check_schema(config)
    entries = config["llm"]["models"]
    specs = {name: model_spec(name, entry) for name, entry in entries.items()}
    assert specs[SERVER + JSON]["response_format"] == "json_object", "llama-cpp-python's server refuses json_schema"
    for name in (SERVER, SERVER + JSON):
        assert specs[name]["params"]["extra_body"] == {"repeat_penalty": 1.0}, "greedy, as transformers decodes"
    # The same decoding parameters otherwise, so that the engines' greedy replies can be compared.
    assert {k: v for k, v in specs[SERVER]["params"].items() if k != "extra_body"} == specs[TF]["params"]
    assert config["reactions"]["questions"] == {"max_per_type": 6}
