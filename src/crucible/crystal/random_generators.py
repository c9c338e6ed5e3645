"""The generators that draw at random, seeded per item (seed ``item_seed + j`` for sample j):

* ``chance``: the chance floor of a match rate: a uniformly random cell (angles 60-120°, edge
  ratios 0.5-1.5, volume from the elements' atomic volumes) with the item's composition and
  number of sites at uniformly random fractional coordinates; no space group, no training data;
* ``random-symmetric``: a pyxtal random crystal of the right composition in a compatible space
  group (the prompt's when given); ``mlip-search`` relaxes these draws.
"""

from __future__ import annotations

import math
from typing import Any

from crucible.crystal.generation import answer_from_structure, atomic_volume, format_answer, item_seed, sample_or_error


def chance_answer(meta: dict[str, Any], seed: int) -> str:
    """A uniformly random cell of the item's composition and number of sites (see the module
    docstring), as answer text. Angle triples that make no cell are drawn again."""
    import numpy as np

    rng = np.random.default_rng(seed)
    elements, counts = list(meta["elements"]), [int(n) for n in meta["element_counts"]]
    species = [el for el, n in zip(elements, counts) for _ in range(n)]
    volume = sum(atomic_volume(el) for el in species)
    while True:
        angles = rng.uniform(60.0, 120.0, 3)
        cos = np.cos(np.radians(angles))
        # the unit cell's volume factor; <= 0 (or nearly): no cell with these angles
        factor = 1 - (cos**2).sum() + 2 * cos.prod()
        if factor > 1e-3:
            break
    ratios = rng.uniform(0.5, 1.5, 3)
    scale = (volume / (ratios.prod() * math.sqrt(factor))) ** (1 / 3)
    coords = rng.random((len(species), 3))
    return format_answer(ratios * scale, angles, species, coords)


class ChanceGenerator:
    name = "chance"

    def __init__(self, train=None, seed: int = 0):
        self.seed = seed

    def answer(self, item: dict[str, Any]) -> str:
        return chance_answer(item["meta"], item_seed(self.seed, item["id"]))

    def samples(self, item: dict[str, Any], k: int) -> list:
        """k cells, seeds ``item_seed + j`` (cell 0 is :meth:`answer`)."""
        base = item_seed(self.seed, item["id"])
        return [sample_or_error(chance_answer, item["meta"], base + j) for j in range(k)]


_CENTERING = {"P": 1, "A": 2, "B": 2, "C": 2, "I": 2, "F": 4, "R": 3}


def random_symmetric_structure(meta: dict[str, Any], seed: int, max_attempts: int = 40):
    """A pyxtal random crystal with the item's composition and number of sites.

    Space group: the prompt's when it gives one (then others if pyxtal cannot place the atoms
    there), else drawn uniformly from the groups compatible with the composition. Centred groups
    are generated in the conventional cell and reduced to the primitive one.
    """
    import warnings

    import numpy as np
    from pyxtal import pyxtal
    from pyxtal.symmetry import Group

    rng = np.random.default_rng(seed)
    elements, counts = list(meta["elements"]), list(meta["element_counts"])
    wanted = meta["spacegroup_number"] if meta.get("prompt_gives_spacegroup") else None
    tried = []
    for attempt in range(max_attempts):
        sg = wanted if (wanted and attempt < max_attempts // 2) else int(rng.integers(1, 231))
        group = Group(sg)
        factor = _CENTERING.get(group.symbol[0], 1)
        num = [c * factor for c in counts]
        if not group.check_compatible(num)[0]:
            tried.append(sg)
            continue
        crystal = pyxtal()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                crystal.from_random(3, sg, elements, num, random_state=int(rng.integers(2**31)))
        except Exception:  # noqa: BLE001 - pyxtal gives up on some draws; draw again
            tried.append(sg)
            continue
        if not crystal.valid:
            tried.append(sg)
            continue
        structure = crystal.to_pymatgen()
        if factor > 1:
            structure = structure.get_primitive_structure()
        if len(structure) == meta["nsites"]:
            return structure
        tried.append(sg)
    raise ValueError(
        f"pyxtal placed no crystal with {meta['nsites']} sites in {max_attempts} attempts (groups {tried[:8]}...)"
    )


class RandomSymmetricGenerator:
    name = "random-symmetric"

    def __init__(self, train=None, seed: int = 0):
        self.seed = seed

    def answer(self, item: dict[str, Any]) -> str:
        structure = random_symmetric_structure(item["meta"], item_seed(self.seed, item["id"]))
        return answer_from_structure(structure, item["meta"]["elements"])

    def samples(self, item: dict[str, Any], k: int) -> list:
        """k draws, seeds ``item_seed + j`` (draw 0 is :meth:`answer`)."""
        base = item_seed(self.seed, item["id"])

        def draw(j: int) -> str:
            return answer_from_structure(random_symmetric_structure(item["meta"], base + j), item["meta"]["elements"])

        return [sample_or_error(draw, j) for j in range(k)]
