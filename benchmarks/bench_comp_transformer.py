"""Training and inference throughput of ``comp-transformer`` on CPU (samples per second).

Real data: expt_gap (the composition mirror in the pinned CrabNet wheel), official fold 0. Trains
on a subset of the fold's training rows for a few epochs with the default architecture and
times the epochs (formula parsing excluded: it is cached and done once per fold), then times
batched inference over the fold's 921 test rows, cold (parsing included) and warm.

    nice .venv/bin/python benchmarks/bench_comp_transformer.py --threads 1
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import accuracy_comp_transformer as acc  # same folder: wheel check and data loading
import numpy as np
import torch
from sklearn.model_selection import KFold

from crucible.models.comp_transformer import CompTransformer, encode_formulas, parse_formula


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", type=int, default=1000, help="training rows")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--wheel", type=Path, default=acc.DEFAULT_WHEEL)
    ap.add_argument("--workdir", type=Path, default=Path.home() / ".cache" / "crucible-tests")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    table = acc.prepare(args.wheel, args.workdir)
    df = acc.load_task(args.wheel, "expt_gap")
    train, test = next(KFold(5, shuffle=True, random_state=18012019).split(df))
    train = train[: args.rows]
    X, y = df.formula.iloc[train], df.target.iloc[train]
    model = CompTransformer(
        element_table=str(table),
        epochs=args.epochs,
        batch_size=args.batch_size,
        device="cpu",
        num_threads=args.threads,
        patience=0,
    )
    encode_formulas(X, [s for s in pd_symbols(table)])  # warm the formula cache
    t0, c0 = time.perf_counter(), time.process_time()
    model.fit(X, y)
    fit_s, fit_cpu = time.perf_counter() - t0, time.process_time() - c0
    train_sps = len(train) * args.epochs / fit_s

    parse_formula.cache_clear()
    Xt = df.formula.iloc[test]
    t0 = time.perf_counter()
    model.predict(Xt)
    cold_s = time.perf_counter() - t0
    reps = 5
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(reps):
        pred = model.predict(Xt)
    warm_s, warm_cpu = (time.perf_counter() - t0) / reps, (time.process_time() - c0) / reps
    mae = float(np.mean(np.abs(pred - df.target.to_numpy()[test])))

    print(
        f"comp-transformer on CPU, {args.threads} thread(s), torch {torch.__version__}, "
        f"{model.fit_info_['n_parameters']} parameters, d_model={model.d_model}, layers={model.n_layers}"
    )
    print(
        f"training : {len(train)} rows x {args.epochs} epochs, batch {args.batch_size}: "
        f"{fit_s:.2f} s -> {train_sps:,.0f} samples/s wall; "
        f"{len(train) * args.epochs / fit_cpu:,.0f} samples per CPU-second"
    )
    print(
        f"inference: {len(test)} rows, batch {model.inference_batch_size}: cold (parsing) {cold_s:.3f} s -> "
        f"{len(test) / cold_s:,.0f} samples/s; warm {warm_s:.3f} s -> {len(test) / warm_s:,.0f} samples/s wall, "
        f"{len(test) / warm_cpu:,.0f} per CPU-second"
    )
    print(
        f"(the machine is shared: wall-clock rates depend on load, {os.getloadavg()[0]:.1f} now; "
        "per-CPU-second rates do not, as long as threads <= free cores)"
    )
    print(f"ratio inference(warm)/training throughput: {len(test) / warm_s / train_sps:.1f}x")
    print(f"(MAE after {args.epochs} epochs on {len(train)} rows, for sanity only: {mae:.3f} eV)")


def pd_symbols(table: Path) -> list[str]:
    import pandas as pd

    return [str(s) for s in pd.read_csv(table, index_col=0).index]


if __name__ == "__main__":
    main()
