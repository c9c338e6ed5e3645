"""The mlip jobs that run a potential: the EOS of the Delta set and the s2ef predictions on a
dataset's frames, each loading its potential and writing one results file with its provenance;
and the list of registered potentials."""

from __future__ import annotations

import logging
import time
from typing import Any

log = logging.getLogger(__name__)


def list_potentials() -> None:
    """``crucible mlip models``: every registered potential, and whether its weights are here."""
    from crucible.potentials.registry import REGISTRY, available_models

    here = set(available_models())
    for name, spec in sorted(REGISTRY.items()):
        print(
            f"{name:16s} {spec.kind:8s} {'available' if name in here else 'weights not present':20s} {spec.description}"
        )


def write_eos(
    model: str,
    out: str,
    device: str | None = None,
    threads: int | None = None,
    custom_potentials: dict[str, Any] | None = None,
    elements: str = "all",
    points: int = 7,
    volume_range: tuple[float, float] = (0.94, 1.06),
) -> None:
    """``crucible mlip eos``: the EOS fits of one potential (``custom_potentials``: a user's entry
    named ``model``) over ``elements``, written to ``out``.

    Args:
        out: the EOS fits to write: results/mlip/eos/{model}.parquet
        elements: 'all' or comma-separated symbols, e.g. Cu,Ag
        points: volumes sampled per element (default 7)
        volume_range: the sampled volumes as fractions of V0, low and high (default 0.94 1.06)
        model: registered potential (emt, chgnet-0.3.0, sevennet-0, ...) or a custom one
        device: cpu or cuda (default: cuda when available)
        threads: torch CPU threads
        custom_potentials: JSON of config's mlip.custom_potentials (a user's potential named by --model)
    """
    from crucible.core.io import write_parquet
    from crucible.mlip.eos import EOS_FORMAT, EOS_FORMAT_KEY, EOS_SCHEMA, parse_elements, run_eos
    from crucible.potentials.provenance import provenance_metadata
    from crucible.potentials.registry import load_potential

    symbols = parse_elements(elements)  # fail on a typo before loading a model
    t0 = time.perf_counter()
    potential = load_potential(model, device=device, threads=threads, custom=custom_potentials or {})
    t_load = time.perf_counter() - t0
    df = run_eos(potential, symbols, points=points, volume_range=tuple(volume_range), model=model)
    t_total = time.perf_counter() - t0
    metadata = {**provenance_metadata(potential), EOS_FORMAT_KEY: EOS_FORMAT}
    write_parquet(df, out, schema=EOS_SCHEMA, metadata=metadata)
    ok = df[df["status"] == "ok"]
    log.info(
        "%s: %d elements, %d not modelled, %d failed, mean Δ %.2f meV/atom, median %.2f; "
        "load %.1f s, total %.1f s on %s -> %s",
        model,
        len(df),
        int((df["status"] == "unsupported").sum()),
        int((~df["status"].isin(["ok", "unsupported"])).sum()),
        ok["delta_mev"].mean(),
        ok["delta_mev"].median(),
        t_load,
        t_total,
        potential.device,
        out,
    )


def write_s2ef_predictions(
    dataset: str,
    model: str,
    out: str,
    device: str | None = None,
    threads: int | None = None,
    custom_potentials: dict[str, Any] | None = None,
) -> None:
    """``crucible mlip s2ef-predict``: one potential's energies and forces on the frames of
    ``dataset`` (a file or ``ase-vasp-testdata``), written to ``out``.

    Args:
        dataset: extended XYZ / ASE db / any ASE-readable file, or 'ase-vasp-testdata'
        out: the predictions to write: results/mlip/s2ef/{dataset}/{model}.parquet
        model: as in :func:`crucible.mlip.run.write_eos`
        device: as in :func:`crucible.mlip.run.write_eos`
        threads: as in :func:`crucible.mlip.run.write_eos`
        custom_potentials: as in :func:`crucible.mlip.run.write_eos`
    """
    from crucible.core.io import write_parquet
    from crucible.mlip.frames import predict_frames, prediction_schema, read_frames
    from crucible.potentials.provenance import provenance_metadata
    from crucible.potentials.registry import load_potential

    frames = read_frames(dataset)
    potential = load_potential(model, device=device, threads=threads, custom=custom_potentials or {})
    df = predict_frames(frames, potential)
    write_parquet(df, out, schema=prediction_schema(), metadata=provenance_metadata(potential))
    log.info("%s on %s: %d frames, %d failed -> %s", model, dataset, len(df), int((df["status"] != "ok").sum()), out)
