"""Your own dataset through the Matbench pipeline: fetch -> clean -> folds -> predict -> score.

A user dataset is not one of the 13 official tasks, so nothing official can check it: it has no
metadata n/MAD and no official split file. It therefore gets its own path and its own outputs
(``results/matbench/user/{dataset}/...``, ``results/tables/matbench_user_{dataset}.*``) and never
enters the Matbench results file or leaderboard, and the official tasks keep their strict checks
untouched. The folds are Matbench's recipe applied to your rows: ``KFold`` (regression) or
``StratifiedKFold`` (classification) with ``n_splits=5, shuffle=True, random_state=18012019``
over the file's row order, plus the same 75/25 inner-validation split as the official tasks.

Config (``matbench.user_datasets``), one entry per dataset::

    li_o_band_gap:
      url: https://example.org/li_o.json.gz   # a matminer-style .json.gz (pandas frame of pymatgen objects)
      sha256: <64 hex>                        # pinned: a changed file stops the fetch
      input: structure                        # column with pymatgen Structures (or composition)
      target: band_gap                        # column with the target
      task_type: regression                   # or classification
      unit: eV
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crucible import __version__
from crucible.core.errors import ConfigError, DataValidationError
from crucible.core.io import InFile
from crucible.matbench.tasks import TASKS

NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
SPEC_KEYS = {"url", "sha256", "input", "target", "task_type", "unit"}


def check_spec(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    if not NAME_RE.match(name) or name in TASKS or name.startswith("matbench_"):
        raise ConfigError(
            f"matbench.user_datasets: {name!r} is not a valid dataset name "
            "(lower-case letters, digits, '_'; not an official task name, not starting with 'matbench_')"
        )
    missing = sorted({"url", "sha256", "input", "target", "task_type"} - set(spec))
    if missing:
        raise ConfigError(f"matbench.user_datasets.{name}: missing {', '.join(missing)}")
    if spec["input"] not in ("structure", "composition"):
        raise ConfigError(f"matbench.user_datasets.{name}.input: 'structure' or 'composition', got {spec['input']!r}")
    if spec["task_type"] not in ("regression", "classification"):
        raise ConfigError(f"matbench.user_datasets.{name}.task_type: 'regression' or 'classification'")
    return spec


def fetch_spec(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The dataset as an ``http`` artifact for :func:`crucible.sources.downloads.fetch`."""
    check_spec(name, spec)
    return {"kind": "http", "url": spec["url"], "filename": f"{name}.json.gz", "sha256": spec["sha256"]}


def make_ids(name: str, n: int) -> list[str]:
    """``<name>-<i+1>`` zero-padded as matbench pads its mbids."""
    width = int(math.floor(math.log10(n))) + 1
    prefix = name.replace("_", "-")
    return [f"{prefix}-{i + 1:0{width}d}" for i in range(n)]


