"""The discovery workflow functions: targets, the CPU/GPU split of the curve rule, start-up checks."""

from __future__ import annotations

import pytest

from crucible.core.errors import ConfigError
from crucible.dag.config import check_schema
from crucible.discovery import workflow as wf


def _config(**diatomics):
    config = {"discovery": {"diatomics": diatomics}}
    check_schema(config)
    return config


def test_targets_per_potential_and_over_them():
    config = _config(potentials=["emt", "chgnet-0.3.0"])
    out = wf.final_outputs(config)
    assert (
        "results/discovery/diatomics/emt.json.gz" in out and "results/discovery/diatomics/chgnet-0.3.0.json.gz" in out
    )
    assert {f"results/tables/discovery_diatomics.{e}" for e in ("csv", "md", "tex")} <= set(out)
    assert "results/figures/discovery_diatomics_curves_chgnet-0.3.0.png" in out
    assert wf.final_outputs(_config()) == []
    assert wf.elements(config) == "all"
    assert wf.elements(_config(potentials=["emt"], elements=["Cu", "H"])) == "Cu,H"


def test_emt_runs_in_the_cpu_rule_networks_in_the_gpu_rule():
    config = _config(potentials=["emt", "chgnet-0.3.0"])
    assert "emt" in wf.potentials_on(config, "cpu").split("|")
    assert "chgnet\\-0\\.3\\.0" in wf.potentials_on(config, "gpu") or "chgnet-0.3.0" in wf.potentials_on(config, "gpu")
    assert "emt" not in wf.potentials_on(config, "gpu")


def test_unknown_potential_or_element_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match="discovery.diatomics.potentials"):
        wf.check(_config(potentials=["nope"]))
    with pytest.raises(ConfigError, match="discovery.diatomics.elements: Xx"):
        wf.check(_config(potentials=["emt"], elements=["Xx", "H"]))


def test_the_reference_and_cards_are_where_the_fetch_rule_puts_them():
    from crucible.discovery.data import REFERENCE_ROLE
    from crucible.sources.pinned_files import resource_path

    assert wf.reference_file() == str(resource_path(REFERENCE_ROLE))
    assert wf.reference_file().startswith("resources/downloads/")
    cards = wf.card_files()
    assert len(cards) == 35 and str(resource_path("discovery/cards/chgnet-0.3.0")) in cards


def test_the_scorer_is_off_by_default_and_builds_per_model_scores_and_one_table():
    assert wf.stability_models(_config(potentials=["emt"])) == []
    assert not any("stability" in p for p in wf.final_outputs(_config(potentials=["emt"])))
    config = {"discovery": {"stability": {"models": ["chgnet-0.3.0", "mace-mp-0"]}}}
    check_schema(config)
    wf.check(config)
    out = wf.final_outputs(config)
    assert out[:2] == ["results/discovery/stability/chgnet-0.3.0.json", "results/discovery/stability/mace-mp-0.json"]
    assert {f"results/tables/discovery_stability.{e}" for e in ("csv", "md", "tex")} <= set(out)
    assert not any("diatomics" in p for p in out)
    assert wf.predictions_file("chgnet-0.3.0").startswith("resources/downloads/")
    assert wf.wbm_summary_file().startswith("resources/downloads/")


def test_a_model_without_pinned_predictions_is_refused_naming_the_key():
    config = {"discovery": {"stability": {"models": ["chgnet-0.3.0", "sevennet-0"]}}}
    check_schema(config)
    with pytest.raises(ConfigError, match="discovery.stability.models: sevennet-0 has no pinned predictions file"):
        wf.check(config)
