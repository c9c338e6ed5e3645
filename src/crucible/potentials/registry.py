"""Interatomic potentials as ASE calculators, registered by name, and the one way to load one.

Three kinds of entry:

* builtin / shipped: no weights (``emt``) or weights inside an installed PyPI package
  (``chgnet-0.3.0``, ``sevennet-0``, ``sevennet-l3i5``). These always load offline.
* hub: the upstream loader normally downloads weights (MACE-MP, MatGL, ORB, UMA). We never
  download at run time: these load only from a local file (``$CRUCIBLE_MLIP_WEIGHTS/<name>/``
  or the upstream package's own cache folder) and otherwise raise
  :class:`~crucible.potentials.spec.WeightsUnavailableError` saying where the file was looked for.

``load_potential(name, device=None, threads=None, custom=None)`` is the one way a job gets a
potential: it first calls :func:`crucible.core.torch_setup.configure_torch` (deterministic kernels, the
job's CPU threads), then wraps the calculator in a :class:`~crucible.potentials.spec.Potential`, a
small record of what actually ran (name, device, and its provenance: calculator class,
parameters, package and version, :mod:`crucible.potentials.provenance`) beside the calculator;
nothing is patched onto the third-party calculator object. The registry is a
:class:`crucible.core.registry.Registry` of :class:`~crucible.potentials.spec.PotentialSpec`; a user's
own potentials (config ``potentials:``, passed as ``custom``) are specs of the same kind built by
:mod:`crucible.potentials.custom` and load exactly like the registered ones. A spec's ``device``
("cpu" or "gpu") is what its rules ask for (:func:`crucible.potentials.workflow.potentials_on`).

Models that offer a batched forward pass (CHGNet, SevenNet) also carry it as
``Potential.batched``: :func:`crucible.potentials.batch.evaluate` runs many structures through it
(energies, forces, stresses); on CUDA this is what makes a GPU worth having.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from crucible.core.registry import Registry
from crucible.potentials.model_batches import chgnet_batched, sevennet_batched
from crucible.potentials.provenance import provenance, provenance_text
from crucible.potentials.spec import Potential, PotentialSpec, WeightsUnavailableError, resolve_device

log = logging.getLogger(__name__)

WEIGHTS_ENV = "CRUCIBLE_MLIP_WEIGHTS"


def _weights_dir(name: str) -> Path:
    root = os.environ.get(WEIGHTS_ENV) or str(Path.home() / ".cache" / "crucible" / "weights")
    return Path(root) / name


def _find_local(name: str, patterns: Sequence[str], extra_dirs: Sequence[Path] = ()) -> Path:
    """First file/folder matching ``patterns`` in the crucible weights folder or ``extra_dirs``."""
    searched = [_weights_dir(name), *extra_dirs]
    for folder in searched:
        if not folder.is_dir():
            continue
        for pattern in patterns:
            hits = sorted(folder.glob(pattern))
            if hits:
                return hits[0]
    where = ", ".join(str(p) for p in searched)
    raise WeightsUnavailableError(
        f"model {name!r}: weights not present locally (looked for {', '.join(patterns)} in {where}); "
        f"crucible never downloads weights at run time: put the file in ${WEIGHTS_ENV}/{name}/ "
        "or drop the model from config mlip.models"
    )


def _import_or_unavailable(name: str, module: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise WeightsUnavailableError(
            f"model {name!r}: python package {module.split('.')[0]!r} is not installed ({exc}); "
            "install it and place its weights locally, or drop the model from config mlip.models"
        ) from exc


# ---------------------------------------------------------------------------------------------
# loaders


def _load_emt(device: str):
    from ase.calculators.emt import EMT

    return EMT()


def _emt_elements(calc) -> list[str]:
    from ase.calculators.emt import parameters

    return sorted(parameters)


def _load_chgnet_030(device: str):
    import contextlib
    import io

    from chgnet.model import CHGNet
    from chgnet.model.dynamics import CHGNetCalculator

    # CHGNet prints its banner to stdout whatever `verbose` says ("CHGNet v0.3.0 initialized
    # with 412,525 parameters" from the model's constructor, "CHGNet will run on cpu" from the
    # calculator's): on the console of every command and run that loads it. Kept, at debug level.
    banner = io.StringIO()
    with contextlib.redirect_stdout(banner):
        # CHGNet.load(model_name=...) reads chgnet/pretrained/0.3.0/*.pth.tar from the wheel.
        model = CHGNet.load(model_name="0.3.0", use_device=device, verbose=False)
        calc = CHGNetCalculator(model=model, use_device=device)
    log.debug("chgnet-0.3.0: %s", " / ".join(banner.getvalue().split("\n")).strip(" /"))
    return calc


# the checkpoints inside the sevenn wheel, by our name: (folder, file) under pretrained_potentials/
_SEVENNET_CHECKPOINTS = {
    "sevennet-0": ("SevenNet_0__11Jul2024", "checkpoint_sevennet_0.pth"),
    # sevenn's "7net-l3i5" (sevenn._const.SEVENNET_l3i5): the leaderboard's sevennet-l3i5
    "sevennet-l3i5": ("SevenNet_l3i5", "checkpoint_l3i5.pth"),
}


def _sevennet_checkpoint(name: str = "sevennet-0") -> Path:
    import sevenn

    folder, file = _SEVENNET_CHECKPOINTS[name]
    path = Path(sevenn.__file__).parent / "pretrained_potentials" / folder / file
    if not path.is_file():
        raise WeightsUnavailableError(f"model {name!r}: {path} missing from the installed sevenn package")
    return path


def _sevennet_elements(calc) -> list[str]:
    from ase.data import chemical_symbols

    return sorted(chemical_symbols[int(z)] for z in calc.type_map)  # keys: atomic numbers


def _load_sevennet(name: str, device: str):
    import warnings

    from sevenn.calculator import SevenNetCalculator

    # An explicit path, not the name "7net-0": the name lookup may fall back to a download.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SevenNetCalculator(model=str(_sevennet_checkpoint(name)), device=device)


def _load_sevennet_0(device: str):
    return _load_sevennet("sevennet-0", device)


def _load_sevennet_l3i5(device: str):
    return _load_sevennet("sevennet-l3i5", device)


def _offline_hub():
    # Belt and braces: even if a loader reaches for a hub, it must not touch the network.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _mace_mp_weights() -> Path:
    return _find_local("mace-mp", ["*.model"], [Path.home() / ".cache" / "mace"])


def _matgl_weights() -> Path:
    return _find_local("matgl", ["*PES*", "M3GNet*", "CHGNet*", "TensorNet*"], [Path.home() / ".cache" / "matgl"])


def _orb_weights() -> Path:
    return _find_local("orb", ["*.ckpt", "*.pt"], [Path.home() / ".cache" / "orb"])


def _uma_weights() -> Path:
    return _find_local("uma", ["uma*.pt", "*.pt"])


def _load_mace_mp(device: str):
    _offline_hub()
    path = _mace_mp_weights()
    calcs = _import_or_unavailable("mace-mp", "mace.calculators")
    return calcs.MACECalculator(model_paths=str(path), device=device, default_dtype="float64")


def _load_matgl(device: str):
    _offline_hub()
    path = _matgl_weights()
    matgl = _import_or_unavailable("matgl", "matgl")
    ext = _import_or_unavailable("matgl", "matgl.ext.ase")
    potential = matgl.load_model(str(path))
    calc_cls = getattr(ext, "PESCalculator", None) or ext.M3GNetCalculator
    return calc_cls(potential)


def _load_orb(device: str):
    _offline_hub()
    path = _orb_weights()
    pretrained = _import_or_unavailable("orb", "orb_models.forcefield.pretrained")
    calculator = _import_or_unavailable("orb", "orb_models.forcefield.calculator")
    # The architecture must match the checkpoint; orb-v3 conservative (OMat) is the default.
    build = getattr(pretrained, "orb_v3_conservative_inf_omat", None) or pretrained.orb_v2
    model = build(weights_path=str(path), device=device)
    return calculator.ORBCalculator(model, device=device)


def _load_uma(device: str):
    _offline_hub()
    path = _uma_weights()
    core = _import_or_unavailable("uma", "fairchem.core")
    predictor = core.pretrained_mlip.load_predict_unit(str(path), device=device)
    return core.FAIRChemCalculator(predictor, task_name="omat")


REGISTRY: Registry[PotentialSpec] = Registry(
    "interatomic potential",
    [
        PotentialSpec(
            name="emt",
            kind="builtin",
            description="ASE effective-medium theory (Al, Cu, Ag, Au, Ni, Pd, Pt, H, C, N, O); for fast tests",
            factory=_load_emt,
            elements=_emt_elements,
        ),
        PotentialSpec(
            name="chgnet-0.3.0",
            kind="shipped",
            description="CHGNet 0.3.0, weights inside the chgnet wheel",
            factory=_load_chgnet_030,
            batched=chgnet_batched,
            device="gpu",
        ),
        PotentialSpec(
            name="sevennet-0",
            kind="shipped",
            description="SevenNet-0 (11Jul2024), weights inside the sevenn wheel",
            factory=_load_sevennet_0,
            batched=sevennet_batched,
            elements=_sevennet_elements,
            device="gpu",
        ),
        PotentialSpec(
            name="sevennet-l3i5",
            kind="shipped",
            description="SevenNet-l3i5 (sevenn's 7net-l3i5, lmax 3, 5 layers), weights inside the sevenn wheel",
            factory=_load_sevennet_l3i5,
            batched=sevennet_batched,
            elements=_sevennet_elements,
            device="gpu",
        ),
        PotentialSpec(
            name="mace-mp",
            kind="hub",
            description="MACE-MP foundation model (local *.model file only)",
            factory=_load_mace_mp,
            weights=_mace_mp_weights,
            device="gpu",
        ),
        PotentialSpec(
            name="matgl",
            kind="hub",
            description="MatGL potential (local model folder only)",
            factory=_load_matgl,
            weights=_matgl_weights,
            device="gpu",
        ),
        PotentialSpec(
            name="orb",
            kind="hub",
            description="ORB potential (local checkpoint only)",
            factory=_load_orb,
            weights=_orb_weights,
            device="gpu",
        ),
        PotentialSpec(
            name="uma",
            kind="hub",
            description="FAIRChem UMA, omat task (local checkpoint only)",
            factory=_load_uma,
            weights=_uma_weights,
            device="gpu",
        ),
    ],
)


def weights_files(name: str) -> list[str]:
    """The local weights a registered potential loads by path (hub models), [] for the others or
    where none is found (the job then says where it looked)."""
    spec = REGISTRY[name]
    if spec.weights is None:
        return []
    try:
        return [str(spec.weights())]
    except WeightsUnavailableError:
        return []


def registered_models() -> list[str]:
    """Every name the registry knows, whether or not it can load here."""
    return REGISTRY.names()


def available_models() -> list[str]:
    """Names that load on this machine without a download: builtin and shipped always, hub
    models only where their local weights (and package) are found."""
    names = []
    for name, spec in sorted(REGISTRY.items()):
        if spec.kind != "hub":
            names.append(name)
            continue
        try:
            spec.build("cpu")
        except WeightsUnavailableError as exc:
            log.debug("%s", exc)
            continue
        except Exception as exc:  # weights present but broken: say so, do not offer it
            log.warning("model %r: local weights found but failed to load: %s", name, exc)
            continue
        names.append(name)
    return names


def potential_spec(name: str, custom: Mapping[str, Any] | None = None) -> PotentialSpec:
    """The spec of ``name``: a user's potential of ``custom`` (config ``potentials:``) or a
    registered one; an unknown name lists both."""
    from crucible.potentials.custom import custom_potential_spec

    custom = custom or {}
    if name in custom:
        return custom_potential_spec(name, custom[name])
    if name not in REGISTRY:
        raise REGISTRY.unknown(name, sorted(custom))
    return REGISTRY[name]


def load_potential(
    name: str, device: str | None = None, threads: int | None = None, custom: Mapping[str, Any] | None = None
) -> Potential:
    """The potential registered as ``name`` (or a user's, given in ``custom``: config
    ``potentials:``) on ``device`` (default: CUDA if present).

    Torch is configured first (deterministic kernels; ``threads`` CPU threads when given), so
    that no job runs a potential with run-to-run different forces; in a ``crucible`` command's
    process a registered neural potential also flushes subnormal floats
    (:func:`crucible.core.torch_setup.configure_torch`).
    """
    from crucible.core import torch_setup

    spec = potential_spec(name, custom)
    torch_setup.configure_torch(threads, flush_denormal=spec.kind != "custom" and spec.device != "cpu")
    # a cpu potential (emt, a user's with device: cpu) asks no GPU of its rules, and uses none
    dev = "cpu" if spec.device == "cpu" else resolve_device(device)
    calc = spec.build(dev)
    potential = Potential(
        name=name,
        device=dev,
        calculator=calc,
        batched=spec.batched(calc) if spec.batched else None,
        elements=frozenset(spec.elements(calc)) if spec.elements else None,
        provenance=provenance(spec, calc, dev),
    )
    log.info("loaded potential %s on %s: %s", name, dev, provenance_text(potential.provenance))
    return potential


def get_calculator(name: str, device: str | None = None):
    """The bare ASE calculator registered as ``name`` (see :func:`load_potential`)."""
    return load_potential(name, device).calculator
