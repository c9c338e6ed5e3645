"""Throughput and equality of ``crucible.features.magpie`` vs matminer's magpie preset.

Same run, same formulas, one core: matminer's ``ElementProperty.from_preset("magpie")`` on
``pymatgen.Composition(formula)`` for a seeded sample of distinct mp_e_form formulas, ours on
that sample and on all distinct formulas of the 13 tasks. Every timing is the best of
``--repeat`` runs for ours (matminer runs once: it is slow and steady). Prints time per
composition, the ratio, and the equality check (max relative difference, NaN agreement).

Formulas come from ``results/matbench/data/*.parquet`` when ``--data`` is given, else from
the pinned CrabNet wheel (via ``tests/_formulas.py``, downloaded once into the user cache).

    nice .venv/bin/python benchmarks/bench_featurizer.py              # ~10 s
    nice .venv/bin/python benchmarks/bench_featurizer.py --full       # + matminer on all (~4 min)
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core, for both sides

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def load_formulas(data: list[str]) -> dict[str, list[str]]:
    if data:
        return {Path(p).stem: pd.read_parquet(p, columns=["formula"])["formula"].tolist() for p in data}
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import _formulas

    return _formulas.task_formulas()


def matminer_features(formulas: list[str]) -> tuple[np.ndarray, float, float]:
    from matminer.featurizers.composition import ElementProperty
    from pymatgen.core import Composition

    featurizer = ElementProperty.from_preset("magpie")
    featurizer.featurize(Composition("NaCl"))  # warm-up: tables, imports
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0, c0 = time.perf_counter(), time.process_time()
        out = np.array([featurizer.featurize(Composition(f)) for f in formulas], dtype=float)
        return out, time.perf_counter() - t0, time.process_time() - c0


def ours_features(formulas: list[str], repeat: int) -> tuple[np.ndarray, float, float]:
    from crucible.features import magpie_features as magpie

    magpie(["NaCl"])  # warm-up: pymatgen's element list
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = magpie(formulas).to_numpy()
        best, best_cpu = min(best, time.perf_counter() - t0), min(best_cpu, time.process_time() - c0)
    return out, best, best_cpu


def compare(ours: np.ndarray, ref: np.ndarray, formulas: list[str]) -> dict:
    nan_ours, nan_ref = np.isnan(ours), np.isnan(ref)
    both = ~nan_ours & ~nan_ref
    diff = np.abs(ours - ref)
    scale = np.abs(ref)
    rel = np.where(scale > 0, diff / np.where(scale > 0, scale, 1.0), diff)
    rel = np.where(both, rel, 0.0)
    bad_rows = np.flatnonzero(((rel > 1e-9) & both).any(axis=1) | (nan_ours != nan_ref).any(axis=1))
    return {
        "formulas": len(formulas),
        "values": ours.size,
        "identical_values": int((ours == ref).sum() + (nan_ours & nan_ref).sum()),
        "max_rel_diff": float(rel.max()) if rel.size else 0.0,
        "nan_mismatch": int((nan_ours != nan_ref).sum()),
        "nan_values": int(nan_ref.sum()),
        "rows_over_1e-9": len(bad_rows),
        "examples": [formulas[i] for i in bad_rows[:5]],
    }


def report(title: str, res: dict) -> None:
    print(
        f"{title}: {res['formulas']} formulas, {res['identical_values']}/{res['values']} values "
        f"bit-identical, max relative difference {res['max_rel_diff']:.3g}, NaN in matminer "
        f"{res['nan_values']}, NaN mismatches {res['nan_mismatch']}, rows over 1e-9: "
        f"{res['rows_over_1e-9']} {res['examples']}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="*", default=[], help="results/matbench/data/{task}.parquet files")
    ap.add_argument("--sample", type=int, default=3000, help="mp_e_form formulas for the matminer timing")
    ap.add_argument("--sample-task", default="matbench_mp_e_form")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--full", action="store_true", help="matminer on every distinct formula (minutes)")
    args = ap.parse_args()

    tasks = load_formulas(args.data)
    everything = sorted({f for fs in tasks.values() for f in fs})
    pool = sorted(set(tasks[args.sample_task]))
    rng = np.random.default_rng(args.seed)
    sample = [pool[i] for i in rng.choice(len(pool), min(args.sample, len(pool)), replace=False)]
    print(f"{len(tasks)} tasks, {sum(map(len, tasks.values()))} rows, {len(everything)} distinct formulas")

    ref, t_mm, c_mm = matminer_features(sample)
    ours, t_ours, c_ours = ours_features(sample, args.repeat)
    _, t_all, c_all = ours_features(everything, args.repeat)
    n_s, n_a = len(sample), len(everything)
    # wall and CPU time per composition in microseconds; CPU time is steadier on a shared machine
    print(f"{'':44s} {'wall us/comp':>13s} {'cpu us/comp':>12s} {'ratio wall':>11s} {'ratio cpu':>10s}")
    print(f"{f'matminer, {n_s} {args.sample_task} formulas':44s} {t_mm / n_s * 1e6:13.2f} {c_mm / n_s * 1e6:12.2f}")
    print(
        f"{f'ours, the same {n_s} formulas':44s} {t_ours / n_s * 1e6:13.2f} {c_ours / n_s * 1e6:12.2f} "
        f"{t_mm / t_ours:10.1f}x {c_mm / c_ours:9.1f}x"
    )
    print(
        f"{f'ours, all {n_a} distinct formulas':44s} {t_all / n_a * 1e6:13.2f} {c_all / n_a * 1e6:12.2f} "
        f"{(t_mm / n_s) / (t_all / n_a):10.1f}x {(c_mm / n_s) / (c_all / n_a):9.1f}x   ({t_all:.2f} s wall)"
    )
    report("equality on the sample", compare(ours, ref, sample))

    if args.full:
        ref_all, t_mm_all, c_mm_all = matminer_features(everything)
        ours_all, _, _ = ours_features(everything, 1)
        print(
            f"matminer, all {n_a} distinct formulas: {t_mm_all / n_a * 1e6:.2f} us/composition wall, "
            f"{c_mm_all / n_a * 1e6:.2f} cpu ({t_mm_all:.0f} s); ratio to ours {c_mm_all / c_all:.1f}x cpu"
        )
        report("equality on all distinct formulas", compare(ours_all, ref_all, everything))
    return 0


if __name__ == "__main__":
    sys.exit(main())
