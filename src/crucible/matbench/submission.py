"""A model's Matbench results file (``results.json.gz``, what the Matbench leaderboard takes) from
its prediction files: the ``crucible matbench results-file`` command. The file's format, its
canonical hash and its validation are :mod:`crucible.matbench.resultsfile`'s; the truth and test
ids of each task come from :class:`crucible.matbench.taskdata.TaskData`.

Heavy imports (pandas, pyarrow) happen inside the functions: one process runs per DAG job.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from crucible.core.errors import DataValidationError, PredictionFileError
from crucible.core.io import InFile
from crucible.matbench.taskdata import TaskData, check_fold_paths, input_kind_of, structures_used
from crucible.matbench.tasks import CLASSIFICATION, COMPOSITION_ONLY, N_FOLDS, STRUCTURE


def fold_parameters(path: str | os.PathLike) -> dict[str, Any]:
    """What the inference job recorded about the fitted model (its sidecar JSON), if any."""
    sidecar = Path(path).with_suffix(".json")
    if not sidecar.is_file():
        return {}
    from crucible.core.io import read_json

    info = read_json(sidecar)
    params: dict[str, Any] = {
        "model": info.get("model"),
        "hyperparameters": info.get("params", {}),
        "device": info.get("device"),
    }
    if "constant_" in info:
        # The published Dummy stored its fitted constant the same way.
        params["constant_"] = [[info["constant_"]]]
    return params


def results_file_tasks(
    prediction_files: Mapping[str, Sequence[str | os.PathLike]],
    data_files: Mapping[str, str | os.PathLike],
    fold_files: Mapping[str, str | os.PathLike],
    store_probabilities: bool = False,
) -> tuple[dict[str, list[dict[str, Any]]], str]:
    """The fold dicts of every task for ``write_results_file``, and the ``input`` text.

    ``prediction_files[task]`` are the five fold files in fold order; ``data_files[task]`` and
    ``fold_files[task]`` the task's clean data and folds. The input text is what the fold jobs'
    sidecars say the model was given, else what the data holds (``mixed: ...`` when tasks differ).
    """
    from crucible.matbench.prediction_files import read_predictions

    missing = sorted(set(prediction_files) - set(data_files) | set(prediction_files) - set(fold_files))
    if missing:
        raise DataValidationError(f"no data or folds file given for task(s) {', '.join(missing)}")
    tasks: dict[str, list[dict[str, Any]]] = {}
    kinds = set()
    for task, paths in prediction_files.items():
        td = TaskData(task, data_files[task], fold_files[task])
        kinds.add(input_kind_of(td, structures_used(paths)))
        folds = []
        for k, path in enumerate(check_fold_paths(paths)):
            df = read_predictions(path, td.task_type, td.test_ids[k], k)
            if td.task_type == CLASSIFICATION and store_probabilities:
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
                    "parameters": fold_parameters(path),
                }
            )
        tasks[task] = folds
    if kinds == {COMPOSITION_ONLY}:
        input_text = COMPOSITION_ONLY
    elif kinds == {STRUCTURE}:
        input_text = STRUCTURE
    else:
        input_text = "mixed: " + ", ".join(sorted(kinds))
    return tasks, input_text


def split_per_task(flag: str, paths: Sequence[str], tasks: Sequence[str], per_task: int = 1) -> dict[str, list[str]]:
    """Split an explicit file list into the tasks' shares (``per_task`` files each, in task
    order), checking counts, and names when a file is called after its task (``<task>.parquet``,
    or ``<task>/fold_k.parquet`` when a task has several)."""
    if len(paths) != per_task * len(tasks):
        raise DataValidationError(
            f"{flag} needs {per_task} file(s) per task ({per_task * len(tasks)}), got {len(paths)}"
        )
    out = {t: list(paths[i * per_task : (i + 1) * per_task]) for i, t in enumerate(tasks)}
    for task, share in out.items():
        for p in share:
            named = Path(p).stem if per_task == 1 else Path(p).parent.name
            if named.startswith("matbench_") and named != task:
                raise DataValidationError(f"{flag}: {p} is given for task {task} but named after {named}")
    return out


def write_results_files(
    model: str,
    tasks: Sequence[str],
    predictions: Sequence[InFile],
    data: Sequence[InFile],
    folds: Sequence[InFile],
    out_results: str | os.PathLike,
    *,
    store_probabilities: bool = False,
    input: str | None = None,
    out_info: str | os.PathLike | None = None,
    algorithm: str | None = None,
    algorithm_long: str | None = None,
    authors: str = "crucible",
    bibtex_refs: str | None = None,
    notes: str | None = None,
) -> str:
    """matbench's ``results.json.gz`` of one model over several tasks (and, when ``out_info``
    is given, the leaderboard's ``info.json``: algorithm, algorithm_long, authors, bibtex_refs,
    notes, defaults filled in). ``input``: the user_metadata text (default: measured from the
    data). Returns the input text.

    Args:
        model: the model's name, as recorded in the results file
        tasks: the Matbench tasks of the file, in Matbench order
        predictions: fold_0 .. fold_4 prediction files of each task, in --tasks order
        data: one clean data file per task, in --tasks order
        folds: one folds file per task, in --tasks order
        out_results: results/matbench/{model}/results.json.gz
        store_probabilities: store P(True) instead of bool labels for classifiers (matbench scores either as
            labels)
        input: user_metadata 'input' text; default from the data
        out_info: also write the leaderboard's info.json here
        algorithm: info.json algorithm (default: the model name)
        algorithm_long: info.json: a longer description of the algorithm
        authors: info.json: authors (default: crucible)
        bibtex_refs: info.json: BibTeX references of the algorithm
        notes: info.json: free-text notes
    """
    from crucible.matbench.resultsfile import (
        DEFAULT_BIBTEX,
        requirements,
        user_metadata,
        write_info_json,
        write_results_file,
    )

    tasks = list(tasks)
    prediction_of = split_per_task("--predictions", predictions, tasks, N_FOLDS)
    data_of = {t: ps[0] for t, ps in split_per_task("--data", data, tasks).items()}
    folds_of = {t: ps[0] for t, ps in split_per_task("--folds", folds, tasks).items()}
    fold_dicts, measured_input = results_file_tasks(prediction_of, data_of, folds_of, store_probabilities)
    input_text = input or measured_input
    write_results_file(out_results, model, fold_dicts, user_metadata(model, input_text, store_probabilities))
    if out_info:
        from crucible import __version__

        write_info_json(
            out_info,
            algorithm=algorithm or model,
            algorithm_long=algorithm_long or f"{model}, run by crucible {__version__}; inputs: {input_text}.",
            authors=authors,
            bibtex_refs=bibtex_refs or DEFAULT_BIBTEX,
            notes=notes,
            requirements=requirements(),
        )
    return input_text
