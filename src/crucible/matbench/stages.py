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
        In(
            "data",
            "the clean task table: results/matbench/data/{task}.parquet (or a user dataset's data.parquet)",
        ),
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
            Opt(
                "source",
                "where --raw comes from: the composition mirror (formulas) or matminer's upstream file (structures)",
                choices=["composition-mirror", "matminer"],
            ),
            In("raw", "crabnet CSV (mirror) or matminer .json.gz"),
            Opt("raw_sha256", "pinned SHA-256 of --raw: refuse the file if it differs", default=None),
            In("metadata", "the official dataset metadata (checked against its pin)"),
            Opt("artifact", "provenance as name=sha256 pairs", many=True, default=[]),
            Out("out_data", "the clean task table to write: results/matbench/data/{task}.parquet"),
            Out("out_card", "the task card to write: results/matbench/data/{task}.json"),
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
            In("validation", "the official validation splits (checked against their pin)"),
            _INNER_FRACTION,
            _INNER_SEED,
            Out("out", "the folds table to write: results/matbench/folds/{task}.parquet"),
        ),
    ),
    Stage(
        "tasks-table",
        "the task table and the task-overlap table",
        "crucible.matbench.tasktable:write_task_tables",
        (
            In("cards", "task cards results/matbench/data/{task}.json, one per task", many=True),
            In("data", "clean task tables results/matbench/data/{task}.parquet, in --cards order", many=True),
            Out("out_csv", "the task table, CSV"),
            Out("out_md", "the task table, Markdown"),
            Out("out_overlap_csv", "the task-overlap table (duplicates, shared inputs, class balance), CSV"),
            Out("out_overlap_md", "the task-overlap table, Markdown"),
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
        (
            _TASK,
            Opt("fold", "the test fold the file predicts (0-4)", type=int, choices=range(N_FOLDS)),
            _CARD,
            _FOLDS,
            In("predictions", "the predictions made elsewhere: parquet with mbid, prediction[, probability]"),
            Out("out", "the checked copy to write: results/matbench/predictions/{model}/{task}/fold_{k}.parquet"),
        ),
    ),
    Stage(
        "score",
        "score one model on one task (5 folds) into a scores JSON",
        "crucible.matbench.taskdata:score_task_files",
        (
            _TASK,
            In("card", "task card (results/matbench/data/{task}.json): gives task type and MAD", default=None),
            Opt("task_type", "instead of --card", choices=TASK_TYPES, default=None),
            Opt(
                "mad",
                "instead of --card: official MAD (regression) or fraction of True (classification)",
                type=float,
                default=None,
            ),
            Opt("model", "the model's name, as recorded in the scores"),
            In("predictions", "fold_0.parquet .. fold_4.parquet, in fold order", many=True),
            In("folds", "results/matbench/folds/{task}.parquet"),
            In("data", "results/matbench/data/{task}.parquet"),
            Opt(
                "input_kind",
                "what the model was given; default: 'structure' if the data has structures, else composition-only",
                default=None,
            ),
            Out("out", "results/matbench/scores/{model}/{task}.json"),
        ),
    ),
    Stage(
        "results-file",
        "write matbench's results.json.gz (and info.json) for a model",
        "crucible.matbench.taskdata:write_results_files",
        (
            Opt("model", "the model's name, as recorded in the results file"),
            Opt("tasks", "the Matbench tasks of the file, in Matbench order", type=task_argument, many=True),
            In("data", "one clean data file per task, in --tasks order", many=True),
            In("folds", "one folds file per task, in --tasks order", many=True),
            In("predictions", "fold_0 .. fold_4 prediction files of each task, in --tasks order", many=True),
            Opt("input", "user_metadata 'input' text; default from the data", default=None),
            Opt(
                "store_probabilities",
                "store P(True) instead of bool labels for classifiers (matbench scores either as labels)",
                flag=True,
            ),
            Opt("algorithm", "info.json algorithm (default: the model name)", default=None),
            Opt("algorithm_long", "info.json: a longer description of the algorithm", default=None),
            Opt("authors", "info.json: authors (default: crucible)", default="crucible"),
            Opt("bibtex_refs", "info.json: BibTeX references of the algorithm", default=None),
            Opt("notes", "info.json: free-text notes", default=None),
            Out("out_results", "results/matbench/{model}/results.json.gz"),
            Out("out_info", "also write the leaderboard's info.json here", default=None),
        ),
    ),
    Stage(
        "leaderboard",
        "leaderboard and per-fold tables, scaled-error figure",
        "crucible.matbench.leaderboard:write_leaderboard_files",
        (
            In("scores", "scores JSONs results/matbench/scores/{model}/{task}.json", many=True),
            In("published", "config/published_matbench.yaml"),
            In(
                "cards",
                "task cards results/matbench/data/{task}.json: the MAE units, and which tasks are structure tasks "
                "(the figure draws composition-only entries on them hollow)",
                many=True,
                default=[],
            ),
            Out("out_csv", "the leaderboard, CSV"),
            Out("out_md", "the leaderboard, Markdown"),
            Out("out_tex", "the leaderboard, LaTeX"),
            Out("out_folds_csv", "every fold's score of every model and task, CSV"),
            Out("out_png", "the scaled-error figure, PNG"),
            Out("out_pdf", "the scaled-error figure, PDF"),
        ),
    ),
    Stage(
        "figures",
        "parity plot (regression) or ROC curve (classification) of one model on one task",
        "crucible.matbench.figures:write_model_figure",
        (
            Opt("model", "the model's name (figure title)"),
            _CARD,
            _DATA,
            In("predictions", "fold_0 .. fold_4 prediction files of the model on the task", many=True),
            Out("out_png", "the parity plot (regression) or ROC curve (classification), PNG"),
            Out("out_pdf", "the same figure, PDF"),
        ),
    ),
    Stage(
        "user-fetch",
        "download a user dataset and check its pinned SHA-256",
        "crucible.matbench.user_datasets:fetch_user_dataset",
        (
            _USER_DATASET,
            _USER_SPEC,
            Out("out", "the downloaded file to write: resources/downloads/user/{dataset}.json.gz"),
        ),
    ),
    Stage(
        "user-clean",
        "user dataset .json.gz -> typed, id'd task table + card",
        "crucible.matbench.user_datasets:write_clean_user_dataset",
        (
            _USER_DATASET,
            _USER_SPEC,
            In("raw", "the downloaded .json.gz (checked against the entry's sha256)"),
            Out("out_data", "the clean table to write: results/matbench/user/{dataset}/data.parquet"),
            Out("out_card", "the card to write: results/matbench/user/{dataset}/card.json"),
        ),
    ),
    Stage(
        "user-folds",
        "Matbench's 5-fold recipe (seed 18012019) on a user dataset",
        "crucible.matbench.user_datasets:write_user_folds",
        (
            _USER_DATA,
            _USER_CARD,
            _INNER_FRACTION,
            _INNER_SEED,
            Out("out", "the folds table to write: results/matbench/user/{dataset}/folds.parquet"),
        ),
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
        (
            Opt("model", "the model's name, as recorded in the scores"),
            _USER_CARD,
            _USER_DATA,
            In("folds", "the folds table: results/matbench/user/{dataset}/folds.parquet"),
            In("predictions", "fold_0 .. fold_4 predictions", many=True),
            Out("out", "the scores JSON to write: results/matbench/user/{dataset}/scores/{model}.json"),
        ),
    ),
    Stage(
        "user-table",
        "one user dataset's scores, every model",
        "crucible.matbench.user_datasets:write_user_table",
        (
            In("scores", "scores JSONs of the dataset, one per model", many=True),
            Out("out_csv", "the table, CSV"),
            Out("out_md", "the table, Markdown"),
            Out("out_tex", "the table, LaTeX"),
        ),
    ),
)
