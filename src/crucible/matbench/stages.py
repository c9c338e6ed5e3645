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
from crucible.stage import In, Opt, Out, Stage, json_value

_TASK = Opt("task", "Matbench task, e.g. matbench_steels", type=task_argument)
_DATA = In("data", "the clean task table: results/matbench/data/{task}.parquet")
_CARD = In("card", "the task card: results/matbench/data/{task}.json")
_FOLDS = In("folds", "the folds table: results/matbench/folds/{task}.parquet")
_RAW_SHA256 = "pinned SHA-256 of the raw file: the card must record exactly this"
_INNER_FRACTION = Opt(
    "inner_fraction",
    "fraction of each training fold held out as inner validation (default 0.25)",
    type=float,
    default=0.25,
)
_INNER_SEED = Opt("inner_seed", "seed of the inner validation split (default 7)", type=int, default=7)
_USER_DATASET = Opt("dataset", "the user dataset's name (a key of matbench.user_datasets)")
_USER_SPEC = Opt("spec", "JSON of its matbench.user_datasets entry", type=json_value)
_USER_DATA = In("data", "the clean table: results/matbench/user/{dataset}/data.parquet")
_USER_CARD = In("card", "the card: results/matbench/user/{dataset}/card.json")


def _predict_args(*task: Opt) -> tuple:
    """The arguments of predict and user-predict: the same but the task (user-predict: the card's)."""
    model_help = (
        f"built-in: {', '.join(builtin_models())}; or a name in --custom-models (config matbench.custom_models)"
    )
    return (
        Opt("model", model_help),
        *task,
        Opt(
            "fold",
            "one fold, or several fitted in turn in this process (one --out each)",
            type=int,
            many=True,
            choices=range(N_FOLDS),
        ),
        In("data", "the clean task table: results/matbench/data/{task}.parquet (or a user dataset's data.parquet)"),
        _CARD,
        _FOLDS,
        In("features", "the task's Magpie feature file (models whose input_kind is magpie)", default=None),
        In("structure_features", "the task's per-structure feature file (structure models)", default=None),
        Opt("params", "JSON hyperparameter overrides", type=json_value, default=None),
        Opt("custom_models", "JSON of config's matbench.custom_models", type=json_value, default=None),
        In(
            "element_table",
            "element embedding CSV for composition networks; checked against its pin when the model's "
            "element_table (default mat2vec) names a pinned table",
            default=None,
        ),
        Out("out_model_dir", "where a model with save() writes its trained state", default=None),
        Opt(
            "seed",
            "random_state for models that take one and do not set it in --params (recorded)",
            type=int,
            default=0,
        ),
        Opt(
            "threads",
            "CPU threads of the fit (OMP/MKL/OpenBLAS variables; 0: leave them as they are)",
            type=int,
            default=0,
        ),
        Out("out", "predictions parquet per --fold (a sidecar .json is written beside each)", many=True),
    )


