"""κ_SRME's per-material metrics and their means, as the benchmark defines them.

With κ the direction average (xx + yy + zz) / 3 of the total (particle + coherence) Wigner
conductivity at 300 K:

- SRD = 2 (κ_ML − κ_DFT) / (κ_ML + κ_DFT), and −2 where there is no finite κ_ML;
- SRE = |SRD|;
- SRME = 2 Σ_q,s |κ_ML,qs − κ_DFT,qs| / W / (κ_ML + κ_DFT), the mode-resolved error: κ_qs the
  direction-averaged conductivity of mode s at irreducible q-point q, as phono3py gives it (already
  multiplied by the q-point's weight), W the sum of the ML run's q-point weights. A failed material
  (relaxation, symmetry, imaginary modes, a non-finite force, no conductivity, modes that do not
  match the reference's) scores 2.

The failure rate is the fraction of materials whose SRME is such a 2; the imaginary-mode rate the
fraction whose harmonic phonons have imaginary modes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from crucible.discovery.phonons.protocol import SRME_FAILED


def _finite(value: Any) -> np.ndarray | None:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    if arr.size == 0 or not np.isfinite(arr).all():
        return None
    return arr


def kappa_average(kappa: Any) -> float:
    """The direction average of one conductivity: a Voigt 6-vector, a 3×3 tensor or a scalar (a
    one-temperature array of either is taken at that temperature); NaN if there is none."""
    arr = _finite(kappa)
    if arr is None:
        return math.nan
    if arr.shape[-2:] == (3, 3):
        arr = np.trace(arr, axis1=-2, axis2=-1) / 3
    elif arr.shape[-1:] == (6,):
        arr = arr[..., :3].mean(axis=-1)
    return float(arr.ravel()[0]) if arr.size == 1 else math.nan


def srd(kappa_ml: float, kappa_dft: float) -> float:
    if not (math.isfinite(kappa_ml) and kappa_ml >= 0):
        return -SRME_FAILED
    total = kappa_ml + kappa_dft
    return 0.0 if total == 0 else 2 * (kappa_ml - kappa_dft) / total


def srme(mode_kappa_ml: Any, weights_ml: Any, kappa_ml: float, mode_kappa_dft: Any, kappa_dft: float) -> float:
    """The mode-resolved SRME of one material; ``mode_kappa_*`` are direction-averaged mode
    conductivities (q, s) or (1, q, s); 2 when the ML side is unusable."""
    ml, dft, w = _finite(mode_kappa_ml), _finite(mode_kappa_dft), _finite(weights_ml)
    if ml is None or w is None or dft is None or ml.squeeze().shape != dft.squeeze().shape or w.sum() <= 0:
        return SRME_FAILED
    if not (math.isfinite(kappa_ml) and kappa_ml >= 0):
        return SRME_FAILED
    error = float(np.abs(ml.squeeze() - dft.squeeze()).sum() / w.sum())
    total = kappa_ml + kappa_dft
    if total == 0:
        return 0.0 if error == 0 else SRME_FAILED
    value = 2 * error / total
    return value if 0 <= value <= SRME_FAILED else SRME_FAILED


def score(result: dict, reference: dict) -> dict[str, Any]:
    """SRD, SRE, SRME of one material's result (a per-material file) against its reference row
    (``kappa_TOT_ave``, ``mode_kappa_TOT_ave``)."""
    kappa_dft = kappa_average(reference["kappa_TOT_ave"])
    failed = result.get("failure") is not None
    kappa_ml = math.nan if failed else kappa_average(result.get("kappa_TOT_ave"))
    d = srd(kappa_ml, kappa_dft)
    value = SRME_FAILED
    if not failed:
        value = srme(
            result.get("mode_kappa_TOT_ave"),
            result.get("weights"),
            kappa_ml,
            reference["mode_kappa_TOT_ave"],
            kappa_dft,
        )
    return {
        "kappa_TOT_ave": kappa_ml,
        "DFT_kappa_TOT_ave": kappa_dft,
        "SRD": d,
        "SRE": abs(d),
        "SRME": value,
        # censored: a 2 that stands for a failure, not a computed error
        "failed": failed or (value == SRME_FAILED and not math.isfinite(kappa_ml)),
        "imaginary_modes": bool(result.get("has_imaginary_modes")),
    }


def means(rows: list[dict]) -> dict[str, float]:
    """Means over the materials run, and the failure and imaginary-mode rates."""
    n = len(rows)
    if n == 0:
        return {
            "materials": 0,
            "SRME": math.nan,
            "SRE": math.nan,
            "SRD": math.nan,
            "failure_rate": math.nan,
            "imaginary_mode_rate": math.nan,
        }
    return {
        "materials": n,
        "SRME": float(np.mean([r["SRME"] for r in rows])),
        "SRE": float(np.mean([r["SRE"] for r in rows])),
        "SRD": float(np.mean([r["SRD"] for r in rows])),
        "failure_rate": sum(bool(r["failed"]) for r in rows) / n,
        "imaginary_mode_rate": sum(bool(r["imaginary_modes"]) for r in rows) / n,
    }
