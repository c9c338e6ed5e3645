"""The CSP table: DiffCSP's Table 1 rows as cited in config/published_crystal.yaml, ours at 1 and
k samples under both conventions (each column naming its convention), the de-duplicated test set,
and a published-results file with a mistake refused naming the row."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import yaml

from crucible.core.errors import ConfigError
from crucible.crystal import csp_table
from crucible.crystal.scoring import CONVENTION_NAMES

from helpers import REPO

PUBLISHED = REPO / "config" / "published_crystal.yaml"


def _summary(dataset, responder, k, rates, dedup_items=5):
    """A CSP summary as score-samples writes it (10 test items, ``dedup_items`` of them
    de-duplicated); ``rates``: {convention: (m@1, r@1, m@k, r@k)}."""

    def block(total, m1, r1, mk, rk):
        # of the matched, half in the reference's space group
        sg1, sgk = (m / 2 if m else m for m in (m1, mk))
        return {
            "match_rate@1": m1,
            "rmse@1": r1,
            "match_rate@k": mk,
            "rmse@k": rk,
            "sg_match_rate@1": sg1,
            "sg_match_rate@k": sgk,
            "total": total,
        }

    def halved(v):
        return (x / 2 if x else x for x in v) if dedup_items else (0.0, None, 0.0, None)

    return {
        "responder": responder,
        "dataset": dataset,
        "k": k,
        "n_items": 10,
        "conventions": {
            c: {"all": block(10, *v), "deduplicated": block(dedup_items, *halved(v))} for c, v in rates.items()
        },
    }


def test_published_rows_are_diffcsps_table_1_as_the_issue_quotes_them():
    pub = csp_table.load_published(PUBLISHED)
    assert pub["convention"] == "cdvae"
    rows = {(r["method"], r["samples"]): r["scores"] for r in pub["rows"]}
    # the issue: DiffCSP on MP-20 about 51.5 % / 0.063 with 1 sample and 77.9 % / 0.049 with 20
    assert rows[("DiffCSP", 1)]["mp-20"] == {"match_rate": 51.49, "rmse": 0.0631}
    assert rows[("DiffCSP", 20)]["mp-20"] == {"match_rate": 77.93, "rmse": 0.0492}
    assert all(set(s) == {"perov-5", "carbon-24", "mp-20"} for s in rows.values())
    assert {r["source"] for r in pub["rows"]} == {"diffcsp-table1"}
    assert "2309.04475" in pub["sources"]["diffcsp-table1"]["citation"]


def _sections(md: str) -> dict[str, tuple[list[str], list[dict[str, str]]]]:
    """``{heading: (headers, rows as dicts)}`` of the printed CSP table's sections."""
    out = {}
    for chunk in md.split("\n## ")[1:]:
        heading, _, body = chunk.partition("\n")
        lines = [line for line in body.splitlines() if line.startswith("| ")]
        heads = [h.strip() for h in lines[0].strip("|").split(" | ")]
        rows = [dict(zip(heads, (c.strip() for c in line.strip("|").split(" | ")))) for line in lines[1:]]
        out[heading] = (heads, rows)
    return out


