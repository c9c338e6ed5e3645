"""Writers for the paper's tables: CSV for tools, Markdown for the README, LaTeX for the paper.

One implementation for every benchmark (Matbench, interatomic potentials): CSV keeps full
precision; Markdown and LaTeX round floats to ``digits`` and may rename columns (``headers``).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import numpy as np
import pandas as pd

from crucible.io import write_text


def _cell(value: Any, digits: int) -> str:
    if value is None or (isinstance(value, (float, np.floating)) and np.isnan(value)):
        return "–"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.{digits}f}"
    return str(value)


def _rows(df: pd.DataFrame, digits: int) -> list[list[str]]:
    return [[_cell(v, digits) for v in row] for row in df.itertuples(index=False, name=None)]


def _headers(df: pd.DataFrame, headers: Mapping[str, str] | None) -> list[str]:
    return [str((headers or {}).get(c, c)) for c in df.columns]


def to_markdown(df: pd.DataFrame, digits: int = 4, headers: Mapping[str, str] | None = None) -> str:
    heads = _headers(df, headers)
    lines = ["| " + " | ".join(heads) + " |", "|" + "|".join("---" for _ in heads) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in _rows(df, digits)]
    return "\n".join(lines) + "\n"


_TEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
_TEX_UNICODE = {"Δ": r"$\Delta$", "Å³": r"\AA$^3$", "Å": r"\AA{}", "′": r"$'$", "–": "--", "±": r"$\pm$", "−": "$-$"}


def _tex(text: str) -> str:
    out = "".join(_TEX_ESCAPES.get(ch, ch) for ch in text)
    for symbol, command in _TEX_UNICODE.items():
        out = out.replace(symbol, command)
    return out


def to_latex(
    df: pd.DataFrame, digits: int = 4, caption: str | None = None, headers: Mapping[str, str] | None = None
) -> str:
    """A booktabs ``tabular``; wrapped in a ``table`` float only when a caption is given."""
    align = "".join("r" if pd.api.types.is_numeric_dtype(df[c]) else "l" for c in df.columns)
    lines = [
        r"% requires \usepackage{booktabs}",
        rf"\begin{{tabular}}{{{align}}}",
        r"\toprule",
        " & ".join(_tex(h) for h in _headers(df, headers)) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(_tex(c) for c in row) + r" \\" for row in _rows(df, digits)]
    lines += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        lines = [lines[0], r"\begin{table}", r"\centering", *lines[1:], rf"\caption{{{_tex(caption)}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def write_table(
    df: pd.DataFrame,
    csv: str | os.PathLike | None = None,
    md: str | os.PathLike | None = None,
    tex: str | os.PathLike | None = None,
    digits: int = 4,
    caption: str | None = None,
    md_preamble: str = "",
    headers: Mapping[str, str] | None = None,
    empty_note: str | None = None,
) -> None:
    """Write ``df`` in each requested format, atomically. CSV keeps full float precision.

    An empty table with an ``empty_note`` gets that sentence in Markdown instead of a bare header.
    """
    if csv:
        write_text(df.to_csv(index=False, lineterminator="\n", float_format="%.10g"), csv)
    if md:
        body = f"{empty_note}\n" if df.empty and empty_note else to_markdown(df, digits, headers)
        write_text(md_preamble + body, md)
    if tex:
        write_text(to_latex(df, digits, caption, headers), tex)
