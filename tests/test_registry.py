"""crucible.core.registry: the one registry shape behind Matbench models, potentials, crystal
generators and reaction baselines (names kept, unknown names refused listing the known ones,
lazy entries imported only when asked for)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from crucible.core.errors import ConfigError
from crucible.core.registry import Registry, Spec, UnknownNameError


def _registries():
    from crucible.crystal.generators import GENERATORS
    from crucible.models.registry import MODELS
    from crucible.potentials.registry import REGISTRY
    from crucible.reactions.baselines import BASELINES

    return {"models": MODELS, "potentials": REGISTRY, "generators": GENERATORS, "baselines": BASELINES}


# The names users write in config files: none may disappear.
NAMES = {
    "models": ["comp-transformer", "dummy", "gbm-magpie", "mlip-embed", "rf-magpie", "rf-scm-magpie"],
    "potentials": ["chgnet-0.3.0", "emt", "mace-mp", "matgl", "orb", "sevennet-0", "sevennet-l3i5", "uma"],
    "generators": ["chance", "mlip-search", "random-symmetric", "template"],
    "baselines": ["nearest-substrate", "oracle", "popularity", "random", "yield-model"],
}


@pytest.mark.parametrize("which", sorted(NAMES))
def test_every_family_registry_has_the_one_shape_and_its_names(which):
    reg = _registries()[which]
    assert isinstance(reg, Registry) and reg.names() == NAMES[which] == sorted(reg)
    for name in reg:
        try:
            spec = reg[name]
        except ImportError as exc:  # comp-transformer on the Python 3.12 leg, which has no torch
            assert exc.name.split(".")[0] == "torch" and importlib.util.find_spec("torch") is None
            continue
        assert isinstance(spec, Spec) and spec.name == name
        assert spec.device in ("cpu", "gpu") and spec.inputs and spec.granularity()
    with pytest.raises(ConfigError, match=f"unknown {reg.kind} 'nope'; known {reg.kind}s: {', '.join(NAMES[which])}$"):
        reg["nope"]
    assert "nope" not in reg and reg.get("nope") is None


def test_devices_and_inputs_say_what_the_rules_need():
    regs = _registries()
    assert [n for n, s in regs["generators"].items() if s.device == "gpu"] == ["mlip-search"]
    assert regs["generators"]["template"].needs_train and not regs["generators"]["random-symmetric"].needs_train
    assert regs["potentials"]["emt"].device == "cpu" and regs["potentials"]["chgnet-0.3.0"].device == "gpu"
    if importlib.util.find_spec("torch") is not None:
        assert regs["models"]["comp-transformer"].device == "gpu" and regs["models"]["comp-transformer"].runs_torch
    assert regs["models"]["mlip-embed"].inputs == ("structure",)
    assert (
        regs["models"]["dummy"].granularity(10**9) == "task" and regs["models"]["rf-magpie"].granularity(10) == "fold"
    )
    assert regs["models"]["gbm-magpie"].granularity(20_000) == "task" == regs["models"]["gbm-magpie"].granularity(312)
    assert regs["models"]["gbm-magpie"].granularity(20_001) == "fold"


def test_unknown_name_error_is_a_config_error_and_a_key_error():
    reg = Registry("widget", [Spec(name="b", factory=dict), Spec(name="a", factory=list)])
    with pytest.raises(UnknownNameError) as info:
        reg["c"]
    assert isinstance(info.value, KeyError) and isinstance(info.value, ConfigError)
    assert str(info.value) == "unknown widget 'c'; known widgets: a, b"  # not quoted as a KeyError would be
    assert str(reg.unknown("c", ["mine"])) == "unknown widget 'c'; known widgets: a, b, mine"
    assert reg["a"].build() == [] and list(reg) == ["a", "b"] and len(reg) == 2


def test_register_refuses_a_second_entry_and_a_bad_device():
    reg = Registry("widget", [Spec(name="a", factory=list)])
    with pytest.raises(ValueError, match="registered twice"):
        reg.register(Spec(name="a", factory=dict))
    with pytest.raises(ValueError, match="device must be one of cpu, gpu"):
        Spec(name="x", factory=list, device="tpu")


def test_lazy_entries_import_only_the_module_asked_for():
    # a Dummy job must not import torch (each Matbench fold is its own process)
    code = (
        "import sys; from crucible.models.registry import MODELS, get_spec; "
        "assert 'comp-transformer' in MODELS and MODELS.names()[0] == 'comp-transformer'; "
        "get_spec('dummy'); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_lazy_module_that_does_not_register_its_name_is_named():
    reg = Registry("widget", lazy={"ghost": "crucible.core.errors"})
    assert "ghost" in reg
    with pytest.raises(ConfigError, match="widget 'ghost': module crucible.core.errors did not register it"):
        reg["ghost"]


def test_build_names_a_keyword_the_factory_does_not_take_and_passes_unreadable_signatures():
    def make(train, seed=0):
        return (train, seed)

    with pytest.raises(ConfigError, match=r"thing: unknown parameter\(s\) bogus; it takes train, seed"):
        Spec(name="thing", factory=make).build(train=[], bogus=1)
    assert Spec(name="thing", factory=make).build(train=[1], seed=2) == ([1], 2)
    # dict's signature cannot be read (a C callable): the call itself is the check
    assert Spec(name="builtin", factory=dict).build(a=1) == {"a": 1}
