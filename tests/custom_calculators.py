"""Users' own interatomic potentials, as a user would write them beside the project, for the
``mlip.custom_potentials`` tests (``class: "custom_calculators:scaled_emt"``). Not a test module:
the tests import it by its class path, and the DAG tests copy it into the working directory.

* ``scaled_emt(device, scale=1.0)``: ASE's EMT with energy, forces and stress multiplied by
  ``scale`` (1.0 gives EMT's numbers exactly; another scale, numbers no registered potential
  gives), remembering the ``device`` it was built for;
* ``nan_potential(device, what="energy", element=None)``: EMT's forces, NaN energy (and NaN
  forces with ``what="energy+forces"``), on every structure or only on those containing
  ``element``: a broken potential;
* ``typed_potential(device, energy=None, as_type="value")``: EMT's forces and an energy of the
  given value verbatim (``"1.0"``, ``[1.0]``, ``None``, ``True``: no number), or EMT's own energy
  as a numpy or torch scalar (``as_type="numpy"``, ``"torch"``);
* ``huge_potential(device, value=1e17, element=None)``: EMT, but an energy of ``value`` eV and
  every force component ``value`` eV/Å on every structure (or those containing ``element``):
  finite numbers no physics gives;
* ``not_a_calculator(device)``: a factory that returns something else.
"""

from __future__ import annotations

import numpy as np
from ase.calculators.calculator import Calculator, all_changes
from ase.calculators.emt import EMT

__version__ = "0.0.test"


class ScaledEMT(Calculator):
    implemented_properties = ["energy", "free_energy", "forces", "stress"]

    def __init__(self, scale: float = 1.0, device: str = "cpu"):
        super().__init__()
        self.scale, self.device = float(scale), device
        self._emt = EMT()

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        wanted = ["energy", "forces"] + (["stress"] if "stress" in properties else [])
        # EMT sees the changes ASE saw, so that it updates its neighbour list as it would alone
        self._emt.calculate(self.atoms, wanted, system_changes)
        results = self._emt.results
        self.results = {"energy": float(results["energy"]) * self.scale, "forces": results["forces"] * self.scale}
        self.results["free_energy"] = self.results["energy"]
        if "stress" in results:
            self.results["stress"] = results["stress"] * self.scale


def scaled_emt(device: str, scale: float = 1.0) -> ScaledEMT:
    return ScaledEMT(scale, device)


class _EMTWithBadElement(Calculator):
    """EMT, with ``bad_values`` replacing energy and forces wherever ``element`` is in the structure
    (every structure when it is None): the broken user potentials below."""

    implemented_properties = ["energy", "free_energy", "forces"]

    def __init__(self, element: str | None = None):
        super().__init__()
        self.element = element
        self._emt = EMT()

    def bad_values(self, energy: float, forces: np.ndarray) -> tuple[float, np.ndarray]:
        raise NotImplementedError

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        self._emt.calculate(self.atoms, ["energy", "forces"], system_changes)
        energy = float(self._emt.results["energy"])
        forces = np.array(self._emt.results["forces"], copy=True)
        if self.element is None or self.element in self.atoms.get_chemical_symbols():
            energy, forces = self.bad_values(energy, forces)
        self.results = {"energy": energy, "free_energy": energy, "forces": forces}


class NaNPotential(_EMTWithBadElement):
    def __init__(self, what: str = "energy", element: str | None = None):
        super().__init__(element)
        self.what = what

    def bad_values(self, energy, forces):
        if "forces" in self.what:
            forces[:] = np.nan
        return float("nan"), forces


def nan_potential(device: str, what: str = "energy", element: str | None = None) -> NaNPotential:
    return NaNPotential(what, element)


class TypedPotential(Calculator):
    implemented_properties = ["energy", "free_energy", "forces"]

    def __init__(self, energy=None, as_type: str = "value"):
        super().__init__()
        self.energy, self.as_type = energy, as_type
        self._emt = EMT()

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        self._emt.calculate(self.atoms, ["energy", "forces"], system_changes)
        energy = self._emt.results["energy"]
        if self.as_type == "numpy":
            energy = np.float32(energy)
        elif self.as_type == "torch":
            import torch

            energy = torch.tensor(float(energy), dtype=torch.float64)
        elif self.as_type == "value":
            energy = self.energy
        self.results = {"energy": energy, "free_energy": energy, "forces": np.array(self._emt.results["forces"])}


def typed_potential(device: str, energy=None, as_type: str = "value") -> TypedPotential:
    return TypedPotential(energy, as_type)


class HugePotential(_EMTWithBadElement):
    def __init__(self, value: float = 1e17, element: str | None = None):
        super().__init__(element)
        self.value = float(value)

    def bad_values(self, energy, forces):
        forces[:] = self.value
        return self.value, forces


def huge_potential(device: str, value: float = 1e17, element: str | None = None) -> HugePotential:
    return HugePotential(value, element)


def not_a_calculator(device: str):
    return {"device": device}


def without_device(scale: float = 1.0) -> ScaledEMT:
    """A factory that forgot the keyword ``device`` crucible calls it with."""
    return ScaledEMT(scale)
