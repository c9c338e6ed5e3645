"""The ``template`` generator: the training crystal with the same anonymised formula and number
of sites (or the nearest by stoichiometry), species substituted in electronegativity order,
volume rescaled by the elements' atomic volumes; for match@k the k best-ranked training crystals."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from crucible.core.errors import ConfigError
from crucible.crystal.generation import answer_from_structure, atomic_volume, sample_or_error

if TYPE_CHECKING:
    import numpy as np


def _stoichiometry(counts: list[int]) -> np.ndarray:
    import numpy as np

    v = np.sort(np.asarray(counts, dtype=float))[::-1]
    return v / v.sum()


def _by_count_then_en(elements: list[str], counts: list[int]) -> list[str]:
    from pymatgen.core import Element

    return [
        el
        for _, _, el in sorted(
            (-n, Element(el).X if not math.isnan(Element(el).X) else 4.0, el) for el, n in zip(elements, counts)
        )
    ]


class TemplateGenerator:
    name = "template"

    def __init__(self, train: list[dict[str, Any]], seed: int = 0):
        from crucible.crystal.scoring import reference_structure

        self.train = []
        for rec in sorted(train, key=lambda r: r["id"]):
            structure = reference_structure(rec["ground_truth"])
            els = [el.symbol for el in structure.composition.element_composition.elements]
            counts = [sum(1 for s in structure if s.specie.symbol == el) for el in els]
            self.train.append((rec["id"], rec["meta"], structure, els, counts))
        if not self.train:
            raise ConfigError("the template generator needs a non-empty training set")

    def _pick(self, meta: dict[str, Any]):
        ranked = self._ranked(meta)
        return ranked[0] if ranked else None

    def _ranked(self, meta: dict[str, Any]) -> list:
        """Usable training crystals, best first (same anonymised formula, then space group when
        the prompt gives it, then nearest stoichiometry, then id)."""
        import numpy as np

        n, k = meta["nsites"], len(meta["elements"])
        want_sg = meta["spacegroup_number"] if meta.get("prompt_gives_spacegroup") else None
        target = _stoichiometry(meta["element_counts"])

        def rank(entry):
            ident, tmeta, structure, els, counts = entry
            same_anon = tmeta["anonymized_formula"] == meta["anonymized_formula"]
            dist = float(np.abs(_stoichiometry(counts) - target).sum()) if len(counts) == k else 9.0
            return (not same_anon, want_sg is not None and tmeta["spacegroup_number"] != want_sg, dist, ident)

        # a template must have the prompt's number of sites, or divide it (then a supercell)
        usable = [e for e in self.train if e[2].num_sites == n and len(e[3]) == k]
        usable = usable or [e for e in self.train if n % e[2].num_sites == 0 and len(e[3]) == k]
        usable = usable or [e for e in self.train if n % e[2].num_sites == 0]
        return sorted(usable, key=rank)

    def answer(self, item: dict[str, Any]) -> str:
        meta = item["meta"]
        picked = self._pick(meta)
        if picked is None:
            raise ValueError(f"no training crystal with {meta['nsites']} sites or a divisor of it")
        return self._substituted(meta, picked)

    def samples(self, item: dict[str, Any], k: int) -> list:
        """The k best-ranked training crystals, substituted (fewer when fewer are usable)."""
        meta = item["meta"]
        ranked = self._ranked(meta)
        if not ranked:
            raise ValueError(f"no training crystal with {meta['nsites']} sites or a divisor of it")
        return [sample_or_error(self._substituted, meta, picked) for picked in ranked[:k]]

    def _substituted(self, meta: dict[str, Any], picked) -> str:
        _, _, structure, els, counts = picked
        structure = structure.copy()
        if structure.num_sites != meta["nsites"]:
            structure.make_supercell([meta["nsites"] // structure.num_sites, 1, 1])
            counts = [c * (meta["nsites"] // picked[2].num_sites) for c in counts]
        source = _by_count_then_en(els, counts)
        target = _by_count_then_en(meta["elements"], meta["element_counts"])
        # more template elements than target ones: the extra ones become the last target element
        mapping = {src: target[min(i, len(target) - 1)] for i, src in enumerate(source)}
        old_volume = sum(atomic_volume(s.specie.symbol) for s in structure)
        from pymatgen.core import Structure

        structure = Structure(structure.lattice, [mapping[s.specie.symbol] for s in structure], structure.frac_coords)
        new_volume = sum(atomic_volume(s.specie.symbol) for s in structure)
        structure.scale_lattice(structure.volume * new_volume / old_volume)
        return answer_from_structure(structure, meta["elements"])
