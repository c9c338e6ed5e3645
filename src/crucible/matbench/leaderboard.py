"""The paper's leaderboard tables, built from the scores records and a cited table of
published numbers (``config/published_matbench.yaml``).

- ``matbench_leaderboard``: tasks (ordered by size) x models: mean ± std of the leaderboard
  metric (MAE, or matbench's label-based ROC AUC), the scaled error, and the published Dummy,
  RF-SCM/Magpie, CrabNet and best entry side by side, with which of them are composition-only.
- ``matbench_folds``: every fold's every metric, for every model and task.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd
import yaml

from crucible.core.errors import ConfigError
from crucible.core.io import InFile
from crucible.matbench.scoring import scaled_error_of
from crucible.matbench.tasks import TASKS

PUBLISHED_COLUMNS = ("Dummy", "RF-SCM/Magpie", "CrabNet", "best")


def load_published(path: str | os.PathLike) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(open(path, encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read published scores {path}: {exc}") from exc
    for key in ("citation", "models", "scores"):
        if key not in doc:
            raise ConfigError(f"{path}: missing key {key!r}")
    unknown = sorted(set(doc["scores"]) - set(TASKS))
    if unknown:
        raise ConfigError(f"{path}: unknown task(s) {', '.join(unknown)}")
    return doc


def published_scaled_error(value: float | None, record: dict[str, Any]) -> float | None:
    if value is None:
        return None
    return scaled_error_of(record["task_type"], value, record.get("mad"))


def _order(records: list[dict[str, Any]]) -> list[str]:
    tasks = {r["task"] for r in records}
    return [t for t in TASKS if t in tasks]


def leaderboard(
    records: list[dict[str, Any]], published: dict[str, Any], units: dict[str, str] | None = None
) -> pd.DataFrame:
    """One row per task; numeric columns for tools (CSV). ``units``: each task's target unit (its
    card's), the unit of every MAE in its row ("" for classification: ROC AUC has none)."""
    units = units or {}
    by_key = {(r["model"], r["task"]): r for r in records}
    models = sorted({r["model"] for r in records})
    rows = []
    for task in _order(records):
        any_record = next(r for r in records if r["task"] == task)
        row: dict[str, Any] = {
            "task": task,
            "n": any_record["n_test"],
            "metric": any_record["leaderboard_metric"],
            "unit": units.get(task, "") if any_record["leaderboard_metric"] == "mae" else "",
        }
        for model in models:
            rec = by_key.get((model, task))
            row[f"{model}_mean"] = rec["leaderboard_value"] if rec else np.nan
            row[f"{model}_std"] = rec["leaderboard_std"] if rec else np.nan
            row[f"{model}_scaled_error"] = rec["scaled_error"]["mean"] if rec else np.nan
            row[f"{model}_inputs"] = (rec.get("input_kind") or "–") if rec else "–"
            proba = rec["stats"].get("rocauc_proba") if rec else None
            row[f"{model}_rocauc_proba"] = proba["mean"] if proba else np.nan
        pub = published["scores"].get(task, {})
        for name in PUBLISHED_COLUMNS:
            value = pub.get(name)
            row[f"published_{name}"] = np.nan if value is None else float(value)
            row[f"published_{name}_scaled_error"] = (
                published_scaled_error(value, any_record) if value is not None else np.nan
            )
        row["published_best_name"] = pub.get("best_name", "–")
        rows.append(row)
    return pd.DataFrame(rows)


def _metric_label(metric: str, unit: str) -> str:
    """``MAE (MPa)``, ``ROC AUC``: what a row's numbers are, in its own unit."""
    from crucible.report.units import printed_unit

    name = {"mae": "MAE", "rocauc": "ROC AUC"}.get(metric, metric)
    if unit and not printed_unit(unit):  # a card that says the target has no unit (dielectric's n)
        return f"{name} (dimensionless)"
    return f"{name} ({unit})" if unit else name


def _pm(mean: float, std: float, digits: int) -> str:
    if np.isnan(mean):
        return "–"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def leaderboard_display(table: pd.DataFrame, published: dict[str, Any]) -> pd.DataFrame:
    """The human-readable table (Markdown/LaTeX): mean ± std, scaled error, published numbers."""
    models = [c[: -len("_mean")] for c in table.columns if c.endswith("_mean")]
    comp_only = {name: published["models"].get(name, {}).get("composition_only", False) for name in PUBLISHED_COLUMNS}
    out = []
    for row in table.to_dict("records"):
        digits = 4 if row["metric"] == "rocauc" or row["published_Dummy"] < 10 else 2
        line: dict[str, Any] = {
            "task": row["task"].removeprefix("matbench_"),
            "n": row["n"],
            "metric (unit of the row)": _metric_label(row["metric"], row.get("unit") or ""),
        }
        for model in models:
            inputs = str(row[f"{model}_inputs"])
            label = f"{model} ({'comp.' if inputs.startswith('composition') else inputs})"
            line[label] = _pm(row[f"{model}_mean"], row[f"{model}_std"], digits)
            line[f"{model} scaled"] = f"{row[f'{model}_scaled_error']:.3f}"
            # Its own column (not a note inside the numeric cell) when any task has it.
            if table[f"{model}_rocauc_proba"].notna().any():
                proba = row[f"{model}_rocauc_proba"]
                line[f"{model} AUC from probabilities"] = "–" if np.isnan(proba) else f"{proba:.4f}"
        for name in PUBLISHED_COLUMNS:
            value = row[f"published_{name}"]
            mark = "*" if comp_only[name] else ""
            label = f"{name}{mark}"
            line[label] = "–" if np.isnan(value) else f"{value:.{digits}f}"
        line["best entry"] = row["published_best_name"]
        out.append(line)
    return pd.DataFrame(out)


