"""One registry shape for everything crucible runs by name: Matbench models, interatomic
potentials, crystal generators, reaction baselines.

A :class:`Registry` maps a name to a :class:`Spec`: how to build the thing (``factory``, called
by ``spec.build(...)``), what it reads (``inputs``), where its jobs run (``device``: ``"gpu"``
sends its rule to the GPU rule and partition; it still runs on a CPU) and what one job covers
(``granularity()``). Each family subclasses :class:`Spec` with its own fields and its own
``build`` signature; the lookup, the listing and the error for an unknown name are shared.

An unknown name raises :class:`UnknownNameError`, a :class:`~crucible.core.errors.ConfigError` that
lists the known names (it is also a ``KeyError``, so ``registry.get(name)`` and ``name in
registry`` behave as for a dict). Entries may be *lazy*: registered by the module that defines
them, imported only when that name is asked for, so that a job using one cheap model does not
pay for importing torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

from crucible.core.errors import ConfigError

DEVICES = ("cpu", "gpu")


class UnknownNameError(ConfigError, KeyError):
    """A name that the registry does not know; the message lists the ones it does."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0]) if self.args else ""


def _check_keywords(name: str, factory: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    """A keyword ``factory`` does not take is a ConfigError naming it and those it takes (a crystal
    generator's ``--params '{"bogus": 1}'`` was a bare TypeError)."""
    import inspect

    try:
        params = inspect.signature(factory).parameters if kwargs else {}
    except (TypeError, ValueError):  # a callable without a readable signature: the call itself will tell
        return
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    unknown = sorted(set(kwargs) - set(params))
    if unknown:
        raise ConfigError(f"{name}: unknown parameter(s) {', '.join(unknown)}; it takes {', '.join(params)}")


@dataclass(frozen=True, kw_only=True)
class Spec:
    """A registered thing: its name, how to build it, what it reads, where and how it runs."""

    name: str
    factory: Callable[..., Any]
    description: str = ""
    inputs: tuple[str, ...] = ()
    device: str = "cpu"  # "gpu": the rule asks for a GPU (the GPU partition on SLURM)
    job_unit: str = "dataset"  # what one job covers (e.g. "fold", "chunk", "dataset")

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ValueError(f"{self.name!r}: device must be one of {', '.join(DEVICES)}, not {self.device!r}")

    def build(self, *args: Any, **kwargs: Any) -> Any:
        _check_keywords(self.name, self.factory, kwargs)
        return self.factory(*args, **kwargs)

    def granularity(self, size: float | None = None) -> str:
        """What one job covers on an input of ``size`` (rows, items); fixed unless a family says otherwise."""
        return self.job_unit


S = TypeVar("S", bound=Spec)


class Registry(Mapping[str, S], Generic[S]):
    """Name -> spec, sorted by name. ``kind`` names the things in messages ("model", ...).

    ``lazy`` maps names to the module that registers them on import. A read-only mapping:
    ``registry[name]``, ``name in registry``, ``sorted(registry)``, ``registry.items()``
    (which imports every lazy module); :meth:`register` adds an entry.
    """

    def __init__(self, kind: str, specs: tuple[S, ...] | list[S] = (), lazy: Mapping[str, str] | None = None):
        self.kind = kind
        self._specs: dict[str, S] = {}
        self._lazy = dict(lazy or {})
        for spec in specs:
            self.register(spec)

    def register(self, spec: S) -> S:
        if spec.name in self._specs and self._specs[spec.name] is not spec:
            raise ValueError(f"{self.kind} {spec.name!r} is registered twice")
        self._specs[spec.name] = spec
        return spec

    def names(self) -> list[str]:
        """Every known name, sorted, without importing lazy entries."""
        return sorted(set(self._specs) | set(self._lazy))

    def unknown(self, name: str, extra: list[str] | tuple[str, ...] = ()) -> UnknownNameError:
        """The error for ``name``: it lists the registry's names (and ``extra`` ones, e.g. user entries)."""
        known = ", ".join(sorted(set(self.names()) | set(extra)))
        return UnknownNameError(f"unknown {self.kind} {name!r}; known {self.kind}s: {known}")

    def __getitem__(self, name: str) -> S:
        if name not in self._specs and name in self._lazy:
            importlib.import_module(self._lazy[name])
            if name not in self._specs:
                raise ConfigError(f"{self.kind} {name!r}: module {self._lazy[name]} did not register it")
        try:
            return self._specs[name]
        except (KeyError, TypeError):
            raise self.unknown(name) from None

    def __contains__(self, name: object) -> bool:
        return name in self._specs or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"