def test_table_layout_ours_beside_published_both_conventions(tmp_path):
    summaries = [
        _summary(
            "perov-5", "template", 20, {"cdvae": (10.0, 0.1, 40.0, 0.05), "pymatgen-default": (5.0, 0.08, 20.0, 0.04)}
        ),
        _summary(
            "perov-5",
            "random-symmetric",
            20,
            {"cdvae": (0.0, None, 10.0, 0.3), "pymatgen-default": (0.0, None, 0.0, None)},
        ),
    ]
    paths = {e: tmp_path / f"csp.{e}" for e in ("csv", "md", "tex")}
    df = csp_table.write_csp_table(summaries, PUBLISHED, paths["csv"], paths["md"], paths["tex"])
    n_pub = len(csp_table.load_published(PUBLISHED)["rows"])
    assert len(df) == n_pub + 2 * 2 * 2  # 2 responders x {1, 20} samples x {all, de-duplicated}
    ours = df.iloc[n_pub:].set_index(["method", "samples", "test_set"])
    col = csp_table.score_column
    assert ours.loc[("template", 1, "all"), col("perov-5", "cdvae", "match_rate")] == 10.0
    assert ours.loc[("template", 20, "all"), col("perov-5", "cdvae", "rmse")] == 0.05
    assert ours.loc[("template", 20, "all"), col("perov-5", "pymatgen-default", "match_rate")] == 20.0
    assert ours.loc[("template", 20, "deduplicated"), col("perov-5", "cdvae", "match_rate")] == 20.0
    assert math.isnan(ours.loc[("random-symmetric", 1, "all"), col("perov-5", "cdvae", "rmse")])
    # published numbers exist only under their own convention
    pub = df.iloc[:n_pub]
    assert pub[col("mp-20", "pymatgen-default", "match_rate")].isna().all()
    assert pub[col("mp-20", "cdvae", "match_rate")].notna().all()
    # every score column names its convention, in every format
    csv = pd.read_csv(paths["csv"])
    scored = [c for c in csv.columns if c not in csp_table.LEAD and ":items" not in c]
    assert scored and all(any(f":{c}:" in s for c in CONVENTION_NAMES) for s in scored)
    # printed a section per dataset and convention (one table of 5 + 3 x 13 columns, mostly
    # empty, was unreadable): each with the rows and columns that have a value there
    sections = _sections(paths["md"].read_text())
    assert list(sections) == [
        "perov-5, cdvae matcher",
        "perov-5, pymatgen-default matcher",
        "carbon-24, cdvae matcher",
        "mp-20, cdvae matcher",
    ]
    for heads, rows in sections.values():
        assert all(any(r[h] not in ("", "–") for r in rows) for h in heads), heads
    heads, rows = sections["perov-5, cdvae matcher"]
    # 6 metrics (match rate, RMSE; ours only: match rate with the same space group, cRMSE,
    # METRe, METRe's cRMSE) beside the items; the published rows too (the papers have perov-5)
    assert "match rate, same space group (%)" in heads and "test items" in heads and len(heads) <= 12
    assert {r["source"] for r in rows} == {"this run", "diffcsp-table1"}
    assert {r["source"] for r in sections["perov-5, pymatgen-default matcher"][1]} == {"this run"}
    assert sections["mp-20, cdvae matcher"][0] == [
        "method",
        "# of samples",
        "test set",
        "source",
        "match rate (%)",
        "RMSE (normalised)",
    ]
    # the space-group column is ours only: beside the published match rate, empty on its rows
    assert ours.loc[("template", 20, "all"), col("perov-5", "cdvae", "sg_match_rate")] == 20.0
    assert pub[col("mp-20", "cdvae", "sg_match_rate")].isna().all()
    assert "arXiv:2309.04475" in paths["md"].read_text()
    tex = paths["tex"].read_text()
    assert tex.count(r"\begin{tabular}") == 4 and "perov-5, pymatgen-default matcher" in tex
    # two runs give byte-identical tables
    again = {e: tmp_path / f"again.{e}" for e in ("csv", "md", "tex")}
    csp_table.write_csp_table(summaries, PUBLISHED, again["csv"], again["md"], again["tex"])
    assert all(paths[e].read_bytes() == again[e].read_bytes() for e in paths)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["rows"][0].update(source="nowhere"), r"rows\[0\] \(RS\): source 'nowhere' is not under 'sources'"),
        (lambda d: d["rows"][1]["scores"]["mp-20"].update(match_rate=0.5e3), r"rows\[1\] \(RS, mp-20\): match_rate"),
        (lambda d: d["rows"][2]["scores"]["perov-5"].update(rmse=-1), r"rows\[2\] \(BO, perov-5\): rmse"),
        (lambda d: d["rows"][3].update(samples=0), r"rows\[3\] \(BO\): 'samples'"),
        (lambda d: d.update(convention="mine"), "'convention' must be one of"),
    ],
)
def test_a_mistake_in_the_published_file_is_refused_naming_the_row(tmp_path, edit, message):
    doc = yaml.safe_load(PUBLISHED.read_text())
    edit(doc)
    path = tmp_path / "published.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=message) as err:
        csp_table.load_published(path)
    assert str(path) in str(err.value)


