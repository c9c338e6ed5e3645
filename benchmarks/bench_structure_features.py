"""Cost and equality of crucible's structure features vs matminer, and CHGNet embedding cost.

Same run, same structures, one core:

1. Sine Coulomb matrix eigenvalues: matminer's ``SineCoulombMatrix`` (fit on all, then
   ``featurize`` per pymatgen ``Structure``) vs ``crucible.features.sine_coulomb`` starting from
   the stored JSON strings (parsing included, as the cache build does). Equality is bit-for-bit
   on every eigenvalue and on the zero padding.
2. ``mlip-embed``'s embedding step: CHGNet 0.3.0 crystal feature vectors on the CPU, batch size
   16, reported per 1,000 structures.

Structures: the 71 Delta-test crystals (``ase.collections.dcdft``) and the 47 Materials Project
Li-O entries of the pinned m3gnet wheel (fetched, hash-checked, into the test cache), optionally
the first ``--perov N`` cells of a CDVAE perov-5 CSV (``--perov-csv``). Reports wall time and
CPU time of this process (on a loaded shared machine the CPU time is the steadier number).

    nice .venv/bin/python benchmarks/bench_structure_features.py
    nice .venv/bin/python benchmarks/bench_structure_features.py --perov-csv ../shared/data/cdvae/perov_5_test.csv --perov 1000
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402


def real_structures(perov_csv: str | None, n_perov: int):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import conftest

    sets = {
        "delta71": [s for _, s in conftest.delta_structures()],
        "li_o47": [s for _, s, _, _ in conftest.li_o_structures()],
    }
    if perov_csv:
        import pandas as pd
        from pymatgen.core import Structure

        cifs = pd.read_csv(perov_csv, usecols=["cif"], nrows=n_perov)["cif"]
        sets[f"perov5_{len(cifs)}"] = [Structure.from_str(c, fmt="cif") for c in cifs]
    return sets


def timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def bench_scm(name, structures):
    from matminer.featurizers.structure import SineCoulombMatrix

    from crucible.features.sine_coulomb import sine_coulomb_eigenvalues
    from crucible.features.structures import parse_structure

    texts = [s.to_json() for s in structures]
    featurizer = SineCoulombMatrix().fit(structures)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, wall_m, cpu_m = timed(lambda: [featurizer.featurize(s) for s in structures])
    ours, wall_o, cpu_o = timed(lambda: sine_coulomb_eigenvalues([parse_structure(t) for t in texts]))
    n = len(structures)
    values = sum(len(r) for r in ref)
    same = sum(int(np.array_equal(r[: len(o)], o) and not r[len(o) :].any()) for r, o in zip(ref, ours))
    print(
        f"SCM {name}: {n} structures ({np.mean([len(s) for s in structures]):.1f} sites mean, "
        f"{max(len(s) for s in structures)} max), {values} values incl. padding"
    )
    print(f"  matminer {1e3 * wall_m / n:8.3f} ms/structure wall, {1e3 * cpu_m / n:8.3f} ms CPU")
    print(
        f"  crucible {1e3 * wall_o / n:8.3f} ms/structure wall, {1e3 * cpu_o / n:8.3f} ms CPU "
        f"(ratio {cpu_m / cpu_o:.1f}x CPU, {wall_m / wall_o:.1f}x wall)"
    )
    print(f"  bit-identical structures: {same}/{n}")


def bench_chgnet(name, structures):
    import torch

    torch.set_num_threads(1)
    from crucible.features.mlip_embed import chgnet_embeddings

    texts = [s.to_json() for s in structures]
    chgnet_embeddings(texts[:2], device="cpu")  # warm-up: imports, first-call allocations
    values, wall, cpu = timed(lambda: chgnet_embeddings(texts, device="cpu"))
    n = len(structures)
    print(f"CHGNet 0.3.0 embedding {name}: {n} structures, 1 CPU thread, batch 16, shape {values.shape}")
    print(
        f"  {wall:.2f} s wall, {cpu:.2f} s CPU -> per 1,000 structures {1000 * wall / n:.0f} s wall, "
        f"{1000 * cpu / n:.0f} s CPU (one model load included)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--perov-csv", help="CDVAE perov_5 CSV with a 'cif' column")
    ap.add_argument("--perov", type=int, default=1000)
    ap.add_argument("--no-chgnet", action="store_true")
    args = ap.parse_args()
    sets = real_structures(args.perov_csv, args.perov)
    for name, structures in sets.items():
        bench_scm(name, structures)
    if not args.no_chgnet:
        for name, structures in sets.items():
            bench_chgnet(name, structures)


if __name__ == "__main__":
    main()
