"""Equation-of-state benchmark on the 71 elemental crystals of the Delta test.

For each element of ase's ``dcdft`` collection (``collections/dcdft.json`` of the installed ase,
pinned as the role ``mlip/eos/dcdft`` and read through :func:`crucible.sources.pinned_files.pinned`) the crystal is scaled isotropically (fractional
positions fixed) to volumes spanning ``volume_range`` times the WIEN2k equilibrium volume, the
potential's energies per atom are fitted with the third-order Birch–Murnaghan form used by
CatBench (its ``eos`` utilities; the fit and the gauge: :mod:`crucible.mlip.birch_murnaghan`), and the fit is compared with the WIEN2k reference through the Delta
gauge of Lejaeghere et al., Science 351, aad3000 (2016), and with WIEN2k and experiment through
V0, B0 and B0′ errors.

Units: volumes in Å³/atom, energies in eV/atom, B0 in GPa (1 GPa = 0.00624151 eV/Å³, CatBench's
constant), Delta and fit residuals in meV/atom.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from crucible.core.errors import ConfigError
from crucible.mlip.birch_murnaghan import BMFit, FitError, delta_gauge, fit_birch_murnaghan

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# the benchmark


DCDFT_ROLE = "mlip/eos/dcdft"  # ase's collections/dcdft.json, pinned in config/sources.yaml


@functools.lru_cache(maxsize=4)
def _collection(path: str):
    from ase.collections.collection import Collection

    collection = Collection("dcdft")
    collection.filename = path  # ase reads the file lazily, from this name
    return collection


def dcdft():
    """ase's dcdft collection read from the pinned file, its SHA-256 checked on every call (the
    parsed file is kept per path: a file that still matches its pin holds the same bytes)."""
    from crucible.sources.pinned_files import pinned

    return _collection(str(pinned(DCDFT_ROLE)))


def dcdft_elements() -> list[str]:
    return list(dcdft().names)


def parse_elements(spec: str | Iterable[str]) -> list[str]:
    """``"all"`` or ``"Cu,Ag"`` or a list → element symbols in the Delta set, in dcdft order."""
    known = dcdft_elements()
    if isinstance(spec, str):
        if spec.strip().lower() == "all":
            return known
        wanted = [s.strip() for s in spec.split(",") if s.strip()]
    else:
        wanted = [str(s).strip() for s in spec]
    unknown = [s for s in wanted if s not in known]
    if unknown:
        raise ConfigError(f"mlip.eos.elements: {', '.join(unknown)} not in the Delta set (ase's dcdft collection)")
    if not wanted:
        raise ConfigError("mlip.eos.elements: empty element list")
    return [s for s in known if s in set(wanted)]


def reference(element: str) -> dict[str, float]:
    """WIEN2k and experimental V0 (Å³/atom), B0 (GPa), B0′ for ``element``; NaN where absent."""
    d = dcdft().data[element]
    g = lambda k: float(d.get(k, math.nan))  # noqa: E731
    return {
        "wien2k_v0": g("wien2k_volume"),
        "wien2k_b0": g("wien2k_B"),
        "wien2k_b0_prime": g("wien2k_Bp"),
        "exp_v0": g("exp_volume"),
        "exp_b0": g("exp_B"),
        "exp_b0_prime": g("exp_Bp"),
    }


def scaled_structures(atoms, volumes_per_atom: Sequence[float]) -> list:
    """Copies of ``atoms`` scaled isotropically to each volume per atom, fractional positions kept."""
    n = len(atoms)
    out = []
    for vpa in volumes_per_atom:
        a = atoms.copy()
        a.calc = None
        factor = (vpa * n / a.get_volume()) ** (1.0 / 3.0)
        a.set_cell(a.cell[:] * factor, scale_atoms=True)
        out.append(a)
    return out


EOS_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("element", pa.string()),
        ("device", pa.string()),
        ("natoms", pa.int64()),
        ("volumes", pa.list_(pa.float64())),  # Å³/atom
        ("energies", pa.list_(pa.float64())),  # eV/atom, NaN where the model failed
        ("e0", pa.float64()),
        ("v0", pa.float64()),
        ("b0", pa.float64()),
        ("b0_prime", pa.float64()),
        ("fit_rmse_mev", pa.float64()),
        ("fit_max_residual_mev", pa.float64()),
        ("v0_in_range", pa.bool_()),
        ("delta_mev", pa.float64()),
        ("wien2k_v0", pa.float64()),
        ("wien2k_b0", pa.float64()),
        ("wien2k_b0_prime", pa.float64()),
        ("exp_v0", pa.float64()),
        ("exp_b0", pa.float64()),
        ("exp_b0_prime", pa.float64()),
        ("v0_error_wien2k", pa.float64()),  # model − reference, signed
        ("b0_error_wien2k", pa.float64()),
        ("b0_prime_error_wien2k", pa.float64()),
        ("v0_error_exp", pa.float64()),
        ("b0_error_exp", pa.float64()),
        ("b0_prime_error_exp", pa.float64()),
        ("status", pa.string()),  # "ok", "failed" or "unsupported" (UNSUPPORTED)
        ("failure_reason", pa.string()),  # null when ok
    ]
)


OK, FAILED, UNSUPPORTED = "ok", "failed", "unsupported"

# The version of what an EOS results file means, stored in its metadata. 2: an element the
# potential has no parameters for is "unsupported" (not run), no longer "failed".
EOS_FORMAT = 2
EOS_FORMAT_KEY = "eos_format"


def check_eos_format(path) -> None:
    """An EOS results file written with another meaning of its rows is refused, naming the file
    and how to redo it: counted as it is, it would mix "failed" and "not modelled"."""
    from crucible.core.errors import DataValidationError
    from crucible.core.io import read_parquet_metadata

    found = read_parquet_metadata(path).get(EOS_FORMAT_KEY, 1)
    if found != EOS_FORMAT:
        raise DataValidationError(
            f"{path}: EOS results of format {found}, this crucible reads format {EOS_FORMAT} (format 2 tells "
            "elements a potential does not model from failures); recompute it: snakemake --forcerun run_eos "
            "(or delete the file and rerun)"
        )


def _row(
    model, element, device, natoms, volumes, energies, ref, fit: BMFit | None, reason: str | None, status: str
) -> dict:
    nan = math.nan
    row = {
        "model": model,
        "element": element,
        "device": device,
        "natoms": int(natoms),
        "volumes": [float(x) for x in volumes],
        "energies": [float(x) for x in energies],
        **ref,
    }
    if fit is None:
        row.update(
            e0=nan,
            v0=nan,
            b0=nan,
            b0_prime=nan,
            fit_rmse_mev=nan,
            fit_max_residual_mev=nan,
            v0_in_range=False,
            delta_mev=nan,
        )
    else:
        row.update(
            e0=fit.e0,
            v0=fit.v0,
            b0=fit.b0,
            b0_prime=fit.b0_prime,
            fit_rmse_mev=fit.rmse_mev,
            fit_max_residual_mev=fit.max_abs_residual_mev,
            v0_in_range=fit.v0_in_range,
            delta_mev=delta_gauge(
                fit.v0, fit.b0, fit.b0_prime, ref["wien2k_v0"], ref["wien2k_b0"], ref["wien2k_b0_prime"]
            ),
        )
    for src in ("wien2k", "exp"):
        for q in ("v0", "b0", "b0_prime"):
            row[f"{q}_error_{src}"] = row[q] - ref[f"{src}_{q}"]
    row["status"] = status
    row["failure_reason"] = reason
    return row


# The sampled volumes must cover the Delta integral's window (0.94-1.06 V0), or Delta would
# integrate an extrapolation; beyond ±20 % a third-order Birch–Murnaghan form no longer describes
# real solids (and soft potentials reach unphysical regions), so the fit's V0/B0 stop meaning much.
DELTA_WINDOW = (0.94, 1.06)
VOLUME_RANGE_LIMITS = (0.80, 1.20)


def check_volume_range(volume_range: Sequence[float]) -> tuple[float, float]:
    lo, hi = (float(v) for v in volume_range)
    if not (VOLUME_RANGE_LIMITS[0] <= lo <= DELTA_WINDOW[0] and DELTA_WINDOW[1] <= hi <= VOLUME_RANGE_LIMITS[1]):
        raise ConfigError(
            f"mlip.eos.volume_range = {[lo, hi]}: the low end must lie in "
            f"[{VOLUME_RANGE_LIMITS[0]}, {DELTA_WINDOW[0]}] and the high end in [{DELTA_WINDOW[1]}, "
            f"{VOLUME_RANGE_LIMITS[1]}] (cover the Delta window {list(DELTA_WINDOW)} x V0, stay where a "
            "Birch–Murnaghan fit holds)"
        )
    return lo, hi


def eos_volumes(reference_v0: float, points: int, volume_range: tuple[float, float]) -> np.ndarray:
    if points < 4:
        raise ConfigError(f"mlip.eos.points = {points}: a Birch–Murnaghan fit needs at least 4 points (7 recommended)")
    lo, hi = check_volume_range(volume_range)
    return reference_v0 * np.linspace(lo, hi, points)


def run_eos(
    calculator,  # a crucible.potentials.spec.Potential, or a bare ASE calculator
    elements: str | Iterable[str] = "all",
    points: int = 7,
    volume_range: tuple[float, float] = (0.94, 1.06),
    model: str | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """EOS of each element with ``calculator``; one row per element, failures included.

    Volumes are ``volume_range`` × the WIEN2k V0 (per atom), evenly spaced. An element the
    potential says it has no parameters for (``Potential.elements``) is not evaluated: its row has
    ``status == "unsupported"``. Otherwise a structure the model rejects, a non-finite energy or a
    fit that does not converge gives ``status == "failed"``; both carry a ``failure_reason`` and
    the row is never dropped.
    """
    from tqdm.auto import tqdm

    from crucible.potentials.energies import evaluate_energies
    from crucible.potentials.spec import as_potential

    calculator = as_potential(calculator)
    model = model or calculator.name
    device = calculator.device
    names = parse_elements(elements)
    rows = []
    bar = tqdm(names, desc=f"EOS {model}", unit="element", disable=not progress)
    for i, element in enumerate(bar, start=1):
        bar.set_postfix_str(element)
        t0 = time.perf_counter()
        atoms = dcdft()[element]
        ref = reference(element)
        volumes = eos_volumes(ref["wien2k_v0"], points, volume_range)
        fit, reason, status = None, None, OK
        missing = sorted(set(atoms.get_chemical_symbols()) - calculator.elements) if calculator.elements else []
        if missing:
            # not a failure of the model: it never claimed this element, so it is not evaluated
            status = UNSUPPORTED
            modelled = ", ".join(sorted(calculator.elements))
            reason = f"{model} has no parameters for {', '.join(missing)} (it models {modelled})"
            energies = np.full(len(volumes), math.nan)
        else:
            results = evaluate_energies(calculator, scaled_structures(atoms, volumes))
            energies = np.array([e for e, _ in results]) / len(atoms)
            reasons = [(v, r) for v, (_, r) in zip(volumes, results) if r is not None]
            if reasons:
                v_bad, first = reasons[0]
                reason = (
                    f"model failed at {len(reasons)}/{len(volumes)} volumes (first at V={v_bad:.3f} Å³/atom): {first}"
                )
            else:
                try:
                    fit = fit_birch_murnaghan(volumes, energies)
                except FitError as exc:
                    reason = str(exc)
            if reason:
                status = FAILED
                log.warning("%s %s: %s", model, element, reason)
        rows.append(_row(model, element, device, len(atoms), volumes, energies, ref, fit, reason, status))
        log.info("%s %s (%d/%d): %s in %.2f s", model, element, i, len(names), status, time.perf_counter() - t0)
    return pd.DataFrame(rows, columns=EOS_SCHEMA.names)


# ---------------------------------------------------------------------------------------------
# summary table

SUMMARY_COLUMNS = [
    "model",
    "n_elements",
    "n_unsupported",  # elements the potential has no parameters for: not run, not a failure
    "unsupported_elements",
    "n_failed",  # elements it models whose evaluation or fit failed
    "failed_elements",
    "n_fitted",
    "delta_mean_mev",  # over this model's own fitted elements
    "delta_median_mev",
    "n_common",  # elements every model of the table fitted
    "delta_mean_common_mev",
    "delta_median_common_mev",
    "v0_mae_wien2k",
    "b0_mae_wien2k",
    "b0_prime_mae_wien2k",
    "v0_mae_exp",
    "b0_mae_exp",
    "n_v0_outside_sampled_range",
    "n_implausible",  # elements with an energy beyond the physical bound (crucible.potentials.spec), fitted or not
    "potential",  # what ran: class path, params, package version (crucible.potentials.provenance.provenance_text)
]


def _mae(x: pd.Series) -> float:
    x = x.dropna()
    return float(x.abs().mean()) if len(x) else math.nan


def common_elements(frames_by_model: Mapping[str, pd.DataFrame]) -> list[str]:
    """The elements every model fitted (status ok), in the first model's (dcdft) order: the one
    set over which their mean Δ can be compared."""
    models = sorted(frames_by_model)
    if not models:
        return []
    fitted = [set(frames_by_model[m].loc[frames_by_model[m]["status"] == OK, "element"]) for m in models]
    shared = set.intersection(*fitted)
    return [e for e in frames_by_model[models[0]]["element"] if e in shared]


def implausible_elements(df: pd.DataFrame) -> int:
    """How many elements of one model's EOS frame have an energy (eV/atom) beyond
    :data:`crucible.potentials.spec.MAX_ABS_ENERGY_PER_ATOM`: their fit and Δ stay as computed,
    the summary counts them beside."""
    from crucible.potentials.spec import implausible_reason

    return sum(
        any(implausible_reason(float(e)) is not None for e in energies)
        for energies in df["energies"]
        if energies is not None
    )


def eos_summary_table(frames_by_model: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per model: the elements it does not model (``unsupported``) and those that failed
    (counted, and named); mean/median Delta over its own fitted elements and over the elements
    every model fitted (:func:`common_elements`); MAE of V0, B0 (and B0′) against WIEN2k and
    experiment over its fitted elements; the potential's provenance from each frame's
    ``attrs["potential"]`` (:func:`crucible.mlip.report.load_frames`)."""
    from crucible.potentials.provenance import provenance_text

    common = set(common_elements(frames_by_model))
    rows = []
    for model in sorted(frames_by_model):
        df = frames_by_model[model]
        ok = df[df["status"] == OK]
        unsupported = df[df["status"] == UNSUPPORTED]
        failed = df[~df["status"].isin([OK, UNSUPPORTED])]
        shared = ok[ok["element"].isin(common)]
        rows.append(
            {
                "model": model,
                "n_elements": int(len(df)),
                "n_unsupported": int(len(unsupported)),
                "unsupported_elements": ",".join(unsupported["element"]),
                "n_failed": int(len(failed)),
                "failed_elements": ",".join(failed["element"]),
                "n_fitted": int(len(ok)),
                "delta_mean_mev": float(ok["delta_mev"].mean()) if len(ok) else math.nan,
                "delta_median_mev": float(ok["delta_mev"].median()) if len(ok) else math.nan,
                "n_common": int(len(common)),
                "delta_mean_common_mev": float(shared["delta_mev"].mean()) if len(shared) else math.nan,
                "delta_median_common_mev": float(shared["delta_mev"].median()) if len(shared) else math.nan,
                "v0_mae_wien2k": _mae(ok["v0_error_wien2k"]),
                "b0_mae_wien2k": _mae(ok["b0_error_wien2k"]),
                "b0_prime_mae_wien2k": _mae(ok["b0_prime_error_wien2k"]),
                "v0_mae_exp": _mae(ok["v0_error_exp"]),
                "b0_mae_exp": _mae(ok["b0_error_exp"]),
                "n_v0_outside_sampled_range": int((~ok["v0_in_range"].astype(bool)).sum()),
                "n_implausible": implausible_elements(df),
                "potential": provenance_text(df.attrs.get("potential") or {}),
            }
        )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
