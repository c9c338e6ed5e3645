"""CLI commands ``crucible matbench score`` and ``crucible matbench results-file``.

``add_scoring_commands(subparsers)`` adds both to the ``matbench`` group's subparsers; each sets
``func`` to a callable taking the parsed args and returning an exit status.

    crucible matbench score --task T --card results/matbench/data/T.json \\
        --predictions P0 P1 P2 P3 P4 --folds results/matbench/folds/T.parquet \\
        --data results/matbench/data/T.parquet --model M --out results/matbench/scores/M/T.json

    crucible matbench results-file --model M --tasks T1 T2 ... \\
        --predictions-root results/matbench/predictions --folds-root results/matbench/folds \\
        --data-root results/matbench/data --out results/matbench/M/results.json.gz \\
        [--info-out results/matbench/M/info.json]

``--card`` is the task card of the clean stage; instead, ``--task-type`` and ``--mad`` may be
given by hand. ``--mad`` is the task's official MAD for regression and its fraction of True for
classification. The test ids of fold k are the rows of the data file (in its row order, the
official order) whose ``fold`` is k in the folds file.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
from pathlib import Path
from typing import Any

from crucible import __version__ as CRUCIBLE_VERSION
from crucible.errors import DataValidationError, PredictionFileError
from crucible.matbench.tasks import N_FOLDS, check_task

# Imported by the commands that need them: parsing arguments of any `crucible matbench`
# command must not pay for pandas, scikit-learn and pyarrow (one process per DAG job).
REGRESSION, CLASSIFICATION = "regression", "classification"
TASK_TYPES = (REGRESSION, CLASSIFICATION)

COMPOSITION_ONLY = "composition-only (formulas, no structures)"
STRUCTURE = "structure"
_FOLD_RE = re.compile(r"fold_(\d+)\.parquet$")

DEFAULT_BIBTEX = (
    "@article{Dunn2020, author={Dunn, Alexander and Wang, Qi and Ganose, Alex and Dopp, Daniel and "
    "Jain, Anubhav}, title={Benchmarking materials property prediction methods: the Matbench test set "
    "and Automatminer reference algorithm}, journal={npj Computational Materials}, volume={6}, "
    "pages={138}, year={2020}, doi={10.1038/s41524-020-00406-3}}"
)


class TaskData:
    """One task's truth and official test ids, read from the data and folds stage outputs."""

    def __init__(self, task: str, data_path: str | os.PathLike, folds_path: str | os.PathLike) -> None:
        import pandas as pd

        from crucible.io import read_parquet
        from crucible.matbench.resultsfile import task_type_of

        self.task = check_task(task)
        for p in (data_path, folds_path):
            if not Path(p).is_file():
                raise DataValidationError(f"{p}: file not found (task {task})")
        data = read_parquet(data_path, columns=["mbid", "structure", "target"])
        folds = read_parquet(folds_path, columns=["mbid", "fold"])
        if data["mbid"].duplicated().any():
            raise DataValidationError(f"{data_path}: duplicated mbids")
        self.task_type = CLASSIFICATION if data["target"].dtype == bool else REGRESSION
        if self.task_type != task_type_of(task):
            raise DataValidationError(
                f"{data_path}: column 'target' has dtype {data['target'].dtype}, but {task} is {task_type_of(task)}"
            )
        self.has_structures = bool(data["structure"].notna().any())
        fold_of = folds.set_index("mbid")["fold"]
        unknown = sorted(set(data["mbid"]) - set(fold_of.index))
        if unknown or len(fold_of) != len(data):
            raise DataValidationError(
                f"{folds_path}: rows do not match {data_path} ({len(fold_of)} vs {len(data)} rows; "
                f"{len(unknown)} data ids without a fold, e.g. {unknown[:5]})"
            )
        fold_col = fold_of.loc[data["mbid"]].to_numpy()
        self.test_ids: list[list[str]] = [data["mbid"][fold_col == k].tolist() for k in range(N_FOLDS)]
        empty = [k for k, ids in enumerate(self.test_ids) if not ids]
        if empty:
            raise DataValidationError(f"{folds_path}: fold(s) {empty} have no test rows")
        self.truth = pd.Series(data["target"].to_numpy(), index=data["mbid"].to_numpy())

    @property
    def input_kind(self) -> str:
        return STRUCTURE if self.has_structures else COMPOSITION_ONLY


