"""crucible.crystal.workflow: the crystal family's targets and rule params, as pure functions of
the config (the DAG itself: test_workflow_crystal.py)."""

from __future__ import annotations

import json

import pytest

from crucible.core.errors import ConfigError
from crucible.crystal import workflow as wf
from crucible.sources.pinned_files import resource_path


class Wildcards:
    def __init__(self, dataset):
        self.crystal_dataset = dataset


def test_defaults_come_from_the_schema():
    assert wf.final_outputs({}) == []  # no dataset unless asked for
    assert wf.generators({}) == ["template", "random-symmetric"]
    params = wf.build_params({})
    per_dataset = params.pop("max_sites")
    assert params == {
        "template": "composition-v1",
        "test_fraction": 0.5,
        "seed": 0,
        "split_by": "random",
        "max_test_items": 0,
        "max_train_items": 0,
    }
    # each set's own site limit (carbon-24 goes to 24 atoms), unless the config names one
    assert {ds: per_dataset(Wildcards(ds)) for ds in ("carbon-24", "mp-20", "perov-5", "aflow-prototypes")} == {
        "carbon-24": 24,
        "mp-20": 20,
        "perov-5": 20,
        "aflow-prototypes": 20,
    }
    assert wf.max_sites({"crystal": {"max_sites": {"carbon-24": 12}}}, "carbon-24") == 12
    assert wf.max_sites({"crystal": {"max_sites": {"carbon-24": 12}}}, "mp-20") == 20
    assert wf.max_sites({"crystal": {"max_sites": 8}}, "carbon-24") == 8
    assert wf.generation_seed({}) == 0 and wf.score_timeout({}) == 10


def test_targets_and_responders():
    cfg = {
        "crystal": {"datasets": ["aflow-prototypes"], "generators": ["template"], "llm_models": ["gpt"]},
        "llm": {"models": {"gpt": {"backend": "replay", "path": "a/{benchmark}/{dataset}.jsonl"}}},
    }
    assert wf.responders(cfg) == ["template", "gpt"]
    assert wf.score_summaries(cfg, "aflow-prototypes") == [
        "results/crystal/aflow-prototypes/scores/template.json",
        "results/crystal/aflow-prototypes/scores/gpt.json",
    ]
    assert "results/tables/crystal_aflow-prototypes.tex" in wf.final_outputs(cfg)
    assert wf.llm_responses(cfg) == ["results/crystal/aflow-prototypes/responses/gpt.jsonl"]
    assert json.loads(wf.generator_params(cfg, "template")) == {}
    assert wf.response_info("results/crystal/x/responses/gpt.jsonl") == "results/crystal/x/responses/gpt.json"


def test_wildcards_match_only_configured_names():
    cfg = {"crystal": {"datasets": ["mp-20"]}}
    assert wf.wildcard_constraints(cfg) == {"crystal_dataset": r"mp\-20"}
    assert wf.wildcard_constraints(cfg, device="gpu")["crystal_generator"] == "mlip\\-search"


@pytest.mark.parametrize(
    "crystal, message",
    [
        ({"datasets": ["mp-21"]}, "config crystal.datasets: unknown mp-21"),
        ({"llm_models": ["gpt-9"]}, "config crystal.llm_models: gpt-9 not defined under llm.models"),
        # a typo in a per-set site limit would leave mp-20 at its own limit without a word
        ({"datasets": ["mp-20"], "max_sites": {"mp20": 30}}, r"config crystal.max_sites: dataset\(s\) mp20 not in"),
    ],
)
def test_check_names_the_key(crystal, message):
    with pytest.raises(ConfigError, match=message):
        wf.check({"crystal": crystal})