def test_printed_rates_are_percentages_beside_their_items_and_an_empty_set_has_none(tmp_path):
    """Our rows say how many test items they are over; a de-duplicated set without items (every
    test item also in train) prints no rate rather than 0 %."""
    rates = {"cdvae": (12.5, 0.1, 37.5, 0.05), "pymatgen-default": (0.0, None, 25.0, 0.04)}
    summaries = [
        _summary("perov-5", "template", 20, rates),
        _summary("perov-5", "random-symmetric", 20, rates, dedup_items=0),
    ]
    paths = {e: tmp_path / f"csp.{e}" for e in ("csv", "md", "tex")}
    csp_table.write_csp_table(summaries, PUBLISHED, paths["csv"], paths["md"], paths["tex"])
    text = paths["md"].read_text()
    sections = _sections(text)
    heads, rows = sections["perov-5, cdvae matcher"]
    ours = {(r["method"], r["# of samples"], r["test set"]): r for r in rows if r["source"] == "this run"}
    rate, items = "match rate (%)", "test items"
    assert ours[("template", "20", "all")][rate] == "37.5" and ours[("template", "20", "all")][items] == "10"
    assert (
        ours[("template", "1", "deduplicated")][rate] == "6.2" and ours[("template", "1", "deduplicated")][items] == "5"
    )
    assert ours[("random-symmetric", "20", "deduplicated")][items] == "0"
    assert ours[("random-symmetric", "20", "deduplicated")][rate] == "–"
    mp20_heads, mp20 = sections["mp-20, cdvae matcher"]
    published = next(r for r in mp20 if r["method"] == "DiffCSP" and r["# of samples"] == "1")
    assert published["match rate (%)"] == "51.5" and "test items" not in mp20_heads  # no run of ours there
    assert "RMSE (normalised)" in heads
    assert "perov-5: 10 test items" in text.split("\n\n")[1]  # the caption
    csv = pd.read_csv(paths["csv"])
    assert pd.isna(csv["perov-5:cdvae:match_rate"].iloc[-1])  # the empty set: no rate, not 0


def test_caption_counts_the_crystals_the_site_limit_left_out():
    """A 24-atom set under a 20-site limit: the caption says how many crystals, of which split, so
    that rows over a cut test set are not read as the published full-set rows."""
    s = _summary("carbon-24", "chance", 20, {"cdvae": (1.0, 0.3, 10.0, 0.3)})
    s.update({"max_sites": 20, "left_out_over_max_sites": {"test": 27, "train": 120}})
    text = csp_table.caption([s])
    assert "crystals left out by the site limit: carbon-24: 147 with more than 20 sites (27 test, 120 train)" in text
    assert "left out" not in csp_table.caption([_summary("perov-5", "chance", 20, {"cdvae": (1.0, 0.3, 10.0, 0.3)})])


def test_metre_and_crmse_beside_the_match_rate_and_relaxed_rows_below(tmp_path):
    """cRMSE and METRe (arXiv 2509.12178) fill their own columns from the summary, never the
    papers' (published rows leave them empty); a summary of the samples relaxed with a potential
    is a row of its own right below the row before relaxation."""
    rates = {"cdvae": (10.0, 0.1, 40.0, 0.05)}
    before = _summary("perov-5", "template", 20, rates)
    for block in before["conventions"]["cdvae"].values():
        block.update({"crmse@1": 0.46, "crmse@k": 0.32, "metre@1": 30.0, "metre@k": 60.0})
        block.update({"metre_crmse@1": 0.38, "metre_crmse@k": 0.22})
    after = _summary("perov-5", "template", 20, {"cdvae": (20.0, 0.08, 50.0, 0.04)})
    after["relaxed_with"] = "emt"
    after["generation"] = {"relaxation": {"potential": "emt", "samples": 200, "failed": 7}}
    paths = {e: tmp_path / f"csp.{e}" for e in ("csv", "md", "tex")}
    df = csp_table.write_csp_table([before, after], PUBLISHED, paths["csv"], paths["md"], paths["tex"])
    n_pub = len(csp_table.load_published(PUBLISHED)["rows"])
    ours = df.iloc[n_pub:]
    col = csp_table.score_column
    assert list(zip(ours["samples"], ours["test_set"], ours["relaxed_with"].fillna(""))) == [
        (1, "all", ""),
        (1, "all", "emt"),
        (20, "all", ""),
        (20, "all", "emt"),
        (1, "deduplicated", ""),
        (1, "deduplicated", "emt"),
        (20, "deduplicated", ""),
        (20, "deduplicated", "emt"),
    ]
    first = ours.iloc[2]  # 20 samples, whole test set, before relaxation
    assert first[col("perov-5", "cdvae", "match_rate")] == 40.0 and first[col("perov-5", "cdvae", "metre")] == 60.0
    assert first[col("perov-5", "cdvae", "crmse")] == 0.32 and first[col("perov-5", "cdvae", "metre_crmse")] == 0.22
    relaxed = ours.iloc[3]
    assert relaxed[col("perov-5", "cdvae", "match_rate")] == 50.0
    assert math.isnan(relaxed[col("perov-5", "cdvae", "metre")])  # not in that summary: empty, never 0
    assert df.iloc[:n_pub][col("mp-20", "cdvae", "metre")].isna().all()
    md = paths["md"].read_text()
    heads, rows = _sections(md)["perov-5, cdvae matcher"]
    assert "METRe (%)" in heads and "relaxed with" in heads and any(r["relaxed with"] == "emt" for r in rows)
    assert "failed relaxations: template on perov-5 with emt: 7 of 200" in md
