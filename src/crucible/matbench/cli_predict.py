"""What ``crucible matbench predict`` and ``crucible matbench user-predict`` share: their
arguments, defined once, and the handler that fits a model on each requested fold.

The two commands differ only in where the task comes from: ``predict`` names an official task
(``--task``), ``user-predict`` reads it from the user dataset's card.
"""

from __future__ import annotations

import argparse
import json
import os

from crucible.matbench.tasks import N_FOLDS


def _model_help() -> str:
    from crucible.models.registry import builtin_models

    return f"built-in: {', '.join(builtin_models())}; or a name in --custom-models (config matbench.custom_models)"


def add_predict_arguments(p: argparse.ArgumentParser) -> None:
    """Every argument but the task."""
    p.add_argument("--model", required=True, help=_model_help())
    p.add_argument(
        "--fold",
        type=int,
        required=True,
        nargs="+",
        choices=range(N_FOLDS),
        help="one fold, or several fitted in turn in this process (one --out each)",
    )
    p.add_argument(
        "--data",
        required=True,
        help="the clean task table: results/matbench/data/{task}.parquet (or a user dataset's data.parquet)",
    )
    p.add_argument("--card", required=True, help="the task card: results/matbench/data/{task}.json")
    p.add_argument("--folds", required=True, help="the folds table: results/matbench/folds/{task}.parquet")
    p.add_argument("--features", help="the task's Magpie feature file (models whose input_kind is magpie)")
    p.add_argument("--structure-features", help="the task's per-structure feature file (structure models)")
    p.add_argument("--params", help="JSON hyperparameter overrides")
    p.add_argument("--custom-models", help="JSON of config's matbench.custom_models")
    p.add_argument(
        "--element-table",
        help="element embedding CSV for composition networks; checked against its pin when the model's "
        "element_table (default mat2vec) names a pinned table",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="random_state for models that take one and do not set it in --params (recorded)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=0,
        help="CPU threads of the fit (OMP/MKL/OpenBLAS variables; 0: leave them as they are)",
    )
    p.add_argument(
        "--out",
        required=True,
        nargs="+",
        help="predictions parquet per --fold (a sidecar .json is written beside each)",
    )
    p.add_argument("--out-model-dir", help="where a model with save() writes its trained state")


def run_predict_command(args: argparse.Namespace, task: str | None = None) -> int:
    """Fit and predict each ``--fold`` into its ``--out``; ``task`` None: the card's task."""
    from crucible.errors import ConfigError

    if len(args.fold) != len(args.out) or len(set(args.fold)) != len(args.fold):
        raise ConfigError(
            f"predict: --fold and --out need one distinct fold per output file "
            f"(--fold {' '.join(map(str, args.fold))}, {len(args.out)} --out files)"
        )
    if args.out_model_dir and len(args.fold) > 1:
        raise ConfigError("predict: --out-model-dir holds one fold's model; give one --fold")
    if args.threads:
        # Before the estimator libraries start their thread pools.
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.threads)
    from crucible.io import read_json
    from crucible.matbench.inference import run_predict
    from crucible.models.registry import get_spec

    spec = get_spec(args.model, json.loads(args.custom_models) if args.custom_models else {})
    params = json.loads(args.params) if args.params else {}
    if args.element_table:
        from crucible.models.element_tables import checked_table

        checked_table(params.get("element_table"), args.element_table)
        params["element_table"] = args.element_table
    card = read_json(args.card)
    # Several folds in one process (per-task jobs of cheap models): fitted in turn, one --out each.
    for fold, out in zip(args.fold, args.out):
        run_predict(
            spec,
            task or card["task"],
            fold,
            args.data,
            args.folds,
            card,
            out,
            params=params,
            features_path=args.features,
            model_dir=args.out_model_dir,
            random_state=args.seed,
            structure_features_path=args.structure_features,
        )
    return 0
