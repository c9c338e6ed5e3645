"""The ``crucible discovery kappa-*`` commands: one job per step of one material and potential.

relax → fc2 (its forces, and the harmonic phonons' imaginary-mode test) → fc3 chunks (a job per
``chunk_size`` displacements) → conductivity (force constants and the Wigner conductivity, CPU
only) → score (per potential: the leaderboard's prediction file and the metrics). A material that
fails at a step is carried through the later ones as a recorded failure, never a crash.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from crucible.core.io import InFile, read_json, write_json

log = logging.getLogger(__name__)


def _material(structures: InFile, material: str):
    from crucible.discovery.phonons.structures import by_id, read_structures

    return by_id(read_structures(structures), material)


def _thread_budget(threads: int | None) -> None:
    """Hold phono3py to the job's threads. Its kernels are Rust (phonors, rayon), which reads
    RAYON_NUM_THREADS, not the OMP_NUM_THREADS the rule sets: without it rayon starts a thread per
    core it can see, beyond what the job asked its scheduler for. Set before phono3py's first
    parallel call, when rayon builds its pool."""
    if threads:
        os.environ["RAYON_NUM_THREADS"] = str(threads)


def _potential(potential: str, device: str | None, threads: int | None, custom: dict | None):
    from crucible.potentials.registry import load_potential

    return load_potential(potential, device=device, threads=threads, custom=custom or {})


def relax(
    potential: str,
    material: str,
    structures: InFile,
    out: str,
    device: str | None = None,
    threads: int | None = None,
    custom_potentials: dict[str, Any] | None = None,
) -> None:
    """``crucible discovery kappa-relax``: the benchmark's two-stage symmetric relaxation of one
    material by one potential, with its convergence record.

    Args:
        potential: registered potential (chgnet-0.3.0, sevennet-0, ...) or a user's
        material: the material's mp id (as in the structures file)
        structures: the phononDB structures (pinned: discovery/phonons/structures)
        out: the relaxation file results/discovery/phonons/{potential}/{material}/relaxed.json
        device: cpu or cuda (default: cuda when available)
        threads: torch CPU threads
        custom_potentials: JSON of config's potentials: entry of a user's potential named by --potential
    """
    from crucible.discovery.phonons.relaxation import relax as run

    m = _material(structures, material)
    t0 = time.process_time()
    pot = _potential(potential, device, threads, custom_potentials)
    try:
        record = run(m.atoms, pot.calculator)
    except Exception as exc:  # noqa: BLE001 - the potential's own error is the material's failure
        record = {"failure": f"relaxation: {type(exc).__name__}: {exc}", "structure": None}
    record.update(mp_id=m.mp_id, desc=m.desc, potential=potential, device=pot.device, cpu_s=time.process_time() - t0)
    write_json(record, out)
    log.info("%s %s: relaxed, failure=%s, CPU %.1f s", potential, m.desc, record["failure"], record["cpu_s"])


def _forces_job(potential, m, relaxed, order, start, stop, device, threads, custom, skip: str | None):
    """(forces or None, failure or None, digest, total) of displacements [start, stop)."""
    from crucible.discovery.phonons import forces as F

    rec = read_json(relaxed)
    if rec.get("failure") or rec.get("structure") is None:
        return None, f"skipped: {rec.get('failure')}", "", 0, None
    ph3 = F.phono3py_of(rec, m)
    total = F.count(ph3, order)
    digest = F.dataset_digest(ph3)
    if skip:
        return None, f"skipped: {skip}", digest, total, ph3
    pot = _potential(potential, device, threads, custom)
    try:
        forces = F.forces_of(pot, F.supercells(ph3, order, start, stop))
    except F.NonFiniteForce as exc:
        return None, f"non-finite force from the potential: {exc}", digest, total, ph3
    return forces, None, digest, total, ph3


def fc2(
    potential: str,
    material: str,
    structures: InFile,
    relaxed: InFile,
    out: str,
    device: str | None = None,
    threads: int | None = None,
    custom_potentials: dict[str, Any] | None = None,
) -> None:
    """``crucible discovery kappa-fc2``: the second-order force set of one material, and whether
    its harmonic phonons on the q-mesh have imaginary modes (then its third order is skipped).

    Args:
        potential: registered potential or a user's
        material: the material's mp id
        structures: the phononDB structures (pinned: discovery/phonons/structures)
        relaxed: its relaxation file
        out: the force file results/discovery/phonons/{potential}/{material}/fc2.json
        device: cpu or cuda (default: cuda when available)
        threads: torch CPU threads
        custom_potentials: JSON of config's potentials: entry of a user's potential named by --potential
    """
    from crucible.discovery.phonons import conductivity as C
    from crucible.discovery.phonons import forces as F

    m = _material(structures, material)
    _thread_budget(threads)
    t0 = time.process_time()
    forces, failure, digest, total, ph3 = _forces_job(
        potential, m, relaxed, 2, 0, None, device, threads, custom_potentials, None
    )
    imaginary, lowest = None, None
    if forces is not None:
        freqs = C.harmonic(ph3, forces)
        imaginary, lowest = C.has_imaginary_modes(freqs), float(freqs.min())
        if imaginary:
            failure = f"imaginary modes (lowest frequency {lowest:.4f} THz)"
    F.write_forces(
        out,
        mp_id=m.mp_id,
        potential=potential,
        order=2,
        start=0,
        stop=total,
        total=total,
        digest=digest,
        forces=forces,
        failure=failure,
        cpu_s=time.process_time() - t0,
    )
    doc = read_json(out)
    doc.update(has_imaginary_modes=imaginary, lowest_frequency=lowest)
    write_json(doc, out, indent=None)
    log.info("%s %s: fc2 %d supercells, imaginary=%s, failure=%s", potential, m.desc, total, imaginary, failure)


def fc3(
    potential: str,
    material: str,
    structures: InFile,
    relaxed: InFile,
    fc2: InFile,
    chunk: int,
    chunk_size: int,
    out: str,
    device: str | None = None,
    threads: int | None = None,
    custom_potentials: dict[str, Any] | None = None,
) -> None:
    """``crucible discovery kappa-fc3``: forces of one chunk of the third-order displacements,
    ``[chunk × chunk_size, (chunk + 1) × chunk_size)``; an empty chunk (past the last
    displacement) or a material failed before is written as such.

    Args:
        potential: registered potential or a user's
        material: the material's mp id
        structures: the phononDB structures (pinned: discovery/phonons/structures)
        relaxed: its relaxation file
        fc2: its second-order force file (a failure there skips the chunk)
        chunk: the chunk's index, from 0
        chunk_size: displacements per chunk (discovery.phonons.chunk_size)
        out: the force file results/discovery/phonons/{potential}/{material}/fc3_{chunk}.json
        device: cpu or cuda (default: cuda when available)
        threads: torch CPU threads
        custom_potentials: JSON of config's potentials: entry of a user's potential named by --potential
    """
    from crucible.discovery.phonons import forces as F

    m = _material(structures, material)
    _thread_budget(threads)
    t0 = time.process_time()
    before = read_json(fc2).get("failure")
    start = chunk * chunk_size
    forces, failure, digest, total, _ = _forces_job(
        potential, m, relaxed, 3, start, start + chunk_size, device, threads, custom_potentials, before
    )
    stop = min(start + chunk_size, total) if total else start
    if total and start >= total:
        forces, failure = None, None  # past the end: the material has fewer displacements
    F.write_forces(
        out,
        mp_id=m.mp_id,
        potential=potential,
        order=3,
        start=start,
        stop=max(start, stop),
        total=total,
        digest=digest,
        forces=forces,
        failure=failure,
        cpu_s=time.process_time() - t0,
    )
    log.info("%s %s: fc3 chunk %d [%d, %d) of %d, failure=%s", potential, m.desc, chunk, start, stop, total, failure)


def conductivity(
    material: str,
    structures: InFile,
    relaxed: InFile,
    fc2: InFile,
    chunks: list[InFile],
    out: str,
    threads: int | None = None,
) -> None:
    """``crucible discovery kappa-conductivity``: the force constants and the Wigner conductivity
    (RTA, isotope scattering, 300 K, the material's q-mesh) of one material from its force files;
    a failure of any earlier step, or of phono3py, is the material's recorded failure.

    Args:
        material: the material's mp id
        structures: the phononDB structures (pinned: discovery/phonons/structures)
        relaxed: its relaxation file
        fc2: its second-order force file
        chunks: its third-order force files, every chunk
        out: the result file results/discovery/phonons/{potential}/{material}/kappa.json
        threads: OpenMP threads of phono3py
    """
    import numpy as np

    from crucible.discovery.phonons import conductivity as C
    from crucible.discovery.phonons import forces as F

    m = _material(structures, material)
    _thread_budget(threads)
    t0 = time.process_time()
    rec = read_json(relaxed)
    result: dict[str, Any] = {
        "mp_id": m.mp_id,
        "name": m.name,
        "desc": m.desc,
        "potential": rec.get("potential"),
        "relaxation": {k: v for k, v in rec.items() if k not in ("structure", "mp_id", "desc", "potential")},
        "has_imaginary_modes": None,
        "failure": rec.get("failure"),
        "cpu_s": {"relax": rec.get("cpu_s")},
    }
    if result["failure"] is None:
        ph3 = F.phono3py_of(rec, m)
        digest = F.dataset_digest(ph3)
        second = F.read_forces(fc2, digest)
        result["has_imaginary_modes"] = second.get("has_imaginary_modes")
        result["cpu_s"]["fc2"] = second["cpu_s"]
        docs = sorted((F.read_forces(p, digest) for p in chunks), key=lambda d: d["start"])
        result["cpu_s"]["fc3"] = sum(d["cpu_s"] for d in docs)
        result["failure"] = second["failure"] or next((d["failure"] for d in docs if d["failure"]), None)
        if result["failure"] is None:
            total = F.count(ph3, 3)
            filled = [d for d in docs if d["stop"] > d["start"]]
            covered = [(d["start"], d["stop"]) for d in filled]
            size = filled[0]["stop"] - filled[0]["start"] if filled else 1
            if covered != F.chunks(total, size):
                raise ValueError(f"{out}: the chunks cover {covered}, not the {total} displacements of {material}")
            try:
                C.harmonic(ph3, second["forces"])
                kappa = C.wigner(ph3, np.concatenate([d["forces"] for d in filled]))
            except Exception as exc:  # noqa: BLE001 - phono3py's error is the material's failure
                result["failure"] = f"conductivity: {type(exc).__name__}: {exc}"
            else:
                result.update({k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in kappa.items()})
    result["cpu_s"]["conductivity"] = time.process_time() - t0
    result["cpu_s"]["total"] = sum(v for v in result["cpu_s"].values() if isinstance(v, (int, float)))
    write_json(result, out, indent=None)
    log.info(
        "%s: kappa %s, failure=%s, CPU %.1f s",
        m.desc,
        result.get("kappa_TOT_ave"),
        result["failure"],
        result["cpu_s"]["total"],
    )