def test_csp_targets_samples_and_audit_inputs():
    """CSP is opt-in (no responders by default); a generator's samples come from its sample rule, a
    language model's from the LLM stage on the repeated prompt set, a samples file as configured;
    the audit of a CDVAE set reads train, val and test through their roles."""
    assert wf.csp_section({}) == {"k": 20, "responders": [], "samples_files": {}, "chance": True, "workers": 1}
    plain = {"crystal": {"datasets": ["perov-5"]}}
    assert not [p for p in wf.final_outputs(plain) if "/csp/" in p or "crystal_csp" in p]
    assert "results/tables/crystal_perov-5_audit.md" in wf.final_outputs(plain)
    assert wf.audit_inputs(plain, "perov-5") == [
        str(resource_path(f"crystal/perov-5/{split}")) for split in ("train", "val", "test")
    ]
    assert wf.audit_params({}) == {"convention": "cdvae", "max_comparisons": 2000, "workers": 1}
    cfg = {
        "crystal": {
            "datasets": ["aflow-prototypes", "perov-5"],
            "generators": ["template"],
            "llm_models": ["gpt"],
            "csp": {"k": 5, "responders": ["template", "gpt"], "samples_files": {"diffcsp": {"perov-5": "d.tar.gz"}}},
        },
        "llm": {"models": {"gpt": {"backend": "replay", "path": "a/{benchmark}/{dataset}.jsonl"}}},
    }
    # the chance floor comes first on every dataset, though chance is not among crystal.generators
    assert wf.csp_responders(cfg) == ["chance", "template", "gpt", "diffcsp"]
    assert wf.csp_dataset_responders(cfg, "aflow-prototypes") == ["chance", "template", "gpt"]
    assert wf.samples_input(cfg, "mp-20", "chance") == "results/crystal/mp-20/samples/k5/chance.jsonl"
    assert "results/crystal/aflow-prototypes/csp/chance.json" in wf.final_outputs(cfg)
    no_chance = {**cfg, "crystal": {**cfg["crystal"], "csp": {**cfg["crystal"]["csp"], "chance": False}}}
    assert wf.csp_responders(no_chance) == ["template", "gpt", "diffcsp"]
    assert wf.samples_input(cfg, "perov-5", "template") == "results/crystal/perov-5/samples/k5/template.jsonl"
    assert wf.samples_input(cfg, "perov-5", "gpt") == "results/crystal/perov-5/k5/responses/gpt.jsonl"
    assert wf.samples_input(cfg, "perov-5", "diffcsp") == "d.tar.gz"
    assert wf.samples_format(cfg, "gpt") == "responses" and wf.samples_format(cfg, "diffcsp") == "auto"
    assert "results/crystal/perov-5/k5/responses/gpt.jsonl" in wf.llm_responses(cfg)
    assert "results/crystal/perov-5/responses/gpt.jsonl" in wf.llm_responses(cfg)
    outs = wf.final_outputs(cfg)
    assert "results/crystal/perov-5/csp/diffcsp.json" in outs
    assert "results/crystal/aflow-prototypes/csp/diffcsp.json" not in outs
    assert "results/tables/crystal_csp.tex" in outs


@pytest.mark.parametrize(
    "csp, message",
    [
        (
            {"responders": ["diffcsp"]},
            "crystal.csp.responders: diffcsp not in crystal.generators or crystal.llm_models",
        ),
        ({"samples_files": {"template": {"perov-5": "x"}}}, "crystal.csp.samples_files: template is also a generator"),
        (
            {"samples_files": {"m": {"mp-20": "x"}}},
            r"crystal.csp.samples_files.m: dataset\(s\) mp-20 not in crystal.datasets",
        ),
        (
            {"responders": ["template"], "relax": {"potentials": ["emt", "nope"]}},
            r"crystal.csp.relax.potentials: unknown potential\(s\) nope",
        ),
        ({"relax": {"potentials": ["emt"]}}, "crystal.csp.relax.potentials: no CSP samples to relax"),
    ],
)
def test_csp_config_mistakes_are_refused(csp, message):
    with pytest.raises(ConfigError, match=message):
        wf.check({"crystal": {"datasets": ["perov-5"], "generators": ["template"], "csp": csp}})


def test_relax_then_match_targets_rules_and_identity():
    """Relax-then-match is off by default; with potentials, every CSP summary gets a relaxed twin
    (in the CSP table's inputs after the drawn ones), the cpu and gpu rules split the potentials by
    their spec, and the relaxation's settings and the potential are names of the relax jobs."""
    assert wf.relax_section({})["potentials"] == [] and not wf.relaxed_summaries({})
    cfg = {
        "crystal": {
            "datasets": ["aflow-prototypes"],
            "generators": ["template"],
            "csp": {"k": 2, "responders": ["template"], "relax": {"potentials": ["emt", "chgnet-0.3.0"], "steps": 7}},
        }
    }
    wf.check(cfg)
    drawn = [f"results/crystal/aflow-prototypes/csp/{r}.json" for r in ("chance", "template")]
    relaxed = [
        f"results/crystal/aflow-prototypes/csp_relaxed/{p}/{r}.json"
        for r in ("chance", "template")
        for p in ("emt", "chgnet-0.3.0")
    ]
    assert wf.csp_summaries(cfg) == drawn + relaxed
    assert set(relaxed) <= set(wf.final_outputs(cfg))
    assert wf.relax_potentials(cfg, "cpu") == ["emt"] and wf.relax_potentials(cfg, "gpu") == ["chgnet-0.3.0"]
    assert wf.relax_params(cfg) == {"optimizer": "FIRE", "fmax": 0.1, "steps": 7, "cell_filter": "frechet"}
    names = wf.names(cfg)
    assert names["crystal/relax/emt"].spec == {
        "cell_filter": "frechet",
        "fmax": 0.1,
        "k": 2,
        "optimizer": "FIRE",
        "steps": 7,
    }
    assert names["crystal/relax/emt"].rules == ("relax_crystal_samples", "relax_crystal_samples_neural")
    assert "potential/chgnet-0.3.0" in names
