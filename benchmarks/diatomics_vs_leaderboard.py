"""Our diatomics metrics against the Matbench Discovery leaderboard's own code, on our curve files.

    python benchmarks/diatomics_vs_leaderboard.py CHECKOUT results/discovery/diatomics/*.json.gz \
        [--reference PBE_CURVES]

CHECKOUT is a checkout of janosh/matbench-discovery (the commit config/sources.yaml pins), e.g.
``git --git-dir=MIRROR archive <commit> matbench_discovery site/src/lib | tar x -C CHECKOUT``.
Its metric package ``matbench_discovery/metrics/diatomics/`` (``__init__``, ``energy``, ``force``)
runs as it is, read from that path: it reads our file with ``DiatomicCurves.from_dict``, the PBE
curves with ``load_dft_reference_curves`` and scores with ``calc_diatomic_metrics(...,
interpolate=200)``, the call of its ``models/run_diatomics.py``. Only what that package imports
from the rest of ``matbench_discovery`` is stood in for here (the package root, whose data module
downloads the WBM summary at import time, and the ``MbdKey`` names of the metrics), so
nothing is downloaded. The means are taken as its ``write_metrics_to_yaml`` takes them (over the
finite values), before its rounding to four significant digits.

PBE_CURVES defaults to the checkout's site/src/lib/diatomics-dft.json.gz; either way it is read by
our side through its pin (role discovery/diatomics/pbe-reference).

Prints, per metric, the largest relative and absolute difference over every element and file,
and over the files' means. Exit status 1 when any relative difference exceeds --rtol (1e-9).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from leaderboard_checkout import load_module

METRICS = (
    "pbe_energy_mae",
    "pbe_force_mae",
    "pbe_wall_dist_mae",
    "pbe_bond_length_error",
    "pbe_well_depth_error",
    "pbe_vib_freq_error",
    "tortuosity",
    "energy_diff_flips",
    "energy_jump",
    "force_flips",
    "force_total_variation",
    "force_jump",
)


def load_leaderboard(checkout: Path):
    """The leaderboard's metric package, from ``checkout``, with its imports outside it stood in for."""
    return load_module(
        checkout,
        "matbench_discovery/metrics/diatomics/__init__.py",
        mbd_keys=METRICS,
        data_names=("FileRef", "file_ref_name", "file_ref_url", "make_file_ref", "update_yaml_file"),
        root_attrs={"ROOT": str(checkout), "repo_relative_path": lambda p: p},
    )


def theirs(lb, curves_path: Path, reference: Path) -> dict[str, dict[str, float]]:
    import gzip
    import json

    with gzip.open(curves_path, "rt") as fh:
        pred = lb.DiatomicCurves.from_dict(json.load(fh))
    ref = lb.load_dft_reference_curves("PBE", ref_path=str(reference))
    return lb.calc_diatomic_metrics(ref_curves=ref, pred_curves=pred, interpolate=200)


def ours(curves_path: Path, reference: Path) -> dict[str, dict[str, float]]:
    from crucible.discovery.curves import homo_curves, read_curves
    from crucible.discovery.data import read_reference
    from crucible.discovery.metrics import per_element

    return per_element(homo_curves(read_curves(curves_path)), read_reference(reference))


def mean(values: dict[str, dict[str, float]], metric: str) -> float:
    finite = [v[metric] for v in values.values() if metric in v and math.isfinite(v[metric])]
    return sum(finite) / len(finite) if finite else math.nan  # compared to np.mean within 1e-15


def diff(a: float, b: float) -> tuple[float, float]:
    if math.isnan(a) and math.isnan(b):
        return 0.0, 0.0
    if math.isnan(a) != math.isnan(b):
        return math.inf, math.inf
    d = abs(a - b)
    return d / max(abs(a), abs(b), 1e-300) if d else 0.0, d


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path)
    parser.add_argument("curves", type=Path, nargs="+")
    parser.add_argument(
        "--reference", type=Path, default=None, help="default: the checkout's site/src/lib/diatomics-dft.json.gz"
    )
    parser.add_argument("--rtol", type=float, default=1e-9)
    args = parser.parse_args(argv)
    reference = args.reference or args.checkout / "site" / "src" / "lib" / "diatomics-dft.json.gz"
    lb = load_leaderboard(args.checkout)
    worst = {m: [0.0, 0.0, 0, 0.0] for m in METRICS}  # rel, abs over elements; values compared; rel of the mean
    bad_keys = []
    for path in args.curves:
        a, b = ours(path, reference), theirs(lb, path, reference)
        if set(a) != set(b):
            bad_keys.append(
                f"{path}: elements scored differ: ours only {sorted(set(a) - set(b))}, theirs only {sorted(set(b) - set(a))}"
            )
        for symbol in sorted(set(a) & set(b)):
            if set(a[symbol]) != set(map(str, b[symbol])):
                bad_keys.append(
                    f"{path}: {symbol}: metrics differ: {sorted(a[symbol])} vs {sorted(map(str, b[symbol]))}"
                )
            for m in METRICS:
                if m in a[symbol] and m in b[symbol]:
                    rel, ab = diff(a[symbol][m], float(b[symbol][m]))
                    w = worst[m]
                    w[0], w[1], w[2] = max(w[0], rel), max(w[1], ab), w[2] + 1
        theirs_plain = {s: {str(k): float(v) for k, v in vals.items()} for s, vals in b.items()}
        for m in METRICS:
            worst[m][3] = max(worst[m][3], diff(mean(a, m), mean(theirs_plain, m))[0])
        print(f"{path}: {len(a)} elements scored by ours, {len(b)} by the leaderboard's code")
    print(f"{'metric':24s} {'values':>7s} {'max rel diff':>13s} {'max abs diff':>13s} {'mean rel diff':>13s}")
    for m, (rel, ab, n, rel_mean) in worst.items():
        print(f"{m:24s} {n:7d} {rel:13.3g} {ab:13.3g} {rel_mean:13.3g}")
    for line in bad_keys:
        print(line)
    failed = bad_keys or any(max(w[0], w[3]) > args.rtol for w in worst.values())
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
