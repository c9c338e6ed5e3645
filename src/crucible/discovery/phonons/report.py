"""κ_SRME's outputs as users of the leaderboard expect them: the prediction file of a potential
(``results/discovery/phonons/{potential}.json.gz``, rows that the leaderboard's
``read_kappa_json`` reads), the table of our rows beside the published ``kappa_103`` rows of the
model cards, the per-material table beside the authors' CHGNet run, and the figures."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from crucible.core.errors import DataValidationError
from crucible.core.io import InFile

TITLE = "Matbench Discovery: thermal conductivity of the phononDB crystals (κ_SRME)"
HEADERS = {
    "model": "model",
    "source": "source",
    "materials": "materials",
    "SRME": "κ_SRME",
    "SRE": "κ_SRE",
    "SRD": "κ_SRD",
    "failure_rate": "failure rate",
    "imaginary_mode_rate": "imaginary-mode rate",
    "cpu_s_per_material": "CPU-s per material",
}
CARD_KEYS = {
    "SRME": "κ_SRME",
    "SRE": "κ_SRE",
    "SRD": "κ_SRD",
    "failure_rate": "κ_failure_rate",
    "imaginary_mode_rate": "imaginary_mode_rate",
}


def prediction_row(result: dict) -> dict[str, Any]:
    """One material's row of the leaderboard's prediction format (canonical or alias keys its
    ``normalize_kappa_result`` maps; Voigt tensors, the conductivity at index 0 of temperature)."""
    relax = result.get("relaxation") or {}
    row: dict[str, Any] = {
        "material_id": result["mp_id"],
        "formula": result.get("name"),
        "initial_spg_num": relax.get("initial_spacegroup"),
        "relaxed_spg_num": relax.get("final_spacegroup"),
        "has_imaginary_modes": result.get("has_imaginary_modes"),
        "reached_max_steps": not (
            relax.get("stage1_converged") and (relax.get("stage2_converged") or relax.get("redirected_to_stage1"))
        ),
        "redirected_to_symmetry": relax.get("redirected_to_stage1"),
        "errors": [result["failure"]] if result.get("failure") else [],
        "error_traceback": [],
    }
    if result.get("failure") is None and result.get("kappa_TOT_RTA") is not None:
        row.update(
            kappa_tot_rta=result["kappa_TOT_RTA"],
            kappa_p_rta=result["kappa_P_RTA"],
            kappa_c=result["kappa_C"],
            mode_kappa_tot_rta=result["mode_kappa_TOT"],
            mode_weights=result["weights"],
            q_points=result["qpoints"],
            frequencies=result["frequencies"],
            heat_capacity=result["heat_capacity"],
            temperatures=result["temperatures"],
        )
    else:
        row["conductivity_skipped"] = True
    return row


def read_reference(path: InFile) -> dict[str, dict]:
    """``{mp_id: {kappa_TOT_ave, mode_kappa_TOT_ave, weights, name}}`` of the PBE reference (its
    column-oriented JSON, gzipped), read through its pin."""
    from crucible.core import strict_json
    from crucible.discovery.phonons.structures import REFERENCE_ROLE
    from crucible.sources.pinned_files import pinned

    doc = strict_json.read_json(pinned(REFERENCE_ROLE, path))
    try:
        ids = doc["mp_id"]
        return {
            ids[i]: {key: doc[key][i] for key in ("kappa_TOT_ave", "mode_kappa_TOT_ave", "weights", "name")}
            for i in ids
        }
    except (KeyError, TypeError) as exc:
        raise DataValidationError(f"{path}: not the phononDB reference's layout (missing {exc})") from None


_ROW = re.compile(r"^(\S+)\s+(\S+-(?:rs|zb|wz))\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*\\?$")
_FLAGS = re.compile(r"^(\S+)\s+(True|False)\s+\[.*\]\s+(True|False)\s*$")


def read_published_run(path: InFile) -> dict[str, dict]:
    """The authors' per-material CHGNet numbers of ``metrics.txt`` (a printed table in two
    blocks): ``{mp_id: {desc, SRME, SRE, kappa_TOT_ave, DFT_kappa_TOT_ave, imaginary_freqs, failed}}``."""
    from crucible.discovery.phonons.structures import PUBLISHED_CHGNET_ROLE
    from crucible.sources.pinned_files import pinned

    rows: dict[str, dict] = {}
    for line in Path(pinned(PUBLISHED_CHGNET_ROLE, path)).read_text(encoding="utf-8").splitlines():
        if m := _ROW.match(line):
            rows[m[1]] = {
                "desc": m[2],
                "SRME": float(m[3]),
                "SRE": float(m[4]),
                "kappa_TOT_ave": float(m[5]),
                "DFT_kappa_TOT_ave": float(m[6]),
            }
        elif (m := _FLAGS.match(line)) and m[1] in rows:
            rows[m[1]].update(imaginary_freqs=m[2] == "True", failed=m[3] == "True")
    if len(rows) < 1:
        raise DataValidationError(f"{path}: no per-material rows found")
    return rows


def published_rows(cards: list[InFile]) -> list[dict]:
    """The ``metrics.phonons.kappa_103`` rows of the model cards."""
    from crucible.core.yaml_files import load_mapping

    out = []
    for card in cards:
        doc = load_mapping(Path(card)) or {}
        block = ((doc.get("metrics") or {}).get("phonons") or {}).get("kappa_103")
        if not isinstance(block, dict):
            continue
        row: dict[str, Any] = {
            "model": str(doc.get("model_key") or Path(card).stem),
            "source": "published",
            "materials": 103,
        }
        for ours, theirs in CARD_KEYS.items():
            value = block.get(theirs)
            if value is not None and not isinstance(value, (int, float)):
                raise DataValidationError(f"{card}: metrics.phonons.kappa_103.{theirs}: {value!r} is not a number")
            row[ours] = float(value) if value is not None else math.nan
        out.append(row)
    return sorted(out, key=lambda r: (r["SRME"] if math.isfinite(r["SRME"]) else 9, r["model"]))


def material_table(scores: dict, published: dict[str, dict]) -> list[dict]:
    """Ours per material beside the authors' run (for a CHGNet potential; else beside nothing)."""
    out = []
    for r in scores["materials"]:
        p = published.get(r["mp_id"], {})
        row = {
            "mp_id": r["mp_id"],
            "material": r["desc"],
            "kappa": r["kappa_TOT_ave"],
            "kappa_published": p.get("kappa_TOT_ave", math.nan),
            "kappa_DFT": r["DFT_kappa_TOT_ave"],
            "SRME": r["SRME"],
            "SRME_published": p.get("SRME", math.nan),
            "failure": r.get("failure") or "",
            "failed_published": p.get("failed"),
            "cpu_s": r.get("cpu_s", math.nan),
        }
        k, kp = row["kappa"], row["kappa_published"]
        row["kappa_diff_pct"] = 100 * (k - kp) / kp if math.isfinite(k) and math.isfinite(kp) and kp else math.nan
        row["SRME_diff"] = row["SRME"] - row["SRME_published"]
        out.append(row)
    return out