def _fold_paths(paths: list[str]) -> list[str]:
    if len(paths) != N_FOLDS:
        raise PredictionFileError(f"--predictions needs {N_FOLDS} files (fold_0 .. fold_4 in order), got {len(paths)}")
    for k, p in enumerate(paths):
        m = _FOLD_RE.search(os.path.basename(p))
        if m and int(m.group(1)) != k:
            raise PredictionFileError(f"{p}: given as fold {k}'s predictions but named fold_{m.group(1)}")
    return paths


def _card_values(args: argparse.Namespace) -> None:
    """Fill --task-type and --mad from the task card written by the clean stage."""
    if not args.card:
        if args.task_type is None or args.mad is None:
            raise DataValidationError("score needs --card, or both --task-type and --mad")
        return
    from crucible.io import read_json

    card = read_json(args.card)
    if card.get("task") != args.task:
        raise DataValidationError(f"{args.card}: task card of {card.get('task')!r}, not {args.task!r}")
    args.task_type = args.task_type or card["task_type"]
    if args.mad is None:
        args.mad = card["mad"] if card["task_type"] == REGRESSION else card["frac_true"]


def _fold_parameters(path: Path) -> dict[str, Any]:
    """What the inference job recorded about the fitted model (its sidecar JSON), if any."""
    sidecar = path.with_suffix(".json")
    if not sidecar.is_file():
        return {}
    from crucible.io import read_json

    info = read_json(sidecar)
    params: dict[str, Any] = {"model": info.get("model"), "hyperparameters": info.get("params", {}),
                              "device": info.get("device")}
    if "constant_" in info:
        # The published Dummy stored its fitted constant the same way.
        params["constant_"] = [[info["constant_"]]]
    return params


def _structures_used(prediction_paths: list[str | Path]) -> bool | None:
    """Whether the model read crystal structures, from the fold jobs' sidecars (None: unknown).

    Structures in the data do not mean a model used them: gbm-magpie on the upstream files
    still sees formulas only.
    """
    from crucible.io import read_json

    flags = []
    for path in prediction_paths:
        sidecar = Path(path).with_suffix(".json")
        info = read_json(sidecar) if sidecar.is_file() else {}
        if "structures_used" not in info:
            return None
        flags.append(bool(info["structures_used"]))
    return all(flags)


def cmd_score(args: argparse.Namespace) -> int:
    from crucible.matbench.predictions import read_predictions
    from crucible.matbench.scoring import score_fold, score_task, write_scores

    _card_values(args)
    td = TaskData(args.task, args.data, args.folds)
    if args.task_type != td.task_type:
        raise DataValidationError(f"--task-type {args.task_type} disagrees with {args.data} ({td.task_type})")
    folds = []
    for k, path in enumerate(_fold_paths(args.predictions)):
        df = read_predictions(path, td.task_type, td.test_ids[k], k)
        y_true = td.truth.loc[td.test_ids[k]].to_numpy()
        proba = df["probability"].to_numpy() if "probability" in df.columns else None
        try:
            folds.append(score_fold(td.task_type, y_true, df["prediction"].to_numpy(), proba))
        except DataValidationError as exc:
            raise DataValidationError(f"{path} (fold {k}): {exc}") from None
    used = _structures_used(args.predictions)
    kind = td.input_kind if used is None else (STRUCTURE if used else COMPOSITION_ONLY)
    record = score_task(args.task, td.task_type, folds, args.mad, model=args.model,
                        input_kind=args.input_kind or kind)
    if used is not None:
        record["structures_used"] = used
    write_scores(record, args.out)
    return 0


