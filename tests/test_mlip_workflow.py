"""crucible.mlip.workflow: the MLIP targets and params, straight from a config dict."""

from __future__ import annotations

import pytest

from crucible.core.errors import ConfigError
from crucible.mlip import workflow as wf


def test_no_potentials_no_targets():
    assert wf.final_outputs({}) == [] and wf.models({"mlip": {}}) == []


def test_eos_params_sorted_and_defaulted():
    cfg = {"mlip": {"models": ["emt"], "eos": {"elements": ["Ni", "Cu", "Al"], "volume_range": [0.95, 1.05]}}}
    assert wf.eos_params(cfg) == {"elements": "Al,Cu,Ni", "points": 7, "volume_range": "0.95 1.05"}
    assert wf.eos_params({"mlip": {}}) == {"elements": "all", "points": 7, "volume_range": "0.94 1.06"}


def test_unknown_potential_is_refused():
    wf.check_models({"mlip": {"models": ["emt", "chgnet-0.3.0"]}})
    with pytest.raises(ConfigError, match="unknown potential.*chgnet-3"):
        wf.check_models({"mlip": {"models": ["chgnet-3"]}})


def test_s2ef_inputs(tmp_path):
    frames = tmp_path / "frames.xyz"
    frames.write_text("")
    cfg = {
        "mlip": {
            "models": ["emt"],
            "s2ef": {"datasets": {"vasp": "ase-vasp-testdata", "mine": str(frames), "gone": str(tmp_path / "no.xyz")}},
        }
    }
    assert wf.s2ef_input(cfg, "vasp") == []
    assert wf.s2ef_input(cfg, "mine") == str(frames)
    with pytest.raises(ConfigError, match="mlip.s2ef.datasets.gone: no such file"):
        wf.s2ef_input(cfg, "gone")


def test_final_outputs():
    cfg = {"mlip": {"models": ["emt", "chgnet-0.3.0"], "s2ef": {"datasets": {"vasp": "ase-vasp-testdata"}}}}
    out = wf.final_outputs(cfg)
    assert out[:2] == ["results/mlip/eos/emt.parquet", "results/mlip/eos/chgnet-0.3.0.parquet"]
    assert "results/mlip/s2ef/vasp/chgnet-0.3.0.parquet" in out and "results/tables/mlip_s2ef_vasp.tex" in out
    assert "results/figures/mlip_eos_b0_parity.pdf" in out and len(out) == len(set(out)) == 14
