"""``crucible matbench ...``: the Matbench stages, each runnable without Snakemake.

    crucible matbench clean --task T --source composition-mirror --raw R.csv --metadata M.json \\
        --out-data results/matbench/data/T.parquet --out-card results/matbench/data/T.json
    crucible matbench folds --task T --data D --card C --validation V --out results/matbench/folds/T.parquet
    crucible matbench predict --model M --task T --fold K --data D --card C --folds F --out P.parquet
        (cheap models: --fold 0 1 2 3 4 --out P0 .. P4 fits the five folds in one process)
    crucible matbench score --task T --card C --data D --folds F --predictions P0 .. P4 --model M --out S.json
    crucible matbench results-file --model M --tasks T1 T2 --data D1 D2 --folds F1 F2 \\
        --predictions (five per task, in task then fold order) --out-results R.json.gz --out-info I.json
    crucible matbench leaderboard --scores S1 S2 .. --published P.yaml --out-csv .. --out-png ..
    crucible matbench user-fetch|user-clean|user-folds|user-predict|user-score|user-table ...
        (user datasets, see crucible.matbench.user_datasets)

Every input file is named on the command line (no root directories re-expanded here), every
output flag is ``--out`` or ``--out-<what>``.
"""

from __future__ import annotations

from crucible.matbench.tasks import N_FOLDS, TASK_TYPES, TASKS, task_argument
from crucible.models.registry import builtin_models
from crucible.stages.declaration import Opt, Stage

_TASK = Opt("task", type=task_argument)


def _predict_args(*task: Opt) -> tuple:
    """The arguments predict and user-predict declare: the same but the task (user-predict: the card's)."""
    model_help = (
        f"built-in: {', '.join(builtin_models())}; or a name in --custom-models (config matbench.custom_models)"
    )
    return (Opt("model", model_help), *task, Opt("fold", type=int, many=True, choices=range(N_FOLDS)))


HELP = "Matbench v0.1: clean, folds, predict, score, results file"  # the group's line in `crucible --help`
STAGES = (
    Stage(
        "clean",
        "raw source file -> typed, id'd, checked task table + task card",
        ".clean:write_clean_task",
        _TASK,
        Opt("source", choices=["composition-mirror", "matminer"]),
        Opt("artifact", many=True, default=[]),
    ),
    Stage(
        "folds",
        "official folds, checked against a regeneration, plus inner validation",
        ".folds:write_task_folds",
        _TASK,
    ),
    Stage("tasks-table", "the task table and the task-overlap table", ".tasktable:write_task_tables"),
    Stage(
        "predict",
        "fit a model on one fold's training rows and predict its test rows",
        ".predict:predict_folds",
        *_predict_args(Opt("task", f"one of: {', '.join(TASKS)}", type=task_argument)),
    ),
    Stage(
        "import-predictions",
        "validate a user-supplied predictions file and take it in",
        ".prediction_files:import_predictions",
        _TASK,
        Opt("fold", type=int, choices=range(N_FOLDS)),
    ),
    Stage(
        "score",
        "score one model on one task (5 folds) into a scores JSON",
        ".task_scores:score_task_files",
        _TASK,
        Opt("task_type", choices=TASK_TYPES, default=None),
        Opt("model"),
    ),
    Stage(
        "results-file",
        "write matbench's results.json.gz (and info.json) for a model",
        ".submission:write_results_files",
        Opt("tasks", type=task_argument, many=True),
        Opt("store_probabilities", flag=True),
    ),
    Stage(
        "leaderboard", "leaderboard and per-fold tables, scaled-error figure", ".leaderboard:write_leaderboard_files"
    ),
    Stage(
        "figures",
        "parity plot (regression) or ROC curve (classification) of one model on one task",
        ".figures:write_model_figure",
    ),
    Stage("user-fetch", "download a user dataset and check its pinned SHA-256", ".user_datasets:fetch_user_dataset"),
    Stage(
        "user-clean",
        "user dataset .json.gz -> typed, id'd task table + card",
        ".user_datasets:write_clean_user_dataset",
    ),
    Stage(
        "user-folds", "Matbench's 5-fold recipe (seed 18012019) on a user dataset", ".user_datasets:write_user_folds"
    ),
    Stage(
        "user-predict",
        "fit a model on a fold of a user dataset, predict its test rows",
        ".predict:predict_folds",
        *_predict_args(),
        skip=("task",),  # predict's own arguments; the task is the card's
    ),
    Stage("user-score", "score a model's five folds on a user dataset", ".user_datasets:write_user_scores"),
    Stage("user-table", "one user dataset's scores, every model", ".user_datasets:write_user_table"),
)
