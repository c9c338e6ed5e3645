"""A user's own interatomic potential, given in the config instead of registered in crucible::

    potentials:
      my-potential: {class: "mypkg.potentials:make_calculator", params: {cutoff: 5.0}, elements: [Cu, Ni]}
    mlip:
      models: [emt, my-potential]

``class`` names a factory (a function or a class) that, called as ``factory(device=..., **params)``
with ``device`` ``"cpu"`` or ``"cuda"``, returns an ASE calculator. The module may be installed or
sit beside the project (the workflow puts the working directory on the Python path, as for
Matbench's custom models). Such a potential is a :class:`~crucible.potentials.spec.PotentialSpec`
of kind ``"custom"``: EOS, s2ef, catalysis and crystal ``mlip-search`` load it with
:func:`~crucible.potentials.registry.load_potential` like a registered one (same device choice,
torch determinism), and its class path, params and package version are recorded with every
result (:func:`~crucible.potentials.provenance.provenance`). ``elements``, when given, is the set
the potential has parameters for, as the registered ones declare theirs: the EOS benchmark reports
any other element as not modelled (not run), not as a failure. ``device`` (default ``gpu``, as the
registered networks) is what its rules ask for: ``cpu`` runs its jobs without a GPU request.

The entries come from the top-level ``potentials:`` section, or for one more release from the
deprecated ``mlip.custom_potentials`` (:func:`crucible.potentials.workflow.custom_potentials`).
The messages here name the key of the entry (``key``: ``potentials.<name>`` unless told).
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Mapping

from crucible.core.errors import ConfigError
from crucible.dag.config import put_on_python_path
from crucible.potentials.spec import PotentialSpec

CONFIG_KEY = "potentials"  # the section of users' potentials (before: mlip.custom_potentials)


def _where(name: str, field: str = "", key: str | None = None) -> str:
    return f"config {key or f'{CONFIG_KEY}.{name}'}{'.' + field if field else ''}"


def import_factory(name: str, entry: Mapping[str, Any], key: str | None = None) -> Any:
    """The callable that ``entry["class"]`` (``"package.module:attribute"``) names; a
    :class:`ConfigError` naming the config key when it cannot be imported or is not callable."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get("class"), str):
        raise ConfigError(f"{_where(name, key=key)}: needs 'class': \"package.module:factory\"")
    path = entry["class"]
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f'{_where(name, "class", key)}: {path!r} is not "package.module:factory"')
    # A module beside the project imports from the working directory, as in the workflow's jobs
    # (crucible.dag.config.put_on_python_path), also when the command is run by hand.
    put_on_python_path(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"{_where(name, 'class', key)}: cannot import module {module_name!r} of {path!r}: {exc}"
        ) from None
    factory = module
    for part in attr.split("."):
        factory = getattr(factory, part, None)
        if factory is None:
            raise ConfigError(f"{_where(name, 'class', key)}: module {module_name!r} has no {attr!r} (from {path!r})")
    if not callable(factory):
        raise ConfigError(f"{_where(name, 'class', key)}: {path!r} is not callable")
    params = entry.get("params") or {}
    if not isinstance(params, Mapping):
        raise ConfigError(f"{_where(name, 'params', key)}: a mapping of keyword arguments, not {type(params).__name__}")
    return factory


def declared_elements(name: str, entry: Mapping[str, Any], key: str | None = None) -> frozenset[str] | None:
    """The ``elements`` an entry says its potential models (None: not said); a
    :class:`ConfigError` naming the key for a symbol that is not an element."""
    from ase.data import chemical_symbols

    elements = entry.get("elements")
    if elements is None:
        return None
    if isinstance(elements, str) or not isinstance(elements, (list, tuple)) or not elements:
        raise ConfigError(f"{_where(name, 'elements', key)}: a non-empty list of element symbols, not {elements!r}")
    unknown = [e for e in elements if not isinstance(e, str) or e not in chemical_symbols[1:]]
    if unknown:
        raise ConfigError(f"{_where(name, 'elements', key)}: {unknown} are not element symbols")
    return frozenset(elements)


