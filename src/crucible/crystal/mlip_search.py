"""The ``mlip-search`` generator: ``n_candidates`` random-symmetric crystals relaxed (cell and
positions: FIRE with a Fréchet cell filter, :func:`crucible.potentials.relax.relax`) with an
interatomic potential loaded by :func:`crucible.potentials.registry.load_potential`; the lowest
energy per atom wins, and match@k takes the relaxed candidates by increasing energy. A candidate
whose relaxation meets a non-finite energy or force is a failed candidate."""

from __future__ import annotations

import logging
from typing import Any

from crucible.crystal.generation import answer_from_structure, item_seed
from crucible.crystal.random_generators import random_symmetric_structure

log = logging.getLogger(__name__)


class MlipSearchGenerator:
    name = "mlip-search"

    def __init__(
        self,
        train=None,
        seed: int = 0,
        model: str = "chgnet-0.3.0",
        n_candidates: int = 8,
        fmax: float = 0.1,
        steps: int = 100,
        device: str | None = None,
        custom_potentials: dict[str, Any] | None = None,
    ):
        from crucible.potentials.registry import load_potential

        self.seed, self.n_candidates, self.fmax, self.steps = seed, int(n_candidates), float(fmax), int(steps)
        self.model = model
        # custom_potentials: config potentials: (its entry), when ``model`` is a user's potential
        self.potential = load_potential(model, device, custom=custom_potentials)

    def _relax(self, structure):
        from pymatgen.io.ase import AseAtomsAdaptor

        from crucible.potentials.relax import relax

        result = relax(
            AseAtomsAdaptor.get_atoms(structure),
            self.potential,
            optimizer="FIRE",
            fmax=self.fmax,
            steps=self.steps,
            cell_filter="frechet",
            quiet=True,
        )
        if not result.ok:
            raise ValueError(result.reason)
        return result.energy / len(result.atoms), AseAtomsAdaptor.get_structure(result.atoms)

    def _relaxed_candidates(self, item: dict[str, Any]) -> list:
        """(energy per atom, relaxed structure) of every candidate that relaxed, lowest first."""
        base = item_seed(self.seed, item["id"])
        done, errors = [], []
        for k in range(self.n_candidates):
            try:
                candidate = random_symmetric_structure(item["meta"], base + k)
                energy, relaxed = self._relax(candidate)
            except Exception as exc:  # noqa: BLE001 - one failed candidate must not sink the item
                errors.append(f"{type(exc).__name__}: {exc}"[:200])
                continue
            done.append((energy, k, relaxed))
        if not done:
            raise ValueError(f"all {self.n_candidates} candidates failed; first: {errors[0] if errors else '?'}")
        return [(e, st) for e, _, st in sorted(done, key=lambda t: (t[0], t[1]))]

    def answer(self, item: dict[str, Any]) -> str:
        return answer_from_structure(self._relaxed_candidates(item)[0][1], item["meta"]["elements"])

    def samples(self, item: dict[str, Any], k: int) -> list:
        """The k lowest-energy relaxed candidates (at most ``n_candidates``)."""
        ranked = self._relaxed_candidates(item)[:k]
        return [answer_from_structure(st, item["meta"]["elements"]) for _, st in ranked]
