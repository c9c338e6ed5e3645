"""Tables, the figure and the self-contained package of one reaction dataset."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crucible.core.io import InFile, write_json, write_text
from crucible.reactions.prompts import FB_INSTRUCTION, MC_INSTRUCTION, SYSTEM_PROMPT, user_prompt
from crucible.reactions.scoring import FB_TYPES, PAIRS, QUESTION_TYPES, bootstrap_interval
from crucible.report.tables import to_markdown, write_table

EXPECTED_SUFFIX = " (expected)"  # the random baseline's exact expectation, a row of its own

COLUMNS = [
    "model",
    "question_type",
    "n",
    "avg_relative_score",
    "ci95_low",
    "ci95_high",
    "exact_match_accuracy",
    "avg_yield_ratio",
    "hit_rate",
    "best_hit_rate_among_scored",
    "num_invalid",
    "num_cut_off",
    "num_off_schema",
]


def _relative_values(result: dict[str, Any]) -> list[float]:
    return [r["relative_score"] for r in result["per_question"] if r["relative_score"] is not None]


def results_table(scores: list[dict[str, Any]], n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """model × question type with bootstrap 95 % intervals of the average relative score."""
    rows = []
    for sc in scores:
        for qtype in QUESTION_TYPES:
            res = sc["types"].get(qtype)
            if res is None or not res["per_question"]:
                continue
            summ = res["summary"]
            ci = bootstrap_interval(_relative_values(res), n_boot, seed)
            rows.append(
                {
                    "model": sc["model"],
                    "question_type": qtype,
                    "n": summ["num_questions"],
                    "avg_relative_score": summ["avg_relative_score"],
                    "ci95_low": ci[0] if ci else None,
                    "ci95_high": ci[1] if ci else None,
                    "exact_match_accuracy": summ.get("exact_match_accuracy"),
                    "avg_yield_ratio": summ.get("avg_yield_ratio"),
                    "hit_rate": summ.get("hit_rate"),
                    "best_hit_rate_among_scored": summ.get("best_hit_rate_among_scored"),
                    "num_invalid": summ["num_invalid"],
                    "num_cut_off": summ.get("num_cut_off", 0),
                    "num_off_schema": summ.get("num_off_schema", 0),
                }
            )
            expected = sc.get("expected", {}).get(qtype)
            if expected:
                rows.append(
                    {
                        "model": f"{sc['model']}{EXPECTED_SUFFIX}",
                        "question_type": qtype,
                        "n": summ["num_questions"],
                        "ci95_low": None,
                        "ci95_high": None,
                        "num_invalid": 0,
                        "num_cut_off": 0,
                        "num_off_schema": 0,
                        **expected,
                    }
                )
    df = pd.DataFrame(rows, columns=COLUMNS)
    counts = ("n", "num_invalid", "num_cut_off", "num_off_schema")
    return df.astype({c: "int64" for c in counts}).astype(
        {c: "float64" for c in COLUMNS if c not in ("model", "question_type", *counts)}
    )


def paired_table(scores: list[dict[str, Any]], n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per model and design: mean over paired questions of (with references − without)."""
    rows = []
    for sc in scores:
        for with_ref, control in PAIRS:
            a, b = sc["types"].get(with_ref), sc["types"].get(control)
            if not a or not b:
                continue
            base = {r["pair_id"]: r for r in b["per_question"]}
            pairs = [
                (r, base[r["pair_id"]])
                for r in a["per_question"]
                if r["pair_id"] in base
                and r["relative_score"] is not None
                and base[r["pair_id"]]["relative_score"] is not None
            ]
            diffs = [r["relative_score"] - c["relative_score"] for r, c in pairs]
            if not diffs:
                continue
            ci = bootstrap_interval(diffs, n_boot, seed)
            rows.append(
                {
                    "model": sc["model"],
                    "with_references": with_ref,
                    "without": control,
                    "n_pairs": len(diffs),
                    "mean_difference": float(np.mean(diffs)),
                    "ci95_low": ci[0],
                    "ci95_high": ci[1],
                    "improved": int(sum(d > 0 for d in diffs)),
                    "worsened": int(sum(d < 0 for d in diffs)),
                    # the paired questions share their options, so one index is one answer
                    "same_answer": int(sum(r.get("prediction") == c.get("prediction") for r, c in pairs)),
                }
            )
    cols = [
        "model",
        "with_references",
        "without",
        "n_pairs",
        "mean_difference",
        "ci95_low",
        "ci95_high",
        "improved",
        "worsened",
        "same_answer",
    ]
    return pd.DataFrame(rows, columns=cols)


