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

The generators are a :class:`crucible.core.registry.Registry` of :class:`GeneratorSpec`, this
module; each lives in its own (:mod:`crucible.crystal.template_generator`,
:mod:`crucible.crystal.random_generators`, :mod:`crucible.crystal.mlip_search`), sharing
:mod:`crucible.crystal.generation`.

For match@k (:mod:`crucible.crystal.csp`) each generator draws k different candidates per item
(:meth:`samples`), the first of which is its single answer: ``template`` the k best-ranked
training crystals, ``random-symmetric`` k seeded draws (seed ``item_seed + j``, the candidates
``mlip-search`` relaxes), ``mlip-search`` its relaxed candidates by increasing energy, ``chance``
k seeded cells (seed ``item_seed + j``).

A generator that cannot answer an item writes ``response: null`` with the reason in ``error``;
nothing is dropped.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from crucible.core.errors import ConfigError
from crucible.core.io import InFile
from crucible.core.registry import Registry, Spec
from crucible.crystal.mlip_search import MlipSearchGenerator
from crucible.crystal.random_generators import ChanceGenerator, RandomSymmetricGenerator
from crucible.crystal.template_generator import TemplateGenerator


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