def clean_user_dataset(name: str, spec: dict[str, Any], raw_path: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read, type and id a user dataset; the table has the official tasks' columns. The file is
    checked against the dataset's pin first: one edited after its fetch stops here."""
    from crucible.core.hashes import file_sha256
    from crucible.matbench.clean import mean_absolute_deviation, read_matminer
    from crucible.sources.pinned_files import verify_pinned

    check_spec(name, spec)
    verify_pinned(raw_path, spec["sha256"], f"user dataset {name!r}", f"config matbench.user_datasets.{name}.sha256")
    meta = {"input_type": spec["input"], "target": spec["target"], "task_type": spec["task_type"]}
    from crucible.core.reading import check_size

    check_size(raw_path)  # before matminer inflates the whole file
    try:
        body = read_matminer(name, raw_path, meta)
    except DataValidationError:
        raise
    except Exception as exc:  # noqa: BLE001 - matminer's reader fails in many ways on a foreign file
        raise DataValidationError(
            f"{raw_path}: not a matminer dataset ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None
    if len(body) < 10:
        raise DataValidationError(f"{raw_path}: {name} has {len(body)} rows; 5-fold cross-validation needs at least 10")
    df = pd.DataFrame({"mbid": make_ids(name, len(body)), **{c: body[c] for c in body.columns}})
    y = df["target"].to_numpy()
    stats = (
        {"mad": mean_absolute_deviation(y.astype(float))}
        if spec["task_type"] == "regression"
        else {"frac_true": float(np.mean(y.astype(float)))}
    )
    card = {
        "task": name,
        "user_dataset": True,
        "task_type": spec["task_type"],
        "input_type": spec["input"],
        "target": spec["target"],
        "unit": spec.get("unit"),
        "n": int(len(df)),
        **stats,
        "source": "user",
        "inputs_available": "structure" if df["structure"].notna().any() else "composition",
        "raw_file": {"path": Path(raw_path).name, "sha256": file_sha256(raw_path), "url": spec["url"]},
        "split": "KFold/StratifiedKFold(n_splits=5, shuffle=True, random_state=18012019) over the file's row order",
        "crucible_version": __version__,
    }
    return df, card


def build_user_folds(
    data: pd.DataFrame, task_type: str, inner_fraction: float = 0.25, inner_seed: int = 7
) -> pd.DataFrame:
    from crucible.matbench.folds import folds_table, regenerate_test_ids

    mbids = data["mbid"].to_numpy().astype(str)
    target = data["target"].to_numpy()
    return folds_table(
        mbids, regenerate_test_ids(mbids, target, task_type), target, task_type, inner_fraction, inner_seed
    )


def score_user_dataset(
    card: dict[str, Any],
    data: pd.DataFrame,
    folds: pd.DataFrame,
    predictions: list[pd.DataFrame],
    model: str,
    sidecars: list[dict[str, Any]],
) -> dict[str, Any]:
    """The scores record of :func:`crucible.matbench.scoring.score_task` for a user dataset."""
    from crucible.matbench.scoring import score_fold, score_task

    task_type = card["task_type"]
    truth = pd.Series(data["target"].to_numpy(), index=data["mbid"].to_numpy())
    fold_of = pd.Series(folds["fold"].to_numpy(), index=folds["mbid"].to_numpy())
    per_fold = []
    for k, pred in enumerate(predictions):
        expected = sorted(fold_of.index[fold_of.to_numpy() == k])
        if sorted(pred["mbid"]) != expected:
            raise DataValidationError(f"{card['task']} fold {k}: predictions do not cover exactly the fold's test ids")
        y_true = truth.loc[pred["mbid"]].to_numpy()
        proba = pred["probability"].to_numpy() if "probability" in pred else None
        per_fold.append(score_fold(task_type, y_true, pred["prediction"].to_numpy(), proba))
    used = sorted({bool(s.get("structures_used", False)) for s in sidecars})
    record = score_task(
        card["task"],
        task_type,
        per_fold,
        card.get("mad", card.get("frac_true")),
        model=model,
        input_kind="structure" if card["inputs_available"] == "structure" else "composition-only",
    )
    record["benchmark"] = "user dataset (Matbench protocol)"
    record["task_input"] = card["input_type"]
    record["structures_used"] = used == [True]
    return record


def user_table(records: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per model: leaderboard metric mean ± std, per-fold values, whether structures were used."""
    rows = []
    for rec in sorted(records, key=lambda r: r["model"]):
        metric = rec["leaderboard_metric"]
        row = {
            "dataset": rec["task"],
            "model": rec["model"],
            "structures_used": rec["structures_used"],
            "metric": metric,
            "mean": rec["stats"][metric]["mean"],
            "std": rec["stats"][metric]["std"],
        }
        for f in rec["folds"]:
            row[f"fold_{f['fold']}"] = f["scores"][metric]
        row["scaled_error"] = rec["scaled_error"]["mean"]
        rows.append(row)
    return pd.DataFrame(rows)


# The stages of a user dataset (crucible matbench user-*): files in, files out.


def fetch_user_dataset(dataset: str, spec: dict[str, Any], out: str) -> None:
    """Download the dataset's file to ``out``, checked against the entry's pinned SHA-256.

    Args:
        out: the downloaded file to write: resources/downloads/user/{dataset}.json.gz
        dataset: the user dataset's name (a key of matbench.user_datasets)
        spec: JSON of its matbench.user_datasets entry
    """
    from crucible.sources.downloads import fetch

    fetch(dataset, fetch_spec(dataset, spec), out)


def write_clean_user_dataset(dataset: str, spec: dict[str, Any], raw: InFile, out_data: str, out_card: str) -> None:
    """A user dataset's .json.gz as a typed task table with ids, and its card.

    Args:
        raw: the downloaded .json.gz (checked against the entry's sha256)
        out_data: the clean table to write: results/matbench/user/{dataset}/data.parquet
        out_card: the card to write: results/matbench/user/{dataset}/card.json
        dataset: as in :func:`crucible.matbench.user_datasets.fetch_user_dataset`
        spec: as in :func:`crucible.matbench.user_datasets.fetch_user_dataset`
    """
    from crucible.matbench.clean import write_clean

    df, card = clean_user_dataset(dataset, spec, raw)
    write_clean(df, card, out_data, out_card)


def write_user_folds(data: InFile, card: InFile, out: str, inner_fraction: float = 0.25, inner_seed: int = 7) -> None:
    """Matbench's 5-fold recipe (seed 18012019) on a user dataset.

    Args:
        out: the folds table to write: results/matbench/user/{dataset}/folds.parquet
        data: the clean table: results/matbench/user/{dataset}/data.parquet
        card: the card: results/matbench/user/{dataset}/card.json
        inner_fraction: as in :func:`crucible.matbench.folds.write_task_folds`
        inner_seed: as in :func:`crucible.matbench.folds.write_task_folds`
    """
    from crucible.core.io import read_json, read_parquet
    from crucible.matbench.folds import write_folds

    task_type = read_json(card)["task_type"]
    write_folds(build_user_folds(read_parquet(data), task_type, inner_fraction, inner_seed), out)


def write_user_scores(
    model: str, card: InFile, data: InFile, folds: InFile, predictions: list[InFile], out: str
) -> None:
    """Score the five folds' prediction files (their sidecars say whether structures were used).

    Args:
        model: the model's name, as recorded in the scores
        folds: the folds table: results/matbench/user/{dataset}/folds.parquet
        predictions: fold_0 .. fold_4 predictions
        out: the scores JSON to write: results/matbench/user/{dataset}/scores/{model}.json
        card: as in :func:`crucible.matbench.user_datasets.write_user_folds`
        data: as in :func:`crucible.matbench.user_datasets.write_user_folds`
    """
    from crucible.core.io import read_json, read_parquet
    from crucible.matbench.scoring import write_scores
    from crucible.matbench.tasks import N_FOLDS

    if len(predictions) != N_FOLDS:
        raise ConfigError(f"user-score: --predictions takes {N_FOLDS} files (fold_0 .. fold_4), got {len(predictions)}")
    preds = [read_parquet(p) for p in predictions]
    sidecars = [
        read_json(Path(p).with_suffix(".json")) if Path(p).with_suffix(".json").is_file() else {} for p in predictions
    ]
    record = score_user_dataset(read_json(card), read_parquet(data), read_parquet(folds), preds, model, sidecars)
    write_scores(record, out)


USER_TABLE_HEADERS = {
    "structures_used": "structures used",
    "scaled_error": "scaled error",
    **{f"fold_{k}": f"fold {k}" for k in range(5)},
}


def write_user_table(scores: list[InFile], out_csv: str, out_md: str, out_tex: str) -> None:
    """One user dataset's scores, every model: CSV, Markdown and LaTeX.

    Args:
        scores: scores JSONs of the dataset, one per model
        out_csv: the table, CSV
        out_md: the table, Markdown
        out_tex: the table, LaTeX
    """
    from crucible.core.io import read_json
    from crucible.report.tables import write_table

    table = user_table([read_json(p) for p in scores])
    name = table["dataset"].iloc[0] if len(table) else "user dataset"
    write_table(
        table,
        csv=out_csv,
        md=out_md,
        tex=out_tex,
        digits=4,
        title=f"{name}: 5-fold scores (Matbench protocol, user dataset)",
        caption=f"Per model, its leaderboard metric on each of the 5 test folds of {name} (seeded 5-fold "
        "split of the user's table), their mean ± std (ddof 0) and the scaled error (MAE/MAD or (1 − AUC)/0.5).",
        headers=USER_TABLE_HEADERS,
    )
