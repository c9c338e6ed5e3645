"""Accuracy of ``comp-transformer`` on the official Matbench v0.1 folds, next to CrabNet.

Data: the composition mirror (``crabnet/data/matbench/<name>.csv`` in the CrabNet wheel that
``config/sources.yaml`` pins, SHA-256 checked). Folds: ``KFold(5, shuffle=True, random_state=18012019)`` over the
CSV's row order, which reproduces matbench's official test ids. Inner validation: 25% of each
training fold, seed 7 (as in ``config/config.yaml``). Test rows are only used for scoring.

    nice .venv/bin/python benchmarks/accuracy_comp_transformer.py --tasks steels jdft2d phonons
    # the three large tasks, on a GPU node (expected time: profiles/slurm/README.md)
    srun -p <gpu-partition> --gpus=1 --cpus-per-gpu=4 --time=04:00:00 .venv/bin/python \
        benchmarks/accuracy_comp_transformer.py --tasks perovskites mp_gap mp_e_form --device cuda --threads 4

Prints one line per fold and a table: mean ± std (ddof=0, as matbench) MAE vs CrabNet.
Per-task results go to ``--out`` as JSON.

Measured here (CPU, 1 thread per run, shared 2-core machine; composition-only on every task,
since the mirror carries formulas only). Settings = the model's size-dependent defaults
(refit on train+val, SWA over the last 20% of the refit, batch 32, 44 for dielectric; 5 seeds for steels, 3 for
jdft2d, 1 otherwise), except phonons, run before SWA existed (swa_frac=0 equivalent):

| task | comp-transformer MAE (mean ± std, 5 folds) | CrabNet | per fold |
|---|---|---|---|
| steels | 97.4975 ± 15.7411 | 107.3160 | 127.18 85.60 93.98 97.53 83.21 |
| jdft2d | 46.0069 ± 10.2650 | 45.6104 | 34.32 43.06 61.83 37.34 53.49 |
| phonons | 47.0309 ± 3.9386 | 55.1114 | 49.13 44.44 41.93 53.35 46.30 |
| dielectric | 0.3192 ± 0.0815 | 0.3234 | 0.2051 0.2719 0.4505 0.3454 0.3231 |
| expt_gap | 0.3320 ± 0.0195 | 0.3463 | 0.3451 0.3006 0.3447 0.3179 0.3517 |

log_gvrh and log_kvrh were not run (about 2.5x dielectric's cost per fold; no time left).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import KFold, train_test_split

from crucible.matbench.tasks import mirror_role
from crucible.models.comp_transformer import CompTransformer
from crucible.sources.pinned_files import find_pin, load_sources

# Every file name and hash comes from config/sources.yaml, asked for by role: the artifact that
# holds the composition mirror (its wheel) and, in it, each task's CSV and the mat2vec table.
SOURCES = load_sources(Path(__file__).resolve().parents[1] / "config" / "sources.yaml")
MIRROR = find_pin(mirror_role("matbench_steels"), SOURCES).artifact
CRABNET = SOURCES["artifacts"][MIRROR]
WHEEL_SHA256 = CRABNET["sha256"]
MAT2VEC = find_pin("element-table/mat2vec", SOURCES)
# task -> CrabNet's mean MAE on the Matbench v0.1 leaderboard (as in config/published_matbench.yaml)
CRABNET_MAE = {
    "steels": 107.3160,
    "jdft2d": 45.6104,
    "phonons": 55.1114,
    "expt_gap": 0.3463,
    "dielectric": 0.3234,
    "log_gvrh": 0.1014,
    "log_kvrh": 0.0758,
    "perovskites": 0.4065,
    "mp_gap": 0.2655,
    "mp_e_form": 0.0862,
}
# task -> (file in the wheel, its SHA-256, CrabNet mean MAE)
TASKS = {
    task: (
        CRABNET["members"][find_pin(mirror_role(f"matbench_{task}"), SOURCES).member]["path"],
        find_pin(mirror_role(f"matbench_{task}"), SOURCES).sha256,
        mae,
    )
    for task, mae in CRABNET_MAE.items()
}
DEFAULT_WHEEL = Path.home() / ".cache" / "crucible-tests" / CRABNET["filename"]


def _member(wheel: Path, name: str, sha: str) -> bytes:
    data = zipfile.ZipFile(wheel).read(name)
    got = hashlib.sha256(data).hexdigest()
    if got != sha:
        raise SystemExit(f"{wheel}:{name}: SHA-256 {got} != pinned {sha}")
    return data


def prepare(wheel: Path, workdir: Path) -> Path:
    """Check the wheel and extract the mat2vec table; returns its path."""
    if hashlib.sha256(wheel.read_bytes()).hexdigest() != WHEEL_SHA256:
        raise SystemExit(f"{wheel}: SHA-256 differs from the pinned {MIRROR} wheel")
    workdir.mkdir(parents=True, exist_ok=True)
    table = workdir / MAT2VEC.member
    if not table.exists():
        if MAT2VEC.artifact != MIRROR:
            raise SystemExit(f"the mat2vec table is pinned in {MAT2VEC.artifact}, not in the mirror's {MIRROR}")
        table.write_bytes(_member(wheel, CRABNET["members"][MAT2VEC.member]["path"], MAT2VEC.sha256))
    return table


def load_task(wheel: Path, task: str) -> pd.DataFrame:
    name, sha, _ = TASKS[task]
    return pd.read_csv(io.BytesIO(_member(wheel, name, sha)))


def run_task(task: str, df: pd.DataFrame, table: Path, params: dict, folds: list[int], device: str, threads: int):
    splits = list(KFold(n_splits=5, shuffle=True, random_state=18012019).split(df))
    out = []
    for k in folds:
        train, test = splits[k]
        inner_tr, inner_val = train_test_split(train, test_size=0.25, random_state=7)
        model = CompTransformer(element_table=str(table), device=device, num_threads=threads, random_state=k, **params)
        t0 = time.perf_counter()
        model.fit(
            df.formula.iloc[inner_tr], df.target.iloc[inner_tr], df.formula.iloc[inner_val], df.target.iloc[inner_val]
        )
        pred = model.predict(df.formula.iloc[test])
        mae = float(np.mean(np.abs(pred - df.target.to_numpy()[test])))
        info = {k2: v for k2, v in model.fit_info_.items() if k2 != "history"}
        out.append({"fold": k, "mae": mae, "seconds": round(time.perf_counter() - t0, 1), **info})
        print(
            f"{task} fold {k}: MAE {mae:.4f}  epochs {info['epochs_run']} (best {info['best_epoch']})  "
            f"{out[-1]['seconds']} s on {info['device']}",
            flush=True,
        )
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", default=["steels", "jdft2d", "phonons"], choices=sorted(TASKS))
    ap.add_argument("--folds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--params", default="{}", help="JSON of CompTransformer parameters")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--wheel", type=Path, default=DEFAULT_WHEEL)
    ap.add_argument("--workdir", type=Path, default=Path.home() / ".cache" / "crucible-tests")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/comp_transformer"))
    args = ap.parse_args(argv)
    params = json.loads(args.params)
    table = prepare(args.wheel, args.workdir)
    rows = []
    for task in args.tasks:
        res = run_task(task, load_task(args.wheel, task), table, params, args.folds, args.device, args.threads)
        maes = np.array([r["mae"] for r in res])
        summary = {
            "task": task,
            "params": params,
            "folds": res,
            "mean_mae": float(maes.mean()),
            "std_mae": float(maes.std()),
            "crabnet_mae": TASKS[task][2],
        }
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{task}.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
        rows.append(summary)
    print("\n| task | folds | comp-transformer MAE (mean ± std) | CrabNet | better |")
    print("|---|---|---|---|---|")
    for r in rows:
        better = "yes" if r["mean_mae"] < r["crabnet_mae"] else "no"
        print(
            f"| {r['task']} | {len(r['folds'])} | {r['mean_mae']:.4f} ± {r['std_mae']:.4f} | {r['crabnet_mae']:.4f} | {better} |"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