RESULTS_HEADERS = {
    "question_type": "question type",
    "n": "questions",
    "avg_relative_score": "mean relative score",
    "ci95_low": "95 % CI low",
    "ci95_high": "95 % CI high",
    "exact_match_accuracy": "choice: exact match (share)",
    "avg_yield_ratio": "choice: yield / best yield",
    "hit_rate": "fill-in: real combination (share of questions)",
    "best_hit_rate_among_scored": "fill-in: best combination (share of real ones)",
    "num_invalid": "invalid answers",
    "num_cut_off": "of which cut off at the token limit",
    "num_off_schema": "of which off the answer schema",
}
PAIRED_HEADERS = {
    "with_references": "with references",
    "without": "without (control)",
    "n_pairs": "pairs",
    "mean_difference": "mean difference of relative score",
    "ci95_low": "95 % CI low",
    "ci95_high": "95 % CI high",
    "same_answer": "same answer both ways",
}


def results_caption(dataset: str, table: pd.DataFrame, n_boot: int) -> str:
    types = table.drop_duplicates("question_type")
    models = table.loc[~table["model"].str.endswith(EXPECTED_SUFFIX), "model"].nunique()
    return (
        f"{models} model(s) on {int(types['n'].sum())} questions of {len(types)} types built "
        f"from all of {dataset}'s table (no split): relative score = effective score of the chosen conditions / "
        "best effective score among the options (fill-in: over the answers that name a real combination), with a "
        f"bootstrap 95 % interval ({n_boot} resamples of questions). Fill-in questions also report how often the "
        "answer is a real combination (share of questions) and, among those, how often it is the best one (share "
        "of the real ones); the two are independent: every answer can name a real combination and none the best. "
        f'Rows "random{EXPECTED_SUFFIX}" are the exact expectation of a uniform random answer.'
    )


def paired_caption(dataset: str, n_boot: int) -> str:
    return (
        f"On {dataset}, the same questions with the prompt's reference condition groups and without: mean "
        f"difference of relative score (with − without) and its bootstrap 95 % interval ({n_boot} resamples), "
        "with the pairs improved, worsened and answered the same both ways. A model that answers every pair the "
        "same (the baselines, which do not read the references) differs by 0 by construction: its rows are a "
        "check, and only a model that reads the prompt can move them."
    )