def kappa_figure(scores_by_potential: dict[str, dict]):
    """κ ours against PBE, log–log, a colour per potential; failures left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    points = {
        pot: [
            (r["DFT_kappa_TOT_ave"], r["kappa_TOT_ave"])
            for r in scores["materials"]
            if math.isfinite(r["kappa_TOT_ave"]) and r["kappa_TOT_ave"] > 0
        ]
        for pot, scores in scores_by_potential.items()
    }
    values = [v for pts in points.values() for pt in pts for v in pt]
    # the PBE set's range (0.1…1,000 W/m/K), widened to every point: a potential's wild κ is shown, not clipped
    lo, hi = min([0.05, *(v / 1.5 for v in values)]), max([2000.0, *(v * 1.5 for v in values)])
    for k, (pot, scores) in enumerate(sorted(scores_by_potential.items())):
        pts = points[pot]
        if pts:
            x, y = np.array(pts).T
            ax.scatter(
                x,
                y,
                s=18,
                alpha=0.8,  # the same material of two potentials may overlap
                color=plt.get_cmap("tab10")(k % 10),
                label=f"{pot} ({len(pts)} of {len(scores['materials'])})",
            )
    ax.plot([lo, hi], [lo, hi], color="0.5", lw=0.8)
    ax.set(
        xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="κ PBE (W/m/K)", ylabel="κ potential (W/m/K)"
    )
    ax.legend(fontsize=8)
    ax.set_title("Wigner conductivity at 300 K", fontsize=10)
    fig.tight_layout()
    return fig


def srme_figure(scores_by_potential: dict[str, dict]):
    """SRME per material, a bar per potential; 2 is a failure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    materials = sorted(
        {(r["mp_id"], r["desc"]) for s in scores_by_potential.values() for r in s["materials"]}, key=lambda t: t[1]
    )
    pots = sorted(scores_by_potential)
    fig, ax = plt.subplots(figsize=(max(5, 0.25 * len(materials) * max(1, len(pots)) + 2), 4))
    width = 0.8 / max(1, len(pots))
    for k, pot in enumerate(pots):
        rows = {r["mp_id"]: r for r in scores_by_potential[pot]["materials"]}
        xs = np.arange(len(materials)) + k * width
        srme = [rows[m]["SRME"] if m in rows else math.nan for m, _ in materials]
        failed = [bool(rows[m].get("failed")) if m in rows else False for m, _ in materials]
        mean = np.mean([rows[m]["SRME"] for m in rows])
        bars = ax.bar(xs, srme, width=width, color=plt.get_cmap("tab10")(k % 10), label=f"{pot} (mean {mean:.3f})")
        for bar, f in zip(bars, failed):
            if f:  # a failure is scored 2: hatched, so it is not read as a computed SRME of 2
                bar.set_hatch("//")
                bar.set_edgecolor("white")
    centers = np.arange(len(materials)) + 0.4 - width / 2
    ax.set_xticks(centers, [d for _, d in materials], rotation=90, fontsize=7)
    side = 1.0 if len(materials) == 1 else 0.5  # one material: a bar, not the whole width
    xlim = (centers[0] - side, centers[-1] + side) if len(materials) else None
    ax.set(ylim=(0, 2.05), xlim=xlim, ylabel="SRME (hatched: failed, scored 2)")
    ax.set_title("Mode-resolved SRME per material", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
