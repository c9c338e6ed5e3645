"""The shared table writer: a printed table has a title, a one-line caption and worded headers,
percentages print as percentages, and the CSV keeps every number and column name (issue 23)."""

from __future__ import annotations

import pandas as pd
import pytest

from crucible.report.tables import TableError, code_names, to_markdown, write_table

TABLE = pd.DataFrame(
    {"model": ["a", "b"], "match_rate": [5.6, 12.345678], "n_items": [125, 8], "mean_rms": [0.15691, None]}
)
HEADERS = {"match_rate": "match rate", "n_items": "items", "mean_rms": "mean RMS (Å)"}


def test_markdown_opens_with_title_caption_and_notes_and_latex_captions_both(tmp_path):
    md, tex, csv = tmp_path / "t.md", tmp_path / "t.tex", tmp_path / "t.csv"
    write_table(
        TABLE,
        csv=csv,
        md=md,
        tex=tex,
        title="Text-to-crystal on aflow-prototypes",
        caption="Per generator, its 125 test items.",
        notes="Published rows: see the CSV.",
        headers=HEADERS,
        percent=("match_rate",),
    )
    lines = md.read_text().splitlines()
    assert lines[:6] == [
        "# Text-to-crystal on aflow-prototypes",
        "",
        "Per generator, its 125 test items.",
        "",
        "Published rows: see the CSV.",
        "",
    ]
    assert lines[6] == "| model | match rate (%) | items | mean RMS (Å) |"
    # a percentage with one decimal, other floats with the table's digits, counts as integers
    assert lines[8] == "| a | 5.6 | 125 | 0.1569 |" and lines[9] == "| b | 12.3 | 8 | – |"
    assert r"\caption{Text-to-crystal on aflow-prototypes. Per generator, its 125 test items.}" in tex.read_text()
    assert r"match rate (\%)" in tex.read_text() and "12.3 &" in tex.read_text()
    back = pd.read_csv(csv)
    assert list(back.columns) == list(TABLE.columns) and back["match_rate"][1] == 12.345678


@pytest.mark.parametrize("missing", ["title", "caption"])
def test_a_printed_table_without_title_or_caption_is_refused_naming_the_file(tmp_path, missing):
    kwargs = {"title": "T", "caption": "C.", missing: None}
    with pytest.raises(TableError, match=rf"t\.md: a printed table needs a {missing}"):
        write_table(TABLE, csv=tmp_path / "t.csv", md=tmp_path / "t.md", headers=HEADERS, **kwargs)
    assert not (tmp_path / "t.md").exists() and not (tmp_path / "t.csv").exists()  # none of its files
    # a CSV alone is for tools: no title needed
    write_table(TABLE, csv=tmp_path / "only.csv")


def test_code_name_headers_are_refused_and_worded_ones_pass(tmp_path):
    with pytest.raises(TableError, match=r"\['match_rate', 'n_items'\]"):
        write_table(TABLE, md=tmp_path / "t.md", title="T", caption="C.", headers={"mean_rms": "mean RMS"})
    assert not (tmp_path / "t.md").exists()
    with pytest.raises(TableError, match="code names"):  # the renderers check too
        to_markdown(TABLE)
    assert code_names("MAE_total (eV)") == ["MAE_total"]
    assert code_names("question_type") == ["question_type"]
    for worded in ("mp-20 match rate (%) [pymatgen-default]", "B0′ MAE vs WIEN2k", "EFwT (0.02 eV, 0.03 eV/Å)"):
        assert code_names(worded) == [], worded


# the one printed table that is part of a document, not a table file: the reaction package's report.md
DOCUMENT_TABLES = {"src/crucible/reactions/report.py": 1}


def test_every_family_prints_its_tables_through_the_shared_writer():
    """A new family's table cannot skip the title, caption and header checks: no module but
    crucible.report.tables renders Markdown or LaTeX tables itself (pandas' own writers included)."""
    import re

    from helpers import REPO

    renders = re.compile(r"\b(?:to_markdown|to_latex)\(")
    found = {}
    for path in sorted((REPO / "src" / "crucible").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel == "src/crucible/report/tables.py":
            continue
        n = len(renders.findall(path.read_text()))
        if n:
            found[rel] = n
    assert found == DOCUMENT_TABLES


def test_significant_digits_print_a_published_16610_as_16610_not_16610_0000(tmp_path):
    from crucible.report.tables import significant_text

    assert [significant_text(v, 4) for v in (16610.0, 0.012345, 3.333e16, 1.0, 450.0, -2.5e-5, 0.0)] == [
        "16610",
        "0.01235",
        "3.333e+16",
        "1.000",
        "450.0",
        "-2.500e-05",
        "0",
    ]
    df = pd.DataFrame({"model": ["a"], "force_jump": [23140.0], "tortuosity": [1.036]})
    heads = {"force_jump": "force jump", "tortuosity": "tortuosity"}
    write_table(df, md=tmp_path / "t.md", title="T", caption="C.", headers=heads, significant=4)
    assert "| a | 23140 | 1.036 |" in (tmp_path / "t.md").read_text()
