"""Our κ_SRME metrics (SRD, SRE, SRME) against the Matbench Discovery leaderboard's own code, on
the same per-material inputs.

    python benchmarks/kappa_vs_leaderboard.py CHECKOUT [results/discovery/phonons/*/*/kappa.json] \
        [--synthetic N] [--reference KAPPAS_PBE]

CHECKOUT is a checkout of janosh/matbench-discovery (the commit config/sources.yaml pins for the
discovery files), e.g. ``git --git-dir=MIRROR archive <commit> matbench_discovery | tar x -C CHECKOUT``.
Its ``matbench_discovery/metrics/phonons.py`` runs as it is, read from that path; only what it
imports from elsewhere is stood in for: pymatviz's ``Key`` and the leaderboard's ``MbdKey`` (the
column names, as plain strings), its data/enums modules (file references, the model list) and its
``phonons.thermal_conductivity`` (needed only for rows without mode conductivities, which ours
always have). Its ``calc_kappa_metrics_from_dfs(df_pred, df_true)`` scores each row.

The inputs: our per-material result files (kappa.json of the conductivity jobs), and
``--synthetic N`` other materials of the PBE reference with every mode conductivity scaled by a random
factor (a tenth of them marked as failed with imaginary modes), so that all of the code's paths
run on the 103 real mode sets without a potential. Both sides read the same reference (the pinned
kappas_phononDB_PBE_noNAC.json.gz, default the one shipped in data/k-srme/).

Prints the largest absolute difference of each metric over the materials and of the means; exit
status 1 when any exceeds --atol (1e-12).
"""

from __future__ import annotations

import argparse
import math
import sys
from enum import StrEnum
from pathlib import Path

from leaderboard_checkout import load_module, stand_in

KEYS = {
    "mat_id": "material_id",
    "srme": "srme",
    "sre": "sre",
    "srd": "srd",
    "mode_weights": "mode_weights",
    "has_imag_ph_modes": "has_imag_ph_modes",
    "ph_freqs": "ph_freqs",
    "heat_capacity": "heat_capacity",
    "init_spg_num": "init_spg_num",
    "final_spg_num": "final_spg_num",
    "spg_num": "spg_num",
    "q_points": "q_points",
}
MBD_KEYS = (
    "kappa_tot_rta",
    "kappa_tot_avg",
    "kappa_p_rta",
    "kappa_c",
    "mode_kappa_tot_rta",
    "mode_kappa_tot_avg",
    "true_kappa_tot_avg",
)


def load_leaderboard(checkout: Path):
    """The leaderboard's metrics/phonons.py from ``checkout``, its outside imports stood in for."""
    phonons = stand_in("matbench_discovery.phonons", [])
    phonons.thermal_conductivity = stand_in("matbench_discovery.phonons.thermal_conductivity")
    return load_module(
        checkout,
        "matbench_discovery/metrics/phonons.py",
        mbd_keys=MBD_KEYS,
        data_names=("file_ref_name", "make_file_ref"),
        enum_names=("DataFiles", "Model"),
        others=(
            stand_in("pymatviz", []),
            stand_in("pymatviz.enums", Key=StrEnum("Key", KEYS)),
            phonons,
            phonons.thermal_conductivity,
        ),
    )


def inputs(results: list[Path], synthetic: int, reference: dict, seed: int = 0) -> list[dict]:
    """Per-material results in our file's layout: the given files, then the synthetic ones."""
    import numpy as np

    from crucible.core.io import read_json

    out = []
    for p in results:
        doc = read_json(p)
        if any(r["mp_id"] == doc["mp_id"] for r in out):
            sys.exit(f"{p}: a second result of {doc['mp_id']}; the leaderboard's code scores one per material")
        out.append(doc)
    rng = np.random.default_rng(seed)
    given = {r["mp_id"] for r in out}
    for k, (mp_id, ref) in enumerate([item for item in reference.items() if item[0] not in given][:synthetic]):
        mode = np.asarray(ref["mode_kappa_TOT_ave"], dtype=float) * rng.uniform(
            0.2, 3.0, size=np.shape(ref["mode_kappa_TOT_ave"])
        )
        weights = np.asarray(ref["weights"], dtype=float)
        kappa = mode.sum(axis=(1, 2)) / weights.sum()
        # the diagonal of a Voigt tensor whose average is kappa; off-diagonals are ignored by both
        voigt = np.concatenate([np.repeat(kappa[:, None], 3, axis=1), rng.normal(size=(len(kappa), 3))], axis=1)
        mode_voigt = np.concatenate([np.repeat(mode[..., None], 3, axis=-1), np.zeros(mode.shape + (3,))], axis=-1)
        imag = k % 10 == 9
        out.append(
            {
                "mp_id": mp_id,
                "failure": "imaginary modes (synthetic)" if imag else None,
                "has_imaginary_modes": imag,
                "kappa_TOT_RTA": voigt.tolist(),
                "kappa_TOT_ave": kappa.tolist(),
                "mode_kappa_TOT": mode_voigt.tolist(),
                "mode_kappa_TOT_ave": mode.tolist(),
                "weights": weights.tolist(),
            }
        )
    return out


