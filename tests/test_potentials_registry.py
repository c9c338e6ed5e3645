"""crucible.potentials.registry: the registry of potentials by name, hub models that refuse to
download, EMT left untouched as ASE's own calculator, energies one by one or batched (CHGNet),
and a failing or non-finite energy kept as a reason, never a number."""

from __future__ import annotations

import logging
import math

import pytest
from ase.calculators.calculator import Calculator, all_changes

from crucible.core.errors import ConfigError
from crucible.mlip import eos
from crucible.potentials.energies import evaluate_energies, single_energy
from crucible.potentials.registry import get_calculator, load_potential, registered_models
from crucible.potentials.spec import WeightsUnavailableError, as_potential, resolve_device


@pytest.fixture(scope="module")
def emt():
    return load_potential("emt")


@pytest.fixture(scope="module")
def chgnet():
    pytest.importorskip("chgnet", reason="chgnet needs torch, absent on the Python 3.12 CI leg")
    return load_potential("chgnet-0.3.0", device="cpu")


def test_loading_chgnet_prints_no_banner_to_stdout(capsys, caplog):
    """CHGNet prints two banner lines on every load (verbose=False silences neither); they go to
    crucible's log at debug level, not to the console of the run."""
    pytest.importorskip("chgnet", reason="chgnet needs torch, absent on the Python 3.12 CI leg")
    with caplog.at_level(logging.DEBUG, logger="crucible.potentials.registry"):
        load_potential("chgnet-0.3.0", device="cpu")
    assert "CHGNet" not in capsys.readouterr().out
    assert "initialized with 412,525 parameters" in caplog.text and "CHGNet will run on cpu" in caplog.text


def test_registry_unknown_name():
    with pytest.raises(ConfigError, match="unknown interatomic potential 'nope'.*chgnet-0.3.0"):
        get_calculator("nope")


@pytest.mark.parametrize("name", ["mace-mp", "matgl", "orb", "uma"])
def test_hub_models_without_weights_say_so(name, tmp_path, monkeypatch):
    monkeypatch.setenv("CRUCIBLE_MLIP_WEIGHTS", str(tmp_path / "weights"))
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(WeightsUnavailableError, match="never downloads|not installed"):
        get_calculator(name)
    assert name in registered_models()


def test_emt_records_cpu(emt):
    from ase.calculators.emt import EMT

    assert emt.name == "emt" and emt.device == "cpu" and emt.batched is None
    # the third-party calculator is left as it is: nothing patched onto it
    assert type(emt.calculator) is EMT and not [a for a in vars(emt.calculator) if a.startswith("crucible")]
    assert type(get_calculator("emt")) is EMT


def test_batched_path_matches_single(chgnet):
    from ase.collections import dcdft

    from crucible.potentials.energies import single_energy

    structures = eos.scaled_structures(dcdft["Cu"], [11.5, 12.0])
    assert chgnet.batched is not None
    batched = evaluate_energies(chgnet, structures)
    for (energy, reason), atoms in zip(batched, structures):
        assert reason is None and energy == pytest.approx(single_energy(chgnet, atoms), abs=2e-4)


def test_energies_are_emts_own_and_failures_keep_their_reason(emt):
    from ase.build import bulk
    from ase.calculators.emt import EMT

    cu = [bulk("Cu", "fcc", a=a) for a in (3.55, 3.60, 3.65)]
    nacl = bulk("NaCl", "rocksalt", a=5.64)  # EMT has no parameters for Na or Cl
    out = evaluate_energies(emt, [*cu, nacl])
    for (energy, reason), atoms in zip(out, cu):
        ref = atoms.copy()
        ref.calc = EMT()
        assert reason is None and energy == ref.get_potential_energy()
    assert math.isnan(out[3][0]) and out[3][1].startswith("NotImplementedError")
    assert single_energy(emt, cu[1]) == out[1][0] and cu[1].calc is None  # the input is not modified


class _NaN(Calculator):
    implemented_properties = ["energy"]

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        self.results["energy"] = float("nan")


def test_a_non_finite_energy_is_a_failure_not_a_number():
    from ase.build import bulk

    ((energy, reason),) = evaluate_energies(as_potential(_NaN()), [bulk("Cu")])
    assert math.isnan(energy) and reason == "non-finite energy (nan)"


def test_devices():
    assert resolve_device("cpu") == "cpu"
    assert resolve_device(None) in ("cpu", "cuda")
    assert load_potential("emt", device="cpu").device == "cpu"
    assert "emt" in registered_models() and "chgnet-0.3.0" in registered_models()
    with pytest.raises(ConfigError):
        load_potential("not-a-potential")


def test_cli_unknown_model_is_clean_error(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    cmd = [str(bin_dir / "crucible"), "mlip", "eos", "--model", "nope", "--elements", "Cu", "--out", "x.parquet"]
    res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert res.returncode == 2 and "unknown interatomic potential" in res.stderr and "Traceback" not in res.stderr
