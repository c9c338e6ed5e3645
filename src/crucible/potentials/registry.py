"""Interatomic potentials as ASE calculators, registered by name.

``get_calculator(name, device=None)`` returns a ready ASE ``Calculator``. Two kinds of entry:

* shipped: the weights are files inside an installed PyPI package (``chgnet-0.3.0``,
  ``sevennet-0``) or need none (``emt``). These always load offline.
* hub: the upstream loader normally downloads weights (MACE-MP, MatGL, ORB, UMA). We never
  download at run time: these load only from a local file (``$CRUCIBLE_MLIP_WEIGHTS/<name>/``
  or the upstream package's own cache folder) and otherwise raise
  :class:`WeightsUnavailableError` saying where the file was looked for.

``load_potential(name, device=None, threads=None, custom=None)`` is the one way a job gets a
potential: it first calls :func:`crucible.torch_setup.configure_torch` (deterministic kernels, the
job's CPU threads), then wraps the calculator in a :class:`Potential`, a small record of what
actually ran (name, device, and its provenance: calculator class, parameters, package and
version) beside the calculator; nothing is patched onto the third-party calculator object. The
registry is a :class:`crucible.registry.Registry` of :class:`PotentialSpec`; a user's own
potentials (config ``mlip.custom_potentials``, passed as ``custom``) are specs of the same kind
built by :mod:`crucible.mlip.custom` and load exactly like the registered ones.

A non-finite energy or force is never passed on as a number: :func:`single_energy` and
:func:`single_point` raise :class:`NonFiniteError` (its message says which quantity), and
:mod:`crucible.mlip.relax` stops a relaxation with a failure status.

Models that offer a batched forward pass also give
``Potential.batch_energies(list_of_atoms) -> list[float]`` (total energies, eV); on CUDA this is
what makes a GPU worth having. :func:`evaluate_energies` uses it and falls back to one structure
at a time when a batch fails, so that one bad structure is pinned down instead of sinking the
batch.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from crucible.errors import ConfigError, CrucibleError
from crucible.registry import Registry, Spec

log = logging.getLogger(__name__)

WEIGHTS_ENV = "CRUCIBLE_MLIP_WEIGHTS"


class WeightsUnavailableError(ConfigError):
    """A registered potential whose weights are not on this machine (and we do not download)."""


class NonFiniteError(CrucibleError):
    """A potential returned a NaN or infinite energy, force or stress."""


def non_finite_reason(energy: float, forces=None, stress=None) -> str | None:
    """Why a prediction is unusable (``"non-finite energy (nan)"``, ...), or None when it is finite."""
    if not math.isfinite(energy):
        return f"non-finite energy ({energy})"
    for name, values in (("forces", forces), ("stress", stress)):
        if values is not None:
            bad = ~np.isfinite(np.asarray(values, dtype=float))
            if bad.any():
                return f"non-finite {name} ({int(bad.sum())} of {bad.size} components)"
    return None


@dataclass(frozen=True, kw_only=True)
class PotentialSpec(Spec):
    """A registered potential: ``factory(device)`` -> ASE calculator, and its batched path if it has one."""

    kind: str  # "builtin" | "shipped" | "hub" | "custom"
    # a user's potential (mlip.custom_potentials): its "pkg.mod:factory" and params, as configured
    class_path: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    # batch(calculator) -> (list of atoms -> total energies in eV)
    batch: Callable[[object], Callable[[list], list[float]]] | None = None
    inputs: tuple[str, ...] = ("structure",)
    # one job runs one potential over one input set: the Delta set (EOS), a frames file (s2ef),
    # a chunk of reactions (catalysis), a generator's items (crystal mlip-search)
    job_unit: str = "dataset"
    # elements(calculator) -> the element symbols the loaded model has parameters for; None when
    # the model does not say (every element is then tried, and an error there counts as a failure)
    elements: Callable[[object], Sequence[str]] | None = None


@dataclass(frozen=True)
class Potential:
    """A loaded potential: the ASE calculator and what ran it."""

    name: str
    device: str
    calculator: object
    batch_energies: Callable[[list], list[float]] | None = None
    # the element symbols the model has parameters for; None when it does not say
    elements: frozenset[str] | None = field(default=None, compare=False)
    # what ran (:func:`provenance`): recorded beside every result the potential produced
    provenance: Mapping[str, Any] = field(default_factory=dict, compare=False)


def as_potential(calc: object) -> Potential:
    """A :class:`Potential` as is; a bare ASE calculator wrapped (named after its class, CPU)."""
    if isinstance(calc, Potential):
        return calc
    return Potential(name=type(calc).__name__, device="cpu", calculator=calc)


def resolve_device(device: str | None = None) -> str:
    """``device`` if given, else ``"cuda"`` when torch sees a GPU, else ``"cpu"``."""
    if device:
        return device
    try:
        import torch
    except ImportError:  # emt needs no torch
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


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
    from chgnet.model import CHGNet
    from chgnet.model.dynamics import CHGNetCalculator

    # CHGNet.load(model_name=...) reads chgnet/pretrained/0.3.0/*.pth.tar from the wheel.
    model = CHGNet.load(model_name="0.3.0", use_device=device, verbose=False)
    return CHGNetCalculator(model=model, use_device=device)


def _chgnet_batch(calc):
    model = calc.model

    def batch_energies(atoms_list):
        from pymatgen.io.ase import AseAtomsAdaptor

        structures = [AseAtomsAdaptor.get_structure(a) for a in atoms_list]
        preds = model.predict_structure(structures, task="e", batch_size=16)
        if isinstance(preds, dict):
            preds = [preds]
        # CHGNet predicts energy per atom.
        return [float(p["e"]) * len(a) for p, a in zip(preds, atoms_list)]

    return batch_energies


def _sevennet_checkpoint() -> Path:
    import sevenn

    path = (
        Path(sevenn.__file__).parent / "pretrained_potentials" / "SevenNet_0__11Jul2024" / "checkpoint_sevennet_0.pth"
    )
    if not path.is_file():
        raise WeightsUnavailableError(f"model 'sevennet-0': {path} missing from the installed sevenn package")
    return path


def _sevennet_elements(calc) -> list[str]:
    from ase.data import chemical_symbols

    return sorted(chemical_symbols[int(z)] for z in calc.type_map)  # keys: atomic numbers


def _load_sevennet_0(device: str):
    import warnings

    from sevenn.calculator import SevenNetCalculator

    # An explicit path, not the name "7net-0": the name lookup may fall back to a download.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SevenNetCalculator(model=str(_sevennet_checkpoint()), device=device)


def _offline_hub():
    # Belt and braces: even if a loader reaches for a hub, it must not touch the network.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _load_mace_mp(device: str):
    _offline_hub()
    path = _find_local("mace-mp", ["*.model"], [Path.home() / ".cache" / "mace"])
    calcs = _import_or_unavailable("mace-mp", "mace.calculators")
    return calcs.MACECalculator(model_paths=str(path), device=device, default_dtype="float64")


def _load_matgl(device: str):
    _offline_hub()
    path = _find_local("matgl", ["*PES*", "M3GNet*", "CHGNet*", "TensorNet*"], [Path.home() / ".cache" / "matgl"])
    matgl = _import_or_unavailable("matgl", "matgl")
    ext = _import_or_unavailable("matgl", "matgl.ext.ase")
    potential = matgl.load_model(str(path))
    calc_cls = getattr(ext, "PESCalculator", None) or ext.M3GNetCalculator
    return calc_cls(potential)


def _load_orb(device: str):
    _offline_hub()
    path = _find_local("orb", ["*.ckpt", "*.pt"], [Path.home() / ".cache" / "orb"])
    pretrained = _import_or_unavailable("orb", "orb_models.forcefield.pretrained")
    calculator = _import_or_unavailable("orb", "orb_models.forcefield.calculator")
    # The architecture must match the checkpoint; orb-v3 conservative (OMat) is the default.
    build = getattr(pretrained, "orb_v3_conservative_inf_omat", None) or pretrained.orb_v2
    model = build(weights_path=str(path), device=device)
    return calculator.ORBCalculator(model, device=device)


def _load_uma(device: str):
    _offline_hub()
    path = _find_local("uma", ["uma*.pt", "*.pt"])
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
            batch=_chgnet_batch,
            device="gpu",
        ),
        PotentialSpec(
            name="sevennet-0",
            kind="shipped",
            description="SevenNet-0 (11Jul2024), weights inside the sevenn wheel",
            factory=_load_sevennet_0,
            elements=_sevennet_elements,
            device="gpu",
        ),
        PotentialSpec(
            name="mace-mp",
            kind="hub",
            description="MACE-MP foundation model (local *.model file only)",
            factory=_load_mace_mp,
            device="gpu",
        ),
        PotentialSpec(
            name="matgl",
            kind="hub",
            description="MatGL potential (local model folder only)",
            factory=_load_matgl,
            device="gpu",
        ),
        PotentialSpec(
            name="orb", kind="hub", description="ORB potential (local checkpoint only)", factory=_load_orb, device="gpu"
        ),
        PotentialSpec(
            name="uma",
            kind="hub",
            description="FAIRChem UMA, omat task (local checkpoint only)",
            factory=_load_uma,
            device="gpu",
        ),
    ],
)


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
    """The spec of ``name``: a user's potential of ``custom`` (config ``mlip.custom_potentials``)
    or a registered one; an unknown name lists both."""
    from crucible.mlip.custom import custom_potential_spec

    custom = custom or {}
    if name in custom:
        return custom_potential_spec(name, custom[name])
    if name not in REGISTRY:
        raise REGISTRY.unknown(name, sorted(custom))
    return REGISTRY[name]


def _distribution(module: str) -> tuple[str | None, str | None]:
    """(distribution, version) that installed the top-level package of ``module``, if any."""
    import importlib.metadata

    top = module.partition(".")[0]
    names = importlib.metadata.packages_distributions().get(top) or []
    for dist in sorted(names):
        try:
            return dist, importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None, None


def provenance(spec: PotentialSpec, calc: object, device: str) -> dict[str, Any]:
    """What ran: the potential's name and kind, the class path (a custom potential's factory as
    configured, else the calculator's class), its params, the package that provides it and that
    package's version. A module that no installed distribution provides (one beside the project)
    is identified by its ``__version__`` if it has one. A custom potential is also identified by
    the SHA-256 of every file of its top-level package (``code_sha256``: editing any module of it
    changes it, not only the one the class names) and of every file or folder a param names
    (``files_sha256``: a checkpoint its factory loads), see :mod:`crucible.fingerprint`."""
    import sys

    from crucible.fingerprint import checkpoint_sha256, package_sha256

    if spec.class_path:
        class_path, module = spec.class_path, spec.class_path.partition(":")[0]
    else:
        cls = type(calc)
        class_path, module = f"{cls.__module__}:{cls.__qualname__}", cls.__module__
    package, version = _distribution(module)
    out: dict[str, Any] = {
        "potential": spec.name,
        "kind": spec.kind,
        "class": class_path,
        "params": dict(spec.params),
        "package": package,
        "version": version,
        "device": device,
    }
    if package is None:
        mod = sys.modules.get(module)
        out["version"] = str(getattr(mod, "__version__", "")) or None
    if spec.kind == "custom":
        code = package_sha256(module)
        if code:
            out["code_sha256"] = code
        files = {
            key: checkpoint_sha256(value)
            for key, value in sorted(spec.params.items())
            if isinstance(value, str) and value and Path(value).exists()
        }
        if files:
            out["files_sha256"] = files
    return out


def provenance_text(prov: Mapping[str, Any]) -> str:
    """One line for a table cell: ``class {params} (package version)``; "" when unknown."""
    import json

    if not prov:
        return ""
    text = str(prov["class"])
    if prov.get("params"):
        text += " " + json.dumps(prov["params"], sort_keys=True)
    if prov.get("package"):
        text += f" ({prov['package']} {prov.get('version')})"
    elif prov.get("version") or prov.get("code_sha256"):
        where = f"version {prov['version']}" if prov.get("version") else "local module"
        sha = prov.get("code_sha256")
        text += f" ({where}{', sha256 ' + sha[:12] if sha else ''})"
    return text


PROVENANCE_KEY = "potential"  # the parquet metadata key of a result table's potential


def provenance_metadata(potential: object) -> dict[str, Any]:
    """The metadata :func:`crucible.io.write_parquet` stores with a potential's result table."""
    prov = getattr(potential, "provenance", None)
    return {PROVENANCE_KEY: dict(prov)} if prov else {}