STAGES = (
    Stage(
        "clean",
        "raw source file -> typed, id'd, checked task table + task card",
        "crucible.matbench.clean:write_clean_task",
        (
            _TASK,
            Opt("source", choices=["composition-mirror", "matminer"]),
            In("raw"),
            Opt("raw_sha256", default=None),
            In("metadata"),
            Opt("artifact", many=True, default=[]),
            Out("out_data"),
            Out("out_card"),
        ),
    ),
    Stage(
        "folds",
        "official folds, checked against a regeneration, plus inner validation",
        "crucible.matbench.folds:write_task_folds",
        (
            _TASK,
            _DATA,
            _CARD,
            Opt("raw_sha256", _RAW_SHA256, default=None),
            In("validation"),
            _INNER_FRACTION,
            _INNER_SEED,
            Out("out"),
        ),
    ),
    Stage(
        "tasks-table",
        "the task table and the task-overlap table",
        "crucible.matbench.tasktable:write_task_tables",
        (
            In("cards", many=True),
            In("data", many=True),
            Out("out_csv"),
            Out("out_md"),
            Out("out_overlap_csv"),
            Out("out_overlap_md"),
        ),
    ),
    Stage(
        "predict",
        "fit a model on one fold's training rows and predict its test rows",
        "crucible.matbench.predict:predict_folds",
        _predict_args(Opt("task", f"one of: {', '.join(TASKS)}", type=task_argument)),
    ),
    Stage(
        "import-predictions",
        "validate a user-supplied predictions file and take it in",
        "crucible.matbench.prediction_files:import_predictions",
        (_TASK, Opt("fold", type=int, choices=range(N_FOLDS)), _CARD, _FOLDS, In("predictions"), Out("out")),
    ),
    Stage(
        "score",
        "score one model on one task (5 folds) into a scores JSON",
        "crucible.matbench.taskdata:score_task_files",
        (
            _TASK,
            In("card", default=None),
            Opt("task_type", choices=TASK_TYPES, default=None),
            Opt("mad", type=float, default=None),
            Opt("model"),
            In("predictions", many=True),
            In("folds"),
            In("data"),
            Opt("input_kind", default=None),
            Out("out"),
        ),
    ),
    Stage(
        "results-file",
        "write matbench's results.json.gz (and info.json) for a model",
        "crucible.matbench.taskdata:write_results_files",
        (
            Opt("model"),
            Opt("tasks", type=task_argument, many=True),
            In("data", many=True),
            In("folds", many=True),
            In("predictions", many=True),
            Opt("input", default=None),
            Opt("store_probabilities", flag=True),
            Opt("algorithm", default=None),
            Opt("algorithm_long", default=None),
            Opt("authors", default="crucible"),
            Opt("bibtex_refs", default=None),
            Opt("notes", default=None),
            Out("out_results"),
            Out("out_info", default=None),
        ),
    ),
    Stage(
        "leaderboard",
        "leaderboard and per-fold tables, scaled-error figure",
        "crucible.matbench.leaderboard:write_leaderboard_files",
        (
            In("scores", many=True),
            In("published"),
            In("cards", many=True, default=[]),
            Out("out_csv"),
            Out("out_md"),
            Out("out_tex"),
            Out("out_folds_csv"),
            Out("out_png"),
            Out("out_pdf"),
        ),
    ),
    Stage(
        "figures",
        "parity plot (regression) or ROC curve (classification) of one model on one task",
        "crucible.matbench.figures:write_model_figure",
        (Opt("model"), _CARD, _DATA, In("predictions", many=True), Out("out_png"), Out("out_pdf")),
    ),
    Stage(
        "user-fetch",
        "download a user dataset and check its pinned SHA-256",
        "crucible.matbench.user_datasets:fetch_user_dataset",
        (_USER_DATASET, _USER_SPEC, Out("out")),
    ),
    Stage(
        "user-clean",
        "user dataset .json.gz -> typed, id'd task table + card",
        "crucible.matbench.user_datasets:write_clean_user_dataset",
        (_USER_DATASET, _USER_SPEC, In("raw"), Out("out_data"), Out("out_card")),
    ),
    Stage(
        "user-folds",
        "Matbench's 5-fold recipe (seed 18012019) on a user dataset",
        "crucible.matbench.user_datasets:write_user_folds",
        (_USER_DATA, _USER_CARD, _INNER_FRACTION, _INNER_SEED, Out("out")),
    ),
    Stage(
        "user-predict",
        "fit a model on a fold of a user dataset, predict its test rows",
        "crucible.matbench.predict:predict_folds",
        _predict_args(),  # predict's own arguments; the task is the card's
    ),
    Stage(
        "user-score",
        "score a model's five folds on a user dataset",
        "crucible.matbench.user_datasets:write_user_scores",
        (Opt("model"), _USER_CARD, _USER_DATA, In("folds"), In("predictions", many=True), Out("out")),
    ),
    Stage(
        "user-table",
        "one user dataset's scores, every model",
        "crucible.matbench.user_datasets:write_user_table",
        (In("scores", many=True), Out("out_csv"), Out("out_md"), Out("out_tex")),
    ),
)