def _requirements() -> dict[str, list[str]]:
    from crucible.matbench.resultsfile import MATBENCH_VERSION

    pins = [f"crucible=={CRUCIBLE_VERSION}", f"matbench=={MATBENCH_VERSION}"]
    for dist in ("scikit-learn", "numpy", "pandas", "pyarrow"):
        try:
            pins.append(f"{dist}=={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return {"python": pins}


def cmd_results_file(args: argparse.Namespace) -> int:
    from crucible.matbench.predictions import read_predictions
    from crucible.matbench.resultsfile import write_info_json, write_results_file

    tasks: dict[str, list[dict[str, Any]]] = {}
    kinds = set()
    for task in args.tasks:
        td = TaskData(task, Path(args.data_root) / f"{task}.parquet", Path(args.folds_root) / f"{task}.parquet")
        used = _structures_used([Path(args.predictions_root) / args.model / task / f"fold_{k}.parquet"
                                 for k in range(N_FOLDS)])
        kinds.add(td.input_kind if used is None else (STRUCTURE if used else COMPOSITION_ONLY))
        folds = []
        for k in range(N_FOLDS):
            path = Path(args.predictions_root) / args.model / task / f"fold_{k}.parquet"
            df = read_predictions(path, td.task_type, td.test_ids[k], k)
            if td.task_type == CLASSIFICATION and args.store_probabilities:
                if "probability" not in df.columns:
                    raise PredictionFileError(f"{path} (fold {k}): --store-probabilities needs a 'probability' column")
                values = df["probability"].astype(float).tolist()
            elif td.task_type == CLASSIFICATION:
                values = df["prediction"].astype(bool).tolist()
            else:
                values = df["prediction"].astype(float).tolist()
            truth = td.truth.loc[td.test_ids[k]]
            folds.append(
                {
                    "data": dict(zip(df["mbid"].tolist(), values)),
                    "truth": dict(zip(truth.index.tolist(), truth.tolist())),
                    "parameters": _fold_parameters(path),
                }
            )
        tasks[task] = folds
    if args.input:
        input_text = args.input
    elif kinds == {COMPOSITION_ONLY}:
        input_text = COMPOSITION_ONLY
    elif kinds == {STRUCTURE}:
        input_text = STRUCTURE
    else:
        input_text = "mixed: " + ", ".join(sorted(kinds))
    meta = {"input": input_text, "crucible_version": CRUCIBLE_VERSION, "crucible_model": args.model,
            "classification_values": "probabilities" if args.store_probabilities else "labels (bool)"}
    write_results_file(args.out, args.model, tasks, meta)
    if args.info_out:
        write_info_json(
            args.info_out,
            algorithm=args.algorithm or args.model,
            algorithm_long=args.algorithm_long or f"{args.model}, run by crucible {CRUCIBLE_VERSION}; inputs: {input_text}.",
            authors=args.authors,
            bibtex_refs=args.bibtex_refs or DEFAULT_BIBTEX,
            notes=args.notes,
            requirements=_requirements(),
        )
    return 0


def add_scoring_commands(subparsers: Any) -> None:
    """Add ``score`` and ``results-file`` to the ``crucible matbench`` subparsers."""
    p = subparsers.add_parser("score", help="score one model on one task (5 folds) into a scores JSON")
    p.add_argument("--task", required=True)
    p.add_argument("--card", help="task card (results/matbench/data/{task}.json): gives task type and MAD")
    p.add_argument("--task-type", choices=TASK_TYPES, help="instead of --card")
    p.add_argument("--mad", type=float,
                   help="instead of --card: official MAD (regression) or fraction of True (classification)")
    p.add_argument("--predictions", required=True, nargs="+", metavar="FOLD_K_PARQUET",
                   help="fold_0.parquet .. fold_4.parquet, in fold order")
    p.add_argument("--folds", required=True, help="results/matbench/folds/{task}.parquet")
    p.add_argument("--data", required=True, help="results/matbench/data/{task}.parquet")
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True, help="results/matbench/scores/{model}/{task}.json")
    p.add_argument("--input-kind", default=None,
                   help="what the model saw; default: 'structure' if the data has structures, else composition-only")
    p.set_defaults(func=cmd_score)

    r = subparsers.add_parser("results-file", help="write matbench's results.json.gz (and info.json) for a model")
    r.add_argument("--model", required=True)
    r.add_argument("--tasks", required=True, nargs="+")
    r.add_argument("--predictions-root", required=True, help="holds {model}/{task}/fold_{k}.parquet")
    r.add_argument("--folds-root", required=True)
    r.add_argument("--data-root", required=True)
    r.add_argument("--out", required=True, help="results/matbench/{model}/results.json.gz")
    r.add_argument("--info-out", default=None, help="also write the leaderboard's info.json here")
    r.add_argument("--input", default=None, help="user_metadata 'input' text; default from the data")
    r.add_argument("--store-probabilities", action="store_true",
                   help="store P(True) instead of bool labels for classifiers (matbench scores either as labels)")
    r.add_argument("--algorithm", default=None, help="info.json algorithm (default: the model name)")
    r.add_argument("--algorithm-long", default=None)
    r.add_argument("--authors", default="crucible")
    r.add_argument("--bibtex-refs", default=None)
    r.add_argument("--notes", default=None)
    r.set_defaults(func=cmd_results_file)