def read_provenance(path: str | os.PathLike) -> dict[str, Any]:
    """The provenance stored with a result table (empty for a file written without one)."""
    from crucible.io import read_parquet_metadata

    return dict(read_parquet_metadata(path).get(PROVENANCE_KEY) or {})


def load_potential(
    name: str, device: str | None = None, threads: int | None = None, custom: Mapping[str, Any] | None = None
) -> Potential:
    """The potential registered as ``name`` (or a user's, given in ``custom``: config
    ``mlip.custom_potentials``) on ``device`` (default: CUDA if present).

    Torch is configured first (deterministic kernels; ``threads`` CPU threads when given), so
    that no job runs a potential with run-to-run different forces.
    """
    from crucible import torch_setup

    spec = potential_spec(name, custom)
    torch_setup.configure_torch(threads)
    dev = "cpu" if spec.kind == "builtin" else resolve_device(device)
    calc = spec.build(dev)
    potential = Potential(
        name=name,
        device=dev,
        calculator=calc,
        batch_energies=spec.batch(calc) if spec.batch else None,
        elements=frozenset(spec.elements(calc)) if spec.elements else None,
        provenance=provenance(spec, calc, dev),
    )
    log.info("loaded potential %s on %s: %s", name, dev, provenance_text(potential.provenance))
    return potential


