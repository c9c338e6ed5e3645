"""Generators that need no language model, registered by name.

Each reads only what the prompt tells a model (the item's ``meta``: elements in answer order,
their counts, and the space group when the prompt template gives it), never the reference
structure, and writes the answer as text in the format the prompt asks for, so that every
generator goes through the same parser and scorer as a language model:

* ``template``: the training crystal with the same anonymised formula and number of sites (or the
  nearest by stoichiometry), species substituted in electronegativity order, volume rescaled by
  the elements' atomic volumes;
* ``chance``: the chance floor of a match rate: a uniformly random cell (angles 60-120°, edge
  ratios 0.5-1.5, volume from the elements' atomic volumes) with the item's composition and
  number of sites at uniformly random fractional coordinates, seeded per item; no space group,
  no training data. What it matches is what the matcher's tolerances let through;
* ``random-symmetric``: a pyxtal random crystal of the right composition in a compatible space
  group (the prompt's when given), seeded per item;
* ``mlip-search``: ``n_candidates`` random-symmetric crystals relaxed (cell and positions: FIRE
  with a Fréchet cell filter, :func:`crucible.potentials.relax.relax`) with an interatomic potential
  loaded by :func:`crucible.potentials.registry.load_potential` (a registered one, or the user's own
  of config ``potentials:``, whose provenance goes into the sidecar); the lowest energy per
  atom wins. A candidate whose relaxation meets a non-finite energy or force is a failed candidate.

The generators are a :class:`crucible.core.registry.Registry` of :class:`GeneratorSpec`.

For match@k (:mod:`crucible.crystal.csp`) each generator draws k different candidates per item
(:meth:`samples`), the first of which is its single answer: ``template`` the k best-ranked
training crystals, ``random-symmetric`` k seeded draws (seed ``item_seed + j``, the candidates
``mlip-search`` relaxes), ``mlip-search`` its relaxed candidates by increasing energy, ``chance``
k seeded cells (seed ``item_seed + j``).

A generator that cannot answer an item writes ``response: null`` with the reason in ``error``;
nothing is dropped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from crucible.core.errors import ConfigError
from crucible.core.io import InFile
from crucible.core.registry import Registry, Spec

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)


def item_seed(seed: int, ident: str) -> int:
    """A per-item seed that does not depend on which other items are generated."""
    return int(hashlib.sha256(f"{seed}:{ident}".encode()).hexdigest()[:8], 16)


def _attempt(fn: Callable[..., str], *args) -> str | Exception:
    """One sample: its answer text, or the exception that stopped it (recorded, not raised)."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - a failed sample is recorded per sample, never dropped
        return exc


def format_answer(abc, angles, elements: list[str], coords) -> str:
    """The answer text a model is asked to write (``<material>{json}</material>``)."""
    a, b, c = (round(float(x), 6) for x in abc)
    al, be, ga = (round(float(x), 4) for x in angles)
    doc = {
        "lattice_parameters": {"a": a, "b": b, "c": c, "alpha": al, "beta": be, "gamma": ga},
        "atomic_sites": [
            {"element": el, "coordinate": [round(float(x) % 1.0, 6) for x in xyz]} for el, xyz in zip(elements, coords)
        ],
    }
    return "<material>" + json.dumps(doc) + "</material>"


def answer_from_structure(structure, elements: list[str]) -> str:
    """Sites grouped in the prompt's element order; a structure with other elements keeps its own."""
    rank = {el: i for i, el in enumerate(elements)}
    idx = sorted(range(len(structure)), key=lambda i: (rank.get(structure[i].specie.symbol, len(rank)), i))
    lat = structure.lattice
    return format_answer(
        lat.abc, lat.angles, [structure[i].specie.symbol for i in idx], [structure[i].frac_coords for i in idx]
    )


# ---------------------------------------------------------------- template


