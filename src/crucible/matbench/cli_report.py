"""``crucible matbench leaderboard`` and ``crucible matbench figures``: the paper's tables and figures."""

from __future__ import annotations

import argparse

from crucible.io import read_json, read_parquet


def _leaderboard(args: argparse.Namespace) -> int:
    from crucible.matbench import leaderboard as lb
    from crucible.report.figures import save_figure, scaled_error_figure
    from crucible.report.tables import write_table

    records = [read_json(p) for p in args.scores]
    published = lb.load_published(args.published)
    table = lb.leaderboard(records, published)
    write_table(table, csv=args.csv)
    display = lb.leaderboard_display(table, published)
    write_table(display, md=args.md, tex=args.tex, md_preamble=lb.leaderboard_preamble(published),
                caption="Matbench v0.1: mean ± std over the official folds; published numbers for reference.")
    write_table(lb.folds_table(records), csv=args.folds_csv)
    save_figure(scaled_error_figure(table, lb.PUBLISHED_COLUMNS), args.figure_png, args.figure_pdf)
    return 0


def _figures(args: argparse.Namespace) -> int:
    import pandas as pd

    from crucible.report.figures import parity_figure, roc_figure, save_figure

    card = read_json(args.card)
    data = read_parquet(args.data, columns=["mbid", "target"]).set_index("mbid")["target"]
    preds = pd.concat([read_parquet(p) for p in args.predictions], ignore_index=True)
    y_true = data.loc[preds["mbid"]].to_numpy()
    title = f"{args.model} on {card['task'].removeprefix('matbench_')}: {card['target']}"
    if card["task_type"] == "regression":
        fig = parity_figure(y_true.astype(float), preds["prediction"].to_numpy(dtype=float), title, card.get("unit") or "")
    else:
        from_labels = "probability" not in preds
        score = preds["prediction" if from_labels else "probability"].to_numpy(dtype=float)
        fig = roc_figure(y_true.astype(bool), score, title, from_labels)
    save_figure(fig, args.png, args.pdf)
    return 0


def add_report_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("leaderboard", help="leaderboard and per-fold tables, scaled-error figure")
    p.add_argument("--scores", nargs="+", required=True)
    p.add_argument("--published", required=True, help="config/published_matbench.yaml")
    p.add_argument("--csv", required=True)
    p.add_argument("--md", required=True)
    p.add_argument("--tex", required=True)
    p.add_argument("--folds-csv", required=True)
    p.add_argument("--figure-png", required=True)
    p.add_argument("--figure-pdf", required=True)
    p.set_defaults(func=_leaderboard)

    p = sub.add_parser("figures", help="parity plot (regression) or ROC curve (classification) of one model on one task")
    p.add_argument("--model", required=True)
    p.add_argument("--card", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--predictions", nargs="+", required=True)
    p.add_argument("--png", required=True)
    p.add_argument("--pdf", required=True)
    p.set_defaults(func=_figures)
