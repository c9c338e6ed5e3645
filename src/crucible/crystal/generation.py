"""What every crystal generator shares: its per-item seed, the elements' atomic volumes it
scales cells by, and the answer text it writes (the format the prompt asks a model for), so
that a generator's answer goes through the same parser and scorer as a language model's."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Callable


def item_seed(seed: int, ident: str) -> int:
    """A per-item seed that does not depend on which other items are generated."""
    return int(hashlib.sha256(f"{seed}:{ident}".encode()).hexdigest()[:8], 16)


def sample_or_error(fn: Callable[..., str], *args) -> str | Exception:
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


def atomic_volume(symbol: str) -> float:
    from pymatgen.core import Element

    el = Element(symbol)
    r = el.atomic_radius or el.atomic_radius_calculated or 1.5
    return 4.0 / 3.0 * math.pi * float(r) ** 3
