"""Relax-then-match: a responder's samples relaxed with an interatomic potential and scored again,
beside the samples as drawn (never instead of them).

Matching before and after a relaxation gives different numbers for the same model (issue 34
quotes FlowMM moving from 61.39 % to 74.3 %), so a number is only comparable with one made the
same way; crucible reports both, on adjacent rows of the CSP table.

Each of an item's first k samples is built as the matcher gets it
(:func:`crucible.crystal.scoring.sample_as_structure`: an answer text with its item's species; in
a scoring worker process, with its time limit, as scoring parses), then relaxed, cell and
positions, through :func:`crucible.potentials.relax.relax` (the one relaxation loop) with a
potential loaded by :func:`crucible.potentials.registry.load_potential` (a registered one or a
user's, config ``potentials:``). The relaxed structure goes to a samples file (JSON lines
``{id, sample, cif}``) under the same ids and sample numbers, which
:func:`crucible.crystal.csp.score_samples_file` scores like any other. A sample with no
structure, with elements the potential does not know, whose relaxation raises or ends with a
non-finite energy or force (``status`` non-finite) is written without a structure, the reason in
``error``: after relaxation it is unmatched (``no_response``, the reason in the detail), and the
sidecar counts it. A relaxation that used all its steps keeps its last structure (counted as not
converged).
"""

from __future__ import annotations

import os
import time
from typing import Any

from crucible.core.errors import DataValidationError
from crucible.core.io import InFile
from crucible.crystal.pool import map_calls
from crucible.crystal.scoring import TIMEOUT_S, sample_as_structure


def _built(kind: str, payload: Any, ground_truth: dict[str, Any]) -> tuple[Any, str | None]:
    """(Structure, None) or (None, why not); in a worker. Never raises."""
    try:
        return sample_as_structure(kind, payload, ground_truth), None
    except Exception as exc:  # noqa: BLE001 - a sample without a structure is reported, not raised
        return None, f"{type(exc).__name__}: {exc}"[:300]


def relax_structure(structure, potential, optimizer: str, fmax: float, steps: int, cell_filter: str | None):
    """(relaxed Structure, converged) or raises ValueError with the reason it could not relax."""
    from pymatgen.io.ase import AseAtomsAdaptor

    from crucible.potentials.relax import relax

    if potential.elements is not None:
        unknown = sorted({el.symbol for el in structure.composition} - potential.elements)
        if unknown:
            raise ValueError(f"elements the potential does not know: {', '.join(unknown)}")
    result = relax(
        AseAtomsAdaptor.get_atoms(structure),
        potential,
        optimizer=optimizer,
        fmax=fmax,
        steps=steps,
        cell_filter=cell_filter,
        quiet=True,
    )
    if not result.ok:
        raise ValueError(f"{result.status}: {result.reason}")
    return AseAtomsAdaptor.get_structure(result.atoms), bool(result.converged)


