"""Writers for the paper's tables: CSV for tools, Markdown for the README, LaTeX for the paper."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd

from crucible.io import write_text


def _cell(value: Any, digits: int) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "–"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        return f"{value:.{digits}f}"
    return str(value)


def to_markdown(df: pd.DataFrame, digits: int = 4) -> str:
    header = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(_cell(v, digits) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([header, rule, *body]) + "\n"


_TEX_ESCAPES = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\^{}", "±": r"$\pm$"}


def _tex(text: str) -> str:
    return "".join(_TEX_ESCAPES.get(ch, ch) for ch in text)


def to_latex(df: pd.DataFrame, digits: int = 4, caption: str | None = None) -> str:
    spec = "l" * len(df.columns)
    lines = [r"\begin{table}", r"\centering", rf"\begin{{tabular}}{{{spec}}}", r"\hline"]
    lines.append(" & ".join(_tex(str(c)) for c in df.columns) + r" \\")
    lines.append(r"\hline")
    for row in df.itertuples(index=False):
        lines.append(" & ".join(_tex(_cell(v, digits)) for v in row) + r" \\")
    lines += [r"\hline", r"\end{tabular}"]
    if caption:
        lines.append(rf"\caption{{{_tex(caption)}}}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def write_table(df: pd.DataFrame, csv: str | os.PathLike | None = None, md: str | os.PathLike | None = None,
                tex: str | os.PathLike | None = None, digits: int = 4, caption: str | None = None,
                md_preamble: str = "") -> None:
    """Write ``df`` in each requested format, atomically. CSV keeps full float precision."""
    if csv:
        write_text(df.to_csv(index=False, lineterminator="\n", float_format="%.10g"), csv)
    if md:
        write_text(md_preamble + to_markdown(df, digits), md)
    if tex:
        write_text(to_latex(df, digits, caption), tex)
