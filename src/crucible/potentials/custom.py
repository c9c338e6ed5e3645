"""A user's own interatomic potential, given in the config instead of registered in crucible::

    mlip:
      custom_potentials:
        my-potential: {class: "mypkg.potentials:make_calculator", params: {cutoff: 5.0}, elements: [Cu, Ni]}
      models: [emt, my-potential]

``class`` names a factory (a function or a class) that, called as ``factory(device=..., **params)``
with ``device`` ``"cpu"`` or ``"cuda"``, returns an ASE calculator. The module may be installed or
sit beside the project (the workflow puts the working directory on the Python path, as for
Matbench's custom models). Such a potential is a :class:`~crucible.mlip.calculators.PotentialSpec`
of kind ``"custom"``: EOS, s2ef, catalysis and crystal ``mlip-search`` load it with
:func:`~crucible.mlip.calculators.load_potential` like a registered one (same device choice, torch
determinism, GPU rules), and its class path, params and package version are recorded with every
result (:func:`~crucible.mlip.calculators.provenance`). ``elements``, when given, is the set the
potential has parameters for, as the registered ones declare theirs: the EOS benchmark reports any
other element as not modelled (not run), not as a failure.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Mapping

from crucible.config import put_on_python_path
from crucible.errors import ConfigError

CONFIG_KEY = "mlip.custom_potentials"


def _where(name: str, field: str = "") -> str:
    return f"config {CONFIG_KEY}.{name}{'.' + field if field else ''}"


def import_factory(name: str, entry: Mapping[str, Any]) -> Any:
    """The callable that ``entry["class"]`` (``"package.module:attribute"``) names; a
    :class:`ConfigError` naming the config key when it cannot be imported or is not callable."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get("class"), str):
        raise ConfigError(f"{_where(name)}: needs 'class': \"package.module:factory\"")
    path = entry["class"]
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f'{_where(name, "class")}: {path!r} is not "package.module:factory"')
    # A module beside the project imports from the working directory, as in the workflow's jobs
    # (crucible.config.put_on_python_path), also when the command is run by hand.
    put_on_python_path(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{_where(name, 'class')}: cannot import module {module_name!r} of {path!r}: {exc}") from None
    factory = module
    for part in attr.split("."):
        factory = getattr(factory, part, None)
        if factory is None:
            raise ConfigError(f"{_where(name, 'class')}: module {module_name!r} has no {attr!r} (from {path!r})")
    if not callable(factory):
        raise ConfigError(f"{_where(name, 'class')}: {path!r} is not callable")
    params = entry.get("params") or {}
    if not isinstance(params, Mapping):
        raise ConfigError(f"{_where(name, 'params')}: a mapping of keyword arguments, not {type(params).__name__}")
    return factory


def declared_elements(name: str, entry: Mapping[str, Any]) -> frozenset[str] | None:
    """The ``elements`` an entry says its potential models (None: not said); a
    :class:`ConfigError` naming the key for a symbol that is not an element."""
    from ase.data import chemical_symbols

    elements = entry.get("elements")
    if elements is None:
        return None
    if isinstance(elements, str) or not isinstance(elements, (list, tuple)) or not elements:
        raise ConfigError(f"{_where(name, 'elements')}: a non-empty list of element symbols, not {elements!r}")
    unknown = [e for e in elements if not isinstance(e, str) or e not in chemical_symbols[1:]]
    if unknown:
        raise ConfigError(f"{_where(name, 'elements')}: {unknown} are not element symbols")
    return frozenset(elements)


def _is_ase_calculator(calc: Any) -> bool:
    from ase.calculators.calculator import BaseCalculator

    return isinstance(calc, BaseCalculator) or all(
        callable(getattr(calc, m, None)) for m in ("get_potential_energy", "get_forces")
    )


def custom_potential_spec(name: str, entry: Mapping[str, Any]):
    """The :class:`~crucible.mlip.calculators.PotentialSpec` of a user's potential."""
    from crucible.mlip.calculators import PotentialSpec

    factory = import_factory(name, entry)
    params = dict(entry.get("params") or {})
    modelled = declared_elements(name, entry)

    def build(device: str):
        try:
            calc = factory(device=device, **params)
        except TypeError as exc:
            raise ConfigError(
                f"{_where(name)}: {entry['class']}(device={device!r}, **params) failed: {exc} "
                "(the factory takes the keyword 'device' and the configured params)"
            ) from None
        if not _is_ase_calculator(calc):
            raise ConfigError(
                f"{_where(name, 'class')}: {entry['class']} returned {type(calc).__name__}, not an ASE calculator"
            )
        return calc

    return PotentialSpec(
        name=name,
        kind="custom",
        factory=build,
        description=f"user potential {entry['class']}",
        class_path=entry["class"],
        params=params,
        # like the registered networks: its rules ask for a GPU (it still runs on a CPU)
        device="gpu",
        elements=(lambda _calc: sorted(modelled)) if modelled else None,
    )


def check_custom_potentials(custom: Mapping[str, Mapping[str, Any]], registered: list[str]) -> None:
    """Start-up check: every entry's factory imports, and no name shadows a registered potential."""
    for name in sorted(custom):
        if name in registered:
            raise ConfigError(f"{_where(name)}: {name!r} is a registered potential; give yours another name")
        import_factory(name, custom[name])
        declared_elements(name, custom[name])
