"""One task's truth and official test ids, and the stage-level functions built on them.

:class:`TaskData` reads the clean stage's data file and the folds stage's folds file: the test
ids of fold k are the rows of the data file (in its row order, the official order) whose
``fold`` is k in the folds file. On top of it:

- :func:`score_prediction_files`: five fold prediction files of one model on one task -> the
  scores record of :func:`crucible.matbench.scoring.score_task`;
- :func:`results_file_tasks`: the fold dicts :func:`crucible.matbench.resultsfile.write_results_file`
  takes, from explicit prediction, data and folds files of several tasks;
- :func:`card_values`: task type and MAD (or fraction of True) from a task card;
- :func:`score_task_files` and :func:`write_results_files`: the ``score`` and ``results-file``
  stages from their command-line file lists.

Heavy imports (pandas, pyarrow, scikit-learn) happen inside the functions: the CLI imports this
module to build its parser, and one process runs per DAG job.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from crucible.core.errors import DataValidationError, PredictionFileError
from crucible.core.io import InFile
from crucible.matbench.tasks import (
    CLASSIFICATION,
    COMPOSITION_ONLY,
    N_FOLDS,
    REGRESSION,
    STRUCTURE,
    check_task,
    task_type_of,
)

_FOLD_RE = re.compile(r"fold_(\d+)\.parquet$")


class TaskData:
    """One task's truth and official test ids, read from the data and folds stage outputs."""

    def __init__(self, task: str, data_path: str | os.PathLike, folds_path: str | os.PathLike) -> None:
        import pandas as pd

        from crucible.core.io import read_parquet

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
    def inputs_given(self) -> str:
        """What a model of this task was given: formulas only, or structures too."""
        return STRUCTURE if self.has_structures else COMPOSITION_ONLY


def check_fold_paths(paths: Sequence[str | os.PathLike]) -> list[str]:
    """The five fold files in fold order; a file named ``fold_j`` given as fold k is refused."""
    paths = [str(p) for p in paths]
    if len(paths) != N_FOLDS:
        raise PredictionFileError(f"--predictions needs {N_FOLDS} files (fold_0 .. fold_4 in order), got {len(paths)}")
    for k, p in enumerate(paths):
        m = _FOLD_RE.search(os.path.basename(p))
        if m and int(m.group(1)) != k:
            raise PredictionFileError(f"{p}: given as fold {k}'s predictions but named fold_{m.group(1)}")
    return paths


def card_values(card: Mapping[str, Any], task: str, card_path: str | os.PathLike = "task card") -> tuple[str, float]:
    """(task type, official MAD for regression or fraction of True for classification)."""
    if card.get("task") != task:
        raise DataValidationError(f"{card_path}: task card of {card.get('task')!r}, not {task!r}")
    mad = card["mad"] if card["task_type"] == REGRESSION else card["frac_true"]
    return card["task_type"], mad


def structures_used(prediction_paths: Sequence[str | os.PathLike]) -> bool | None:
    """Whether the model read crystal structures, from the fold jobs' sidecars (None: unknown).

    Structures in the data do not mean a model used them: gbm-magpie on the upstream files
    still sees formulas only.
    """
    from crucible.core.io import read_json

    flags = []
    for path in prediction_paths:
        sidecar = Path(path).with_suffix(".json")
        info = read_json(sidecar) if sidecar.is_file() else {}
        if "structures_used" not in info:
            return None
        flags.append(bool(info["structures_used"]))
    return all(flags)


def _inputs_given(td: TaskData, used: bool | None) -> str:
    """What the model was given: from its sidecars when they say, else from the data."""
    if used is None:
        return td.inputs_given
    return STRUCTURE if used else COMPOSITION_ONLY


def score_prediction_files(
    task: str,
    data_path: str | os.PathLike,
    folds_path: str | os.PathLike,
    prediction_paths: Sequence[str | os.PathLike],
    *,
    task_type: str,
    mad: float | None,
    model: str | None,
    inputs_given: str | None = None,
) -> dict[str, Any]:
    """Score one model's five fold prediction files on one task (matbench 0.6's scorer).

    ``inputs_given`` is recorded under the record's ``input_kind`` key; by default it is what
    the fold jobs' sidecars say (``structures_used``), else read from the data (structures
    present or not). When the sidecars say, the record also carries ``structures_used``.
    """
    from crucible.matbench.prediction_files import read_predictions
    from crucible.matbench.scoring import score_fold, score_task

    td = TaskData(task, data_path, folds_path)
    if task_type != td.task_type:
        raise DataValidationError(f"--task-type {task_type} disagrees with {data_path} ({td.task_type})")
    folds = []
    for k, path in enumerate(check_fold_paths(prediction_paths)):
        df = read_predictions(path, td.task_type, td.test_ids[k], k)
        y_true = td.truth.loc[td.test_ids[k]].to_numpy()
        proba = df["probability"].to_numpy() if "probability" in df.columns else None
        try:
            folds.append(score_fold(td.task_type, y_true, df["prediction"].to_numpy(), proba))
        except DataValidationError as exc:
            raise DataValidationError(f"{path} (fold {k}): {exc}") from None
    used = structures_used(prediction_paths)
    record = score_task(task, td.task_type, folds, mad, model=model, input_kind=inputs_given or _inputs_given(td, used))
    if used is not None:
        record["structures_used"] = used
    return record


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
        kinds.add(_inputs_given(td, structures_used(paths)))
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


def score_task_files(
    task: str,
    data: InFile,
    folds: InFile,
    predictions: Sequence[InFile],
    out: str | os.PathLike,
    *,
    card: InFile | None = None,
    task_type: str | None = None,
    mad: float | None = None,
    model: str | None = None,
    input_kind: str | None = None,
) -> dict[str, Any]:
    """:func:`score_prediction_files` written to ``out``; task type and MAD from the task card,
    unless given (an explicit value wins over the card's).

    Args:
        data: results/matbench/data/{task}.parquet
        folds: results/matbench/folds/{task}.parquet
        predictions: fold_0.parquet .. fold_4.parquet, in fold order
        out: results/matbench/scores/{model}/{task}.json
        card: task card (results/matbench/data/{task}.json): gives task type and MAD
        task_type: instead of --card
        mad: instead of --card: official MAD (regression) or fraction of True (classification)
        model: the model's name, as recorded in the scores
        input_kind: what the model was given; default: 'structure' if the data has structures, else
            composition-only
        task: as in :func:`crucible.matbench.clean.write_clean_task`
    """
    from crucible.core.io import read_json
    from crucible.matbench.scoring import write_scores

    if card:
        card_type, card_mad = card_values(read_json(card), task, card)
        task_type = task_type or card_type
        mad = card_mad if mad is None else mad
    elif task_type is None or mad is None:
        raise DataValidationError("score needs --card, or both --task-type and --mad")
    record = score_prediction_files(
        task,
        data,
        folds,
        predictions,
        task_type=task_type,
        mad=mad,
        model=model,
        inputs_given=input_kind,
    )
    write_scores(record, out)
    return record


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