def theirs(lb, results: list[dict], reference: dict):
    import numpy as np
    import pandas as pd

    pred, true = [], []
    for r in results:
        failed = r.get("failure") is not None
        pred.append(
            {
                "material_id": r["mp_id"],
                "kappa_tot_rta": np.nan if failed else np.asarray(r["kappa_TOT_RTA"], dtype=float),
                "mode_kappa_tot_rta": np.nan if failed else np.asarray(r["mode_kappa_TOT"], dtype=float),
                "mode_weights": np.nan if failed else np.asarray(r["weights"], dtype=float),
                "has_imag_ph_modes": bool(r.get("has_imaginary_modes")),
            }
        )
        ref = reference[r["mp_id"]]
        true.append(
            {
                "material_id": r["mp_id"],
                "kappa_tot_avg": np.asarray(ref["kappa_TOT_ave"], dtype=float),
                "mode_kappa_tot_avg": np.asarray(ref["mode_kappa_TOT_ave"], dtype=float),
            }
        )
    df_pred = pd.DataFrame(pred).set_index("material_id")
    df_true = pd.DataFrame(true).set_index("material_id")
    df = lb.calc_kappa_metrics_from_dfs(df_pred, df_true)
    return {
        mp: {"SRD": float(row["srd"]), "SRE": float(row["sre"]), "SRME": float(row["srme"])}
        for mp, row in df.iterrows()
    }


def main(argv: list[str] | None = None) -> int:
    from crucible.discovery.phonons.metrics import means, score
    from crucible.discovery.phonons.report import read_reference

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path)
    parser.add_argument("results", type=Path, nargs="*")
    parser.add_argument("--synthetic", type=int, default=103)
    parser.add_argument("--reference", type=Path, default=Path("data/k-srme/data/kappas_phononDB_PBE_noNAC.json.gz"))
    parser.add_argument("--atol", type=float, default=1e-12)
    args = parser.parse_args(argv)
    lb = load_leaderboard(args.checkout)
    reference = read_reference(args.reference)
    rows = inputs(args.results, args.synthetic, reference)
    lb_scores = theirs(lb, rows, reference)
    ours = {r["mp_id"] + f"#{i}": score(r, reference[r["mp_id"]]) for i, r in enumerate(rows)}
    worst = 0.0
    for metric in ("SRD", "SRE", "SRME"):
        d = max(abs(o[metric] - lb_scores[key.split("#")[0]][metric]) for key, o in ours.items())
        print(f"{metric}: {len(ours)} materials, largest |ours - leaderboard's| = {d:.3g}")
        worst = max(worst, d)
    ours_means = means(list(ours.values()))
    lb_means = {m: sum(v[m] for v in lb_scores.values()) / len(lb_scores) for m in ("SRD", "SRE", "SRME")}
    if len(lb_scores) == len(ours):
        for m in ("SRD", "SRE", "SRME"):
            print(f"mean {m}: ours {ours_means[m]:.12f}, leaderboard's {lb_means[m]:.12f}")
            worst = max(worst, abs(ours_means[m] - lb_means[m]))
    ok = worst <= args.atol and all(math.isfinite(v["SRME"]) for v in lb_scores.values())
    print("equal" if ok else f"DIFFERENT (largest difference {worst:.3g} > {args.atol})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