def relax_samples(
    drawn: dict[str, list],
    items: list[dict[str, Any]],
    k: int,
    potential,
    optimizer: str = "FIRE",
    fmax: float = 0.1,
    steps: int = 100,
    cell_filter: str | None = "frechet",
    timeout: float = TIMEOUT_S,
    progress: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(samples-file lines, counts) of every item's first ``k`` samples relaxed with ``potential``
    (a loaded :class:`~crucible.potentials.spec.Potential`), in item and sample order."""
    from tqdm import tqdm

    if k < 1:  # 0 wrote an empty file, -1 relaxed all but each item's last sample
        raise DataValidationError(f"k must be at least 1, got {k}")
    # as the config's schema: fmax -1 or NaN never converged (and NaN was written into the sidecar)
    if not fmax > 0 or fmax == float("inf") or steps < 0:
        raise DataValidationError(f"fmax must be a positive number and steps 0 or more, got fmax {fmax}, steps {steps}")
    chosen = [(it, s) for it in items for s in drawn.get(it["id"], [])[:k]]
    built = map_calls(
        _built,
        [(s.kind, s.payload, it["ground_truth"]) for it, s in chosen if s.payload is not None],
        timeout=timeout,
        failed=(None, "no structure within the time limit"),
    )
    made = iter(built)
    lines, counts = [], {"samples": len(chosen), "relaxed": 0, "not_converged": 0, "failed": 0, "no_sample": 0}
    start = time.perf_counter()
    for it, s in tqdm(chosen, desc=f"relax ({potential.name})", disable=not progress):
        line: dict[str, Any] = {"id": it["id"], "sample": s.number}
        if s.payload is None:
            counts["no_sample"] += 1
            lines.append({**line, "cif": None, "error": s.error or "no sample"})
            continue
        (structure, why), _ = next(made)
        try:
            if structure is None:
                raise ValueError(f"no structure to relax ({why})")
            relaxed, converged = relax_structure(structure, potential, optimizer, fmax, steps, cell_filter)
        except Exception as exc:  # noqa: BLE001 - a sample the potential cannot relax is unmatched, with why
            counts["failed"] += 1
            reason = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
            lines.append({**line, "cif": None, "error": f"not relaxed with {potential.name}: {reason}"[:400]})
            continue
        counts["relaxed"] += 1
        counts["not_converged"] += not converged
        lines.append({**line, "cif": relaxed.to(fmt="cif")})
    counts["relax_s"] = round(time.perf_counter() - start, 3)
    return lines, counts


def write_relaxed_samples(
    prompts: InFile,
    samples: InFile,
    potential: str,
    k: int,
    out: str | os.PathLike,
    out_info: str | os.PathLike,
    format: str = "auto",
    optimizer: str = "FIRE",
    fmax: float = 0.1,
    steps: int = 100,
    cell_filter: str | None = "frechet",
    custom_potentials: dict[str, Any] | None = None,
    device: str | None = None,
    threads: int | None = None,
    timeout: float = TIMEOUT_S,
    progress: bool = True,
) -> dict[str, Any]:
    """Every item's first k samples relaxed with an interatomic potential, as a samples file for
    score-samples (the same ids and sample numbers), and its sidecar. Returns the sidecar.

    Args:
        samples: the samples as drawn (any format score-samples reads)
        potential: the interatomic potential that relaxes them: a registered name or a user's (config potentials:)
        out: the relaxed samples to write (JSON lines {id, sample, cif} or {id, sample, cif: null, error}):
            results/crystal/{dataset}/relaxed/{potential}/{responder}.jsonl
        out_info: the sidecar to write (JSON: the relaxation's settings, counts of relaxed, not converged and
            failed samples, the potential's provenance): .../relaxed/{potential}/{responder}.json
        optimizer: the ASE optimizer (default %(default)s)
        fmax: force threshold in eV/Å (default %(default)s)
        steps: optimizer steps at most; a relaxation that uses them keeps its last structure (default %(default)s)
        cell_filter: the cell's degrees of freedom: frechet (default), exp or unit; empty: positions only
        custom_potentials: JSON {name: entry} of the user's potential (config potentials:), when it is one
        device: cuda or cpu (default: CUDA when torch sees one; a cpu potential always runs on the CPU)
        threads: CPU threads of the potential (the rule's threads)
        prompts: as in :func:`crucible.crystal.generators.write_generator_answers`
        k: as in :func:`crucible.crystal.csp.score_samples_file`
        format: as in :func:`crucible.crystal.csp.score_samples_file`
        timeout: as in :func:`crucible.crystal.report.score_response_file`
    """
    from crucible.core.io import write_json
    from crucible.crystal.items import write_jsonl
    from crucible.crystal.samples import read_samples
    from crucible.llm.files import read_prompt_records
    from crucible.potentials.registry import load_potential

    items = read_prompt_records(prompts)
    drawn = read_samples(samples, [it["id"] for it in items], format, str(prompts))
    loaded = load_potential(potential, device, threads, custom=custom_potentials)
    lines, counts = relax_samples(
        drawn, items, k, loaded, optimizer, fmax, steps, cell_filter or None, timeout, progress
    )
    info = {
        "relaxation": {
            "potential": potential,
            "optimizer": optimizer,
            "fmax": fmax,
            "steps": steps,
            "cell_filter": cell_filter or None,
            "k": k,
            **counts,
        },
        "potential": dict(loaded.provenance),
    }
    write_jsonl(lines, out)
    write_json(info, out_info)
    return info