def write_tables(
    dataset: str,
    scores: list[dict[str, Any]],
    out_csv,
    out_md,
    out_tex,
    out_paired_csv,
    out_paired_md,
    out_paired_tex,
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    table = results_table(scores, n_boot, seed)
    write_table(
        table,
        out_csv,
        out_md,
        out_tex,
        digits=3,
        title=f"Reaction-condition selection on {dataset}",
        caption=results_caption(dataset, table, n_boot),
        headers=RESULTS_HEADERS,
    )
    paired = paired_table(scores, n_boot, seed)
    write_table(
        paired,
        out_paired_csv,
        out_paired_md,
        out_paired_tex,
        digits=3,
        title=f"Paired effect of references on {dataset}",
        caption=paired_caption(dataset, n_boot),
        headers=PAIRED_HEADERS,
    )
    return table


def write_report(
    dataset: str,
    score_paths: list[str | os.PathLike],
    tables: dict[str, str | os.PathLike],
    figure_paths: list[str | os.PathLike],
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """The results and paired tables and the figure of one dataset from its models' score files.

    ``tables`` maps ``csv, md, tex, paired_csv, paired_md, paired_tex`` to paths.
    """
    from crucible.core.io import read_json
    from crucible.report.figures import save_figure

    table = write_tables(
        dataset,
        [read_json(p) for p in score_paths],
        tables["csv"],
        tables["md"],
        tables["tex"],
        tables["paired_csv"],
        tables["paired_md"],
        tables["paired_tex"],
        n_boot,
        seed,
    )
    save_figure(relative_score_figure(dataset, table), *figure_paths)
    return table


def _bar_values(rows: pd.DataFrame, qtype: str) -> tuple:
    """What one question type's bars and markers show, hashable; NaN as None so it compares."""
    sub = rows[rows["question_type"] == qtype]
    cols = ["model", "n", "avg_relative_score", "ci95_low", "ci95_high"]
    return tuple(
        tuple(None if isinstance(v, float) and np.isnan(v) else v for v in rec)
        for rec in sub[cols].itertuples(index=False, name=None)
    )


def question_type_groups(table: pd.DataFrame) -> list[list[str]]:
    """Question types grouped when every model, the random expectation included, has exactly the
    same n, score and interval on them (baselines that ignore the references give the reference
    and control variants the bars of the plain type); in :data:`QUESTION_TYPES` order of the
    first member. A model that reads the references splits the group again."""
    present = [q for q in QUESTION_TYPES if q in set(table["question_type"])]
    groups: dict[tuple, list[str]] = {}
    for qtype in present:
        groups.setdefault(_bar_values(table, qtype), []).append(qtype)
    return list(groups.values())


# What a reader of the figure is told each question type is (docs/reactions.md, questions.py).
PLAIN_NAMES = {
    "single_varying": "vary one condition",
    "all_varying": "vary all conditions",
    "single_varying_reference": "vary one, with references",
    "single_varying_reference_control": "vary one, its control",
    "all_varying_reference": "vary all, with references",
    "all_varying_reference_control": "vary all, its control",
    "cross_substrate_reference": "vary all, other substrates' best",
    "all_blank": "fill in every blank",
    "all_blank_reference": "fill in, with references",
}


def _group_label(group: list[str]) -> str:
    """A group's tick label: each question type in plain words (:data:`PLAIN_NAMES`), one a line."""
    return "\n".join(PLAIN_NAMES.get(q, q.replace("_", " ")) for q in group)


def relative_score_figure(dataset: str, table: pd.DataFrame):
    """Bars of each model's average relative score per question type (95 % bootstrap interval),
    one group for question types whose results are identical for every model
    (:func:`question_type_groups`), and the random baseline's expected score as a black marker
    across each group."""
    import matplotlib.pyplot as plt

    is_expected = table["model"].str.endswith(EXPECTED_SUFFIX)
    data, expected = table[~is_expected], table[is_expected]
    groups = question_type_groups(table)
    models = list(dict.fromkeys(data["model"]))
    x = np.arange(len(groups))
    width = 0.8 / max(1, len(models))
    fig, ax = plt.subplots(figsize=(max(7.0, 1.5 * len(groups) + 3), 4.8))
    heads = [g[0] for g in groups]
    for i, m in enumerate(models):
        sub = data[data["model"] == m].set_index("question_type").reindex(heads)
        y = sub["avg_relative_score"].to_numpy(dtype=float)
        err = np.vstack([y - sub["ci95_low"].to_numpy(dtype=float), sub["ci95_high"].to_numpy(dtype=float) - y])
        ax.bar(x + (i - (len(models) - 1) / 2) * width, y, width, yerr=err, capsize=2, label=m)
    for j, name in enumerate(dict.fromkeys(expected["model"])):
        sub = expected[expected["model"] == name].set_index("question_type").reindex(heads)
        y = sub["avg_relative_score"].to_numpy(dtype=float)
        label = f"{name.removesuffix(EXPECTED_SUFFIX)}: expected value"
        ax.hlines(y, x - 0.42, x + 0.42, colors="black", linestyles=("-", "--", ":")[j % 3], lw=1.6, label=label)
    ax.set_xticks(x, [_group_label(g) for g in groups], fontsize=7)
    ax.set_ylabel("average relative score")
    ax.set_ylim(0, 1.05)
    merged = any(len(g) > 1 for g in groups)
    ax.set_title(
        f"{dataset}: relative score by question type (bars: 95 % bootstrap interval)"
        + ("\nquestion types listed together have identical results for every model" if merged else "")
        + "\n'with references': low-to-mid runs of the substrate given; 'its control': the same question without them",
        fontsize=9,
    )
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def _rxnoptbench_name(qtype: str) -> str:
    return f"fill_in_blank_{qtype}.json" if qtype in FB_TYPES else f"multiple_choice_{qtype}.json"


def example_predictions(question_files: list[str | os.PathLike], n: int = 3) -> dict[str, dict[str, Any]]:
    """Per question type, the random baseline's answers to the first ``n`` questions: what a
    prediction file looks like, with real ids."""
    from crucible.reactions.baselines import RandomChoice
    from crucible.reactions.scoring import load_questions

    return {
        Path(path).parent.name: RandomChoice(random_state=0).predict(load_questions(path)[:n])
        for path in question_files
    }


def write_report_files(
    dataset: str,
    scores: list[InFile],
    out_csv: str | os.PathLike,
    out_md: str | os.PathLike,
    out_tex: str | os.PathLike,
    out_paired_csv: str | os.PathLike,
    out_paired_md: str | os.PathLike,
    out_paired_tex: str | os.PathLike,
    out_figure: list[str | os.PathLike],
    bootstrap: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """:func:`write_report` with each table's path as its own argument (the CLI's).

    Args:
        dataset: the dataset's name (titles and captions)
        scores: scores JSONs results/reactions/{dataset}/scores/{model}.json, one per model
        out_figure: png and/or pdf paths
        bootstrap: bootstrap resamples of the 95 % intervals (default 1000)
        seed: seed of the bootstrap (default 0)
        out_csv: as in :func:`crucible.mlip.report.write_eos_table_files`
        out_md: the table, MD
        out_tex: the table, TEX
        out_paired_csv: the paired with/without-reference table, CSV
        out_paired_md: the paired with/without-reference table, MD
        out_paired_tex: the paired with/without-reference table, TEX
    """
    tables = {
        "csv": out_csv,
        "md": out_md,
        "tex": out_tex,
        "paired_csv": out_paired_csv,
        "paired_md": out_paired_md,
        "paired_tex": out_paired_tex,
    }
    return write_report(dataset, scores, tables, out_figure, bootstrap, seed)


def write_package_files(
    dataset: str,
    out_dir: str | os.PathLike,
    questions: list[InFile],
    card: InFile,
    summary: InFile,
    table: InFile,
) -> None:
    """:func:`write_package` from the files the workflow has: the card, the build summary and
    the results table (CSV).

    Args:
        dataset: the dataset's name
        out_dir: the package directory to write
        questions: question files to copy into the package
        card: the dataset's card: results/reactions/data/{dataset}.json
        summary: the build record: results/reactions/{dataset}/build.json
        table: the dataset's results table (CSV) for the package's report.md
    """
    from crucible.core.io import read_json

    write_package(
        dataset,
        out_dir,
        questions,
        read_json(card),
        pd.read_csv(table),
        read_json(summary),
        example_predictions(questions),
    )


def write_package(
    dataset: str,
    out_dir: str | os.PathLike,
    question_files: list[str],
    card: dict[str, Any],
    table: pd.DataFrame,
    build_summary: dict[str, Any],
    example_predictions: dict[str, dict[str, Any]],
) -> None:
    """RxnOptBench's self-contained output directory: data sets, prompt templates, example
    predictions and ``report.md``, as RxnOptBench's builders lay out one output package
    (``build_multiple_choice.py`` / ``build_fill_in_blank.py`` of the Hugging Face dataset
    songjhPKU/RxnOptBench, testsetV6 README)."""
    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    lines = [
        f"# Reaction-condition selection package: `{dataset}`",
        "",
        f"Source: {card['reference']}; file `{card['source_file']}` (SHA-256 `{card['source_sha256']}`), "
        f"{card['rows']} rows, {card['substrates']} substrates, condition keys {', '.join(card['condition_keys'])}.",
        "",
        "| file | question_type | questions |",
        "|---|---|---|",
    ]
    for path in question_files:
        qtype = Path(path).parent.name
        name = _rxnoptbench_name(qtype)
        shutil.copyfile(path, out / name)
        questions = json.loads(Path(path).read_text(encoding="utf-8"))
        lines.append(f"| `{name}` | `{qtype}` | {len(questions)} |")
        instruction = FB_INSTRUCTION if qtype in FB_TYPES else MC_INSTRUCTION
        example = user_prompt(questions[0]) if questions else "(no question of this type)"
        write_text(
            f"[system]\n{SYSTEM_PROMPT}\n\n[user, example: {questions[0]['id'] if questions else '-'}]\n{example}\n"
            f"\n[instruction]\n{instruction}\n",
            out / f"prompt_{qtype}.txt",
        )
        write_json(example_predictions.get(qtype, {}), out / f"example_prediction_{qtype}.json")
    lines += [
        "",
        "Predictions: multiple choice `{id: option index}`; fill in the blank `{id: {key: candidate index}}`.",
        "Score: `crucible reactions score --questions <file> --predictions <file> --out score.json`.",
        "",
        "## Baselines",
        "",
        to_markdown(table, digits=3, headers=RESULTS_HEADERS) if len(table) else "(none)",
        "",
        "## Build",
        "",
        "```json",
        json.dumps(build_summary, indent=2, sort_keys=True),
        "```",
        "",
    ]
    write_text("\n".join(lines), out / "report.md")