def get_calculator(name: str, device: str | None = None):
    """The bare ASE calculator registered as ``name`` (see :func:`load_potential`)."""
    return load_potential(name, device).calculator


def _error_reason(exc: BaseException) -> str:
    text = str(exc).strip().replace("\n", " ")
    if len(text) > 300:
        text = text[:300] + "..."
    return f"{type(exc).__name__}: {text}"


def single_energy(calc, atoms) -> float:
    """Total energy (eV) of ``atoms`` with ``calc`` (a ``Potential`` or a bare ASE calculator);
    raises whatever the calculator raises, and :class:`NonFiniteError` for a NaN/inf energy."""
    atoms = atoms.copy()
    atoms.calc = as_potential(calc).calculator  # some calculators (SevenNet) reject unknown elements right here
    energy = float(atoms.get_potential_energy())
    reason = non_finite_reason(energy)
    if reason:
        raise NonFiniteError(reason)
    return energy


def single_point(calc, atoms) -> tuple[float, np.ndarray]:
    """Total energy (eV) and forces (eV/Å) of ``atoms``; raises like :func:`single_energy`, also
    for non-finite forces. Forces of a shape other than (natoms, 3) are returned as they are."""
    atoms = atoms.copy()
    atoms.calc = as_potential(calc).calculator
    energy = float(atoms.get_potential_energy())
    forces = np.asarray(atoms.get_forces(), dtype=float)
    reason = non_finite_reason(energy, forces if forces.shape == (len(atoms), 3) else None)
    if reason:
        raise NonFiniteError(reason)
    return energy, forces


def evaluate_energies(potential, atoms_list: Sequence) -> list[tuple[float, str | None]]:
    """``(energy_eV, None)`` or ``(nan, reason)`` for each structure, in order.

    Uses the calculator's batched path when it has one; if the batch raises or returns a
    non-finite value, every structure is redone alone so each failure gets its own reason.
    """
    potential = as_potential(potential)
    calc, batch = potential.calculator, potential.batch_energies
    if batch is not None and len(atoms_list) > 1:
        try:
            energies = batch(list(atoms_list))
            if len(energies) == len(atoms_list) and all(math.isfinite(e) for e in energies):
                return [(float(e), None) for e in energies]
        except Exception as exc:  # pinpointed below, structure by structure
            log.debug("batched evaluation failed (%s); retrying one by one", _error_reason(exc))
    out: list[tuple[float, str | None]] = []
    for atoms in atoms_list:
        try:
            out.append((single_energy(calc, atoms), None))
        except NonFiniteError as exc:
            out.append((math.nan, str(exc)))
        except Exception as exc:
            out.append((math.nan, _error_reason(exc)))
    return out