def _atomic_volume(symbol: str) -> float:
    from pymatgen.core import Element

    el = Element(symbol)
    r = el.atomic_radius or el.atomic_radius_calculated or 1.5
    return 4.0 / 3.0 * math.pi * float(r) ** 3


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
        return [_attempt(self._substituted, meta, picked) for picked in ranked[:k]]

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
        old_volume = sum(_atomic_volume(s.specie.symbol) for s in structure)
        from pymatgen.core import Structure

        structure = Structure(structure.lattice, [mapping[s.specie.symbol] for s in structure], structure.frac_coords)
        new_volume = sum(_atomic_volume(s.specie.symbol) for s in structure)
        structure.scale_lattice(structure.volume * new_volume / old_volume)
        return answer_from_structure(structure, meta["elements"])


# ---------------------------------------------------------------- chance


def chance_answer(meta: dict[str, Any], seed: int) -> str:
    """A uniformly random cell of the item's composition and number of sites (see the module
    docstring), as answer text. Angle triples that make no cell are drawn again."""
    import numpy as np

    rng = np.random.default_rng(seed)
    elements, counts = list(meta["elements"]), [int(n) for n in meta["element_counts"]]
    species = [el for el, n in zip(elements, counts) for _ in range(n)]
    volume = sum(_atomic_volume(el) for el in species)
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
        return [_attempt(chance_answer, item["meta"], base + j) for j in range(k)]


# ---------------------------------------------------------------- random-symmetric

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

        return [_attempt(draw, j) for j in range(k)]


# ---------------------------------------------------------------- mlip-search


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


@dataclass(frozen=True, kw_only=True)
class GeneratorSpec(Spec):
    """A crystal generator: ``factory(train=..., seed=..., **params)`` -> an object with ``answer(item)``.

    One job answers every item of one dataset; ``inputs`` says whether it reads the training set."""

    inputs: tuple[str, ...] = ("prompts",)

    @property
    def needs_train(self) -> bool:
        return "train" in self.inputs


GENERATORS: Registry[GeneratorSpec] = Registry(
    "crystal generator",
    [
        GeneratorSpec(
            name="template",
            factory=TemplateGenerator,
            description="the training crystal of the nearest composition, species substituted",
            inputs=("prompts", "train"),
        ),
        GeneratorSpec(
            name="chance",
            factory=ChanceGenerator,
            description="the chance floor: a uniformly random cell of the composition and site count, seeded per item",
        ),
        GeneratorSpec(
            name="random-symmetric",
            factory=RandomSymmetricGenerator,
            description="a pyxtal random crystal of the composition, seeded per item",
        ),
        GeneratorSpec(
            name="mlip-search",
            factory=MlipSearchGenerator,
            description="random-symmetric candidates relaxed with an interatomic potential, lowest energy wins",
            device="gpu",
        ),
    ],
)


def get_generator_spec(name: str) -> GeneratorSpec:
    return GENERATORS[name]


def generate(
    name: str,
    items: list[dict[str, Any]],
    train: list[dict[str, Any]] | None = None,
    seed: int = 0,
    params: dict[str, Any] | None = None,
    progress: bool = False,
):
    """(responses in the shared LLM contract, sidecar info with timings)."""
    from tqdm import tqdm

    spec = get_generator_spec(name)
    t0 = time.perf_counter()
    gen = spec.build(train=train or [], seed=seed, **(params or {}))
    setup_s = time.perf_counter() - t0
    responses, seconds = [], []
    for item in tqdm(items, desc=name, disable=not progress):
        t1 = time.perf_counter()
        try:
            responses.append({"id": item["id"], "response": gen.answer(item), "error": None})
        except Exception as exc:  # noqa: BLE001 - a failure is recorded per item, never dropped
            responses.append({"id": item["id"], "response": None, "error": f"{type(exc).__name__}: {exc}"[:500]})
        seconds.append(time.perf_counter() - t1)
    info = {
        "generator": name,
        "seed": seed,
        "params": params or {},
        "n_items": len(items),
        "n_errors": sum(r["response"] is None for r in responses),
        "setup_s": round(setup_s, 3),
        "generate_s": round(float(sum(seconds)), 3),
        "seconds_per_item": round(sum(seconds) / len(seconds), 4) if seconds else None,
    }
    potential = getattr(gen, "potential", None)
    if potential is not None:  # what relaxed the candidates: class path, params, package version
        info["potential"] = dict(potential.provenance)
    return responses, info