def _is_ase_calculator(calc: Any) -> bool:
    from ase.calculators.calculator import BaseCalculator

    return isinstance(calc, BaseCalculator) or all(
        callable(getattr(calc, m, None)) for m in ("get_potential_energy", "get_forces")
    )


def custom_potential_spec(name: str, entry: Mapping[str, Any], key: str | None = None) -> PotentialSpec:
    """The :class:`~crucible.potentials.spec.PotentialSpec` of a user's potential."""
    factory = import_factory(name, entry, key)
    params = dict(entry.get("params") or {})
    modelled = declared_elements(name, entry, key)

    def build(device: str):
        try:
            calc = factory(device=device, **params)
        except TypeError as exc:
            raise ConfigError(
                f"{_where(name, key=key)}: {entry['class']}(device={device!r}, **params) failed: {exc} "
                "(the factory takes the keyword 'device' and the configured params)"
            ) from None
        if not _is_ase_calculator(calc):
            raise ConfigError(
                f"{_where(name, 'class', key)}: {entry['class']} returned {type(calc).__name__}, not an ASE calculator"
            )
        return calc

    return PotentialSpec(
        name=name,
        kind="custom",
        factory=build,
        description=f"user potential {entry['class']}",
        class_path=entry["class"],
        params=params,
        # unless it says cpu, like the registered networks: its rules ask for a GPU (it still runs on a CPU)
        device=device_of(entry),
        elements=(lambda _calc: sorted(modelled)) if modelled else None,
    )


def device_of(entry: Mapping[str, Any]) -> str:
    """Where a user's potential runs, and so what its rules ask for: ``entry["device"]``, "gpu" unless said."""
    return entry.get("device") or "gpu"


def check_custom_potentials(
    custom: Mapping[str, Mapping[str, Any]], registered: list[str], keys: Mapping[str, str] | None = None
) -> None:
    """Start-up check: every entry's factory imports, and no name shadows a registered potential;
    ``keys``: the config key of each entry, for the messages."""
    for name in sorted(custom):
        key = (keys or {}).get(name)
        if name in registered:
            raise ConfigError(f"{_where(name, key=key)}: {name!r} is a registered potential; give yours another name")
        factory = import_factory(name, custom[name], key)
        check_params_taken(name, custom[name], factory, key)
        declared_elements(name, custom[name], key)


def check_params_taken(name: str, entry: Mapping[str, Any], factory: Any, key: str | None = None) -> None:
    """The entry's ``params`` and the keyword ``device`` against the factory's signature, at
    start-up: a typo (``cutofff``) otherwise passed planning and stopped every job of the
    potential with a TypeError. A factory taking ``**kwargs``, or whose signature Python cannot
    read, takes anything."""
    import inspect

    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return
    kinds = {p.name: p.kind for p in signature.parameters.values()}
    if inspect.Parameter.VAR_KEYWORD in kinds.values():
        return
    keywords = [
        n
        for n, kind in kinds.items()
        if kind not in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL)
    ]
    if "device" not in keywords:
        raise ConfigError(
            f"{_where(name, 'class', key)}: {entry['class']} takes no keyword 'device'; crucible calls it as "
            f"factory(device=..., **params) (it takes: {', '.join(keywords) or 'nothing'})"
        )
    accepted = [n for n in keywords if n != "device"]
    for param in sorted(entry.get("params") or {}):
        if param == "device":
            raise ConfigError(
                f"{_where(name, 'params.device', key)}: crucible passes device itself (say where it runs with "
                f"{_where(name, 'device', key).removeprefix('config ')}: cpu or gpu)"
            )
        if param not in accepted:
            raise ConfigError(
                f"{_where(name, 'params.' + param, key)}: {entry['class']} takes no parameter {param!r}; "
                f"it takes: {', '.join(accepted) or 'none'}"
            )