LEADERBOARD_TITLE = "Matbench v0.1 leaderboard (official 5-fold splits)"


def leaderboard_caption(table: pd.DataFrame) -> str:
    models = sorted(c[: -len("_mean")] for c in table.columns if c.endswith("_mean"))
    return (
        f"{', '.join(models) or 'no model'} on {len(table)} task(s) (n: rows of the task), each scored on the test sets of the official 5-fold splits "
        "(seed 18012019); published numbers on the same splits for reference."
    )


def leaderboard_notes(published: dict[str, Any]) -> str:
    return (
        "Mean ± std (ddof 0) over the 5 folds of MAE (regression) or matbench's label-based ROC AUC "
        "(classification; the AUC from probabilities, where a model gives them, in its own column); *scaled* is MAE/MAD or (1 − AUC)/0.5. "
        "Every value of a row, ours and published, is in the unit its metric column gives (the task's target unit for MAE; "
        "ROC AUC and scaled errors have none). "
        "The parenthesis says what our model saw: comp. = formulas only (the composition mirror has no "
        "structures). Published columns marked * are composition-only; RF-SCM/Magpie uses structure "
        "features on the structure tasks.\n\n"
        f"Published numbers: {published['citation']}."
    )


def composition_only_entries(table: pd.DataFrame, task_inputs: dict[str, str]) -> dict[str, list[bool]]:
    """Per model, per row of ``table``: whether the model saw formulas only (its ``_inputs``
    column, from the scores record) on a task whose input is a structure (``task_inputs``, the
    task cards' ``input_type``). Those entries are not like-for-like with structure models."""
    models = [c[: -len("_inputs")] for c in table.columns if c.endswith("_inputs")]
    structure_task = [task_inputs.get(task) == "structure" for task in table["task"]]
    return {
        model: [
            bool(on_structures and str(inputs).startswith("composition"))
            for on_structures, inputs in zip(structure_task, table[f"{model}_inputs"])
        ]
        for model in models
    }


def task_input_types(records: list[dict[str, Any]], cards: list[dict[str, Any]]) -> dict[str, str]:
    """Each task's native input (``composition`` or ``structure``): its card's ``input_type``,
    else what its scores records say (a hand call without cards)."""
    types = {r["task"]: r["task_input"] for r in records if r.get("task_input")}
    types.update({c["task"]: c["input_type"] for c in cards if c.get("input_type")})
    return types


def folds_table(records: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for rec in sorted(records, key=lambda r: (r["model"], TASKS.index(r["task"]))):
        for fold in rec["folds"]:
            rows.append(
                {
                    "model": rec["model"],
                    "task": rec["task"],
                    "fold": fold["fold"],
                    "n_test": fold["n_test"],
                    **fold["scores"],
                    "scaled_error": fold["scaled_error"],
                }
            )
    columns = [
        "model",
        "task",
        "fold",
        "n_test",
        "mae",
        "rmse",
        "mape",
        "max_error",
        "accuracy",
        "balanced_accuracy",
        "f1",
        "rocauc",
        "rocauc_proba",
        "scaled_error",
    ]
    df = pd.DataFrame(rows)
    return df.reindex(columns=columns)


def write_leaderboard_files(
    scores: list[InFile],
    published: InFile,
    out_csv: str,
    out_md: str,
    out_tex: str,
    out_folds_csv: str,
    out_png: str,
    out_pdf: str,
    cards: list[InFile] = (),
) -> pd.DataFrame:
    """The leaderboard (CSV with every number; Markdown/LaTeX for reading), the per-fold table
    and the scaled-error figure, from the models' scores records; the task cards give the units
    and which tasks are structure tasks (the figure marks composition-only entries on them).

    Args:
        scores: scores JSONs results/matbench/scores/{model}/{task}.json
        published: config/published_matbench.yaml
        out_csv: the leaderboard, CSV
        out_md: the leaderboard, Markdown
        out_tex: the leaderboard, LaTeX
        out_folds_csv: every fold's score of every model and task, CSV
        out_png: the scaled-error figure, PNG
        out_pdf: the scaled-error figure, PDF
        cards: task cards results/matbench/data/{task}.json: the MAE units, and which tasks are structure
            tasks (the figure draws composition-only entries on them hollow)
    """
    from crucible.core.io import read_json
    from crucible.report.figures import save_figure, scaled_error_figure
    from crucible.report.tables import write_table

    records = [read_json(p) for p in scores]
    published_table = load_published(published)
    task_cards = [read_json(p) for p in cards]
    table = leaderboard(records, published_table, {c["task"]: c.get("unit") or "" for c in task_cards})
    write_table(table, csv=out_csv)
    write_table(
        leaderboard_display(table, published_table),
        md=out_md,
        tex=out_tex,
        title=LEADERBOARD_TITLE,
        caption=leaderboard_caption(table),
        notes=leaderboard_notes(published_table),
    )
    write_table(folds_table(records), csv=out_folds_csv)
    hollow = composition_only_entries(table, task_input_types(records, task_cards))
    save_figure(scaled_error_figure(table, PUBLISHED_COLUMNS, hollow), out_png, out_pdf)
    return table