def generate_samples(
    name: str,
    items: list[dict[str, Any]],
    k: int,
    train: list[dict[str, Any]] | None = None,
    seed: int = 0,
    params: dict[str, Any] | None = None,
    progress: bool = False,
):
    """k samples per item: (samples-file lines ``{id, sample, response, error}``, sidecar info).

    Sample 0 is the generator's single answer; a generator draws fewer than k where it has fewer
    candidates (the scorer counts the missing ones as ``no_response``)."""
    from tqdm import tqdm

    if k < 1:
        raise ConfigError(f"k must be at least 1, got {k}")
    spec = get_generator_spec(name)
    t0 = time.perf_counter()
    gen = spec.build(train=train or [], seed=seed, **(params or {}))
    setup_s = time.perf_counter() - t0
    lines, seconds = [], []
    for item in tqdm(items, desc=f"{name} x{k}", disable=not progress):
        t1 = time.perf_counter()
        try:
            drawn = gen.samples(item, k)
        except Exception as exc:  # noqa: BLE001 - the item gets one failed sample, never dropped
            drawn = [exc]
        for j, out in enumerate(drawn):
            if isinstance(out, Exception):
                lines.append(
                    {"id": item["id"], "sample": j, "response": None, "error": f"{type(out).__name__}: {out}"[:500]}
                )
            else:
                lines.append({"id": item["id"], "sample": j, "response": out, "error": None})
        seconds.append(time.perf_counter() - t1)
    info = {
        "generator": name,
        "seed": seed,
        "params": params or {},
        "k": k,
        "n_items": len(items),
        "n_samples": len(lines),
        "n_errors": sum(r["response"] is None for r in lines),
        "setup_s": round(setup_s, 3),
        "generate_s": round(float(sum(seconds)), 3),
        "seconds_per_item": round(sum(seconds) / len(seconds), 4) if seconds else None,
    }
    potential = getattr(gen, "potential", None)
    if potential is not None:  # as generate(): what relaxed the candidates
        info["potential"] = dict(potential.provenance)
    return lines, info


def write_generator_answers(
    generator: str,
    prompts: InFile,
    out: str | os.PathLike,
    out_info: str | os.PathLike,
    train: InFile | None = None,
    seed: int = 0,
    params: dict[str, Any] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """A generator's answers to a prompts.jsonl as a response file (the LLM response format) and
    its sidecar (parameters, timings, the potential's provenance). Returns the sidecar.

    Args:
        out: the answers to write (JSON lines {id, response, error}, one per item):
            results/crystal/{dataset}/responses/{generator}.jsonl
        out_info: the sidecar to write (JSON: generator, seed, parameters, error count, timings in s, the
            potential's provenance): .../responses/{generator}.json
        generator: template: the nearest-composition training crystal, species substituted; random-symmetric: a seeded
            pyxtal crystal of the composition; mlip-search: random-symmetric candidates relaxed with a potential, lowest
            energy first
        prompts: the test items build-items wrote: results/crystal/{dataset}/prompts.jsonl
        train: the training set build-items wrote (train.jsonl); the template generator needs it, the others ignore it
        seed: base seed; each item's seed is derived from it and the item's id, so an answer does not depend on the
            other items (default 0)
        params: JSON object of generator parameters (config crystal.generator_params.{generator}); mlip-search: model
            (chgnet-0.3.0), n_candidates (8), fmax (0.1 eV/Å), steps (100), device, custom_potentials; the others take
            none (default: {})
    """
    from crucible.core.io import write_json
    from crucible.crystal import items
    from crucible.llm.files import read_prompt_records

    train_records = items.read_jsonl(train) if train else []
    responses, info = generate(generator, read_prompt_records(prompts), train_records, seed, params or {}, progress)
    items.write_jsonl(responses, out)
    write_json(info, out_info)
    return info
