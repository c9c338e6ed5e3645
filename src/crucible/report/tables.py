"""Writers for the paper's tables: CSV for tools, Markdown for the README, LaTeX for the paper.

One implementation for every family: CSV keeps full precision and the column names; Markdown and
LaTeX round floats to ``digits`` and print worded headers (``headers``). A printed table is
refused without a title and a one-line caption, or with a header that is still an identifier
(``question_type``): a reader of the paper never sees the code. Percent columns print as
percentages, with ``(%)`` in the header. ``significant`` prints floats to that many significant
digits instead of ``digits`` decimals (16610, 0.01235, 3.33e+16: a table whose columns span orders
of magnitude). ``sections`` prints a wide table as several narrow ones, each under its heading
(the CSV keeps the wide one).
"""

from __future__ import annotations

import os
import re
from typing import Any, Collection, Mapping, Sequence

import numpy as np
import pandas as pd

from crucible.core.io import write_text

PERCENT_DIGITS = 1
# a header a reader would have to decode: a word that is words joined by underscores
_IDENTIFIER = re.compile(r"(?<![\w-])[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+(?![\w-])")


class TableError(ValueError):
    """A table that cannot be printed as asked (a missing title or caption, a code-name header)."""


def significant_text(value: float, n: int) -> str:
    """``value`` to ``n`` significant digits, without padding zeros beyond them; scientific
    notation only outside 1e-3 … 1e7."""
    import math

    v = float(value)
    if v == 0 or not math.isfinite(v):
        return "0" if v == 0 else str(v)
    magnitude = math.floor(math.log10(abs(v)))
    if magnitude < -3 or magnitude >= 7:
        return f"{v:.{n - 1}e}"
    decimals = max(n - 1 - magnitude, 0)
    return f"{round(v, decimals):.{decimals}f}"


def _cell(value: Any, digits: int) -> str:
    if value is None or value is pd.NA or (isinstance(value, (float, np.floating)) and np.isnan(value)):
        return "–"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        # a negative digits asks for -digits significant digits (write_table's significant=)
        return significant_text(value, -digits) if digits < 0 else f"{float(value):.{digits}f}"
    return str(value)


def _rows(df: pd.DataFrame, digits: int, percent: Collection[str] = ()) -> list[list[str]]:
    places = [PERCENT_DIGITS if c in percent else digits for c in df.columns]
    return [[_cell(v, d) for v, d in zip(row, places)] for row in df.itertuples(index=False, name=None)]


def _headers(df: pd.DataFrame, headers: Mapping[str, str] | None, percent: Collection[str] = ()) -> list[str]:
    out = []
    for c in df.columns:
        head = str((headers or {}).get(c, c))
        out.append(head if c not in percent or "%" in head else f"{head} (%)")
    return out


def code_names(text: str) -> list[str]:
    """The words of ``text`` that are code names (``question_type``, ``MAE_total``)."""
    return [m.group(0) for m in _IDENTIFIER.finditer(text)]


def printed_headers(df: pd.DataFrame, headers: Mapping[str, str] | None = None, percent: Collection[str] = ()):
    """The headers the Markdown and LaTeX tables print; :class:`TableError` names any that is
    still a code name, so that each family's writer gives it a worded header."""
    heads = _headers(df, headers, percent)
    coded = [h for h in heads if code_names(h)]
    if coded:
        raise TableError(f"printed table headers {coded} are code names: give each a worded header (headers=...)")
    return heads


def to_markdown(
    df: pd.DataFrame, digits: int = 4, headers: Mapping[str, str] | None = None, percent: Collection[str] = ()
) -> str:
    heads = printed_headers(df, headers, percent)
    lines = ["| " + " | ".join(heads) + " |", "|" + "|".join("---" for _ in heads) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in _rows(df, digits, percent)]
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
    df: pd.DataFrame,
    digits: int = 4,
    caption: str | None = None,
    headers: Mapping[str, str] | None = None,
    percent: Collection[str] = (),
) -> str:
    """A booktabs ``tabular``; wrapped in a ``table`` float only when a caption is given."""
    align = "".join("r" if pd.api.types.is_numeric_dtype(df[c]) else "l" for c in df.columns)
    lines = [
        r"% requires \usepackage{booktabs}",
        rf"\begin{{tabular}}{{{align}}}",
        r"\toprule",
        " & ".join(_tex(h) for h in printed_headers(df, headers, percent)) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(_tex(c) for c in row) + r" \\" for row in _rows(df, digits, percent)]
    lines += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        lines = [lines[0], r"\begin{table}", r"\centering", *lines[1:], rf"\caption{{{_tex(caption)}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def write_table(
    df: pd.DataFrame,
    csv: str | os.PathLike | None = None,
    md: str | os.PathLike | None = None,
    tex: str | os.PathLike | None = None,
    *,
    title: str | None = None,
    caption: str | None = None,
    notes: str = "",
    digits: int = 4,
    headers: Mapping[str, str] | None = None,
    percent: Collection[str] = (),
    empty_note: str | None = None,
    significant: int | None = None,
    sections: Sequence[tuple[str, pd.DataFrame, Mapping[str, str]]] | None = None,
) -> None:
    """Write ``df`` in each requested format, atomically. CSV keeps full float precision and the
    column names.

    A printed table (``md`` or ``tex``) needs a ``title`` and a one-line ``caption`` (what, how many
    items, which split); Markdown opens with both, then any ``notes`` (more paragraphs, Markdown
    only); LaTeX puts ``title. caption`` in its ``\\caption``. Columns in ``percent`` hold
    percentages (0–100): they print with one decimal and ``(%)`` in the header. An empty table with
    an ``empty_note`` gets that sentence in Markdown instead of a bare header.
    """
    if significant is not None:
        digits = -int(significant)
    # (heading, frame, headers) of each printed table: the whole table, or its sections
    printed = [(None, df, headers)] if sections is None else [(h, d, hs) for h, d, hs in sections]
    if md or tex:
        # checked before anything is written: a refused table leaves none of its files behind
        missing = [name for name, text in (("title", title), ("caption", caption)) if not (text or "").strip()]
        if missing:
            raise TableError(f"{md or tex}: a printed table needs a {' and a '.join(missing)}")
        for _, part, heads in printed:
            printed_headers(part, heads, percent)
    if csv:
        write_text(df.to_csv(index=False, lineterminator="\n", float_format="%.10g"), csv)
    if md:
        if sections is None:
            body = f"{empty_note}\n" if df.empty and empty_note else to_markdown(df, digits, headers, percent)
        else:
            body = "\n".join(f"## {h}\n\n{to_markdown(d, digits, hs, percent)}" for h, d, hs in printed)
        notes_block = f"{notes.strip()}\n\n" if notes.strip() else ""
        write_text(f"# {title}\n\n{caption.strip()}\n\n{notes_block}{body}", md)
    if tex:
        full = f"{title.rstrip('.')}. {caption.strip()}"
        if sections is None or not printed:
            write_text(to_latex(df, digits, full, headers, percent), tex)
        else:
            # the first float carries the caption, each names its section
            parts = [
                to_latex(
                    d, digits, f"{title.rstrip('.')}: {h}." + (f" {caption.strip()}" if n == 0 else ""), hs, percent
                )
                for n, (h, d, hs) in enumerate(printed)
            ]
            write_text("\n".join(parts), tex)
