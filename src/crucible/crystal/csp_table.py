"""The CSP table: method x number of samples x dataset x {match rate, RMSE}, laid out as in the
CDVAE/DiffCSP papers, with the published rows (``config/published_crystal.yaml``) above ours, and
beside the papers' columns ours only: same-space-group match rate, cRMSE, METRe and its cRMSE.

Every score column names its matcher convention; published numbers exist only under the one they
were computed with (``cdvae``), the other convention's cells stay empty. Our rows come twice per
responder (1 sample and k samples), and again on the de-duplicated test set of the audit.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from crucible.core.errors import ConfigError
from crucible.core.io import InFile
from crucible.core.yaml_files import load_mapping
from crucible.crystal.scoring import CONVENTION_NAMES, DEFAULT_CONVENTION

BUILTIN_ORDER = ("perov-5", "carbon-24", "mp-20")
# per (dataset, convention): the papers' match rate and RMSE, then ours only, beside them: matched
# with the reference's space group (SpacegroupAnalyzer, symprec 0.1); cRMSE (stol for each
# unmatched item), METRe and its cRMSE (arXiv 2509.12178, crucible.crystal.metre)
METRICS = ("match_rate", "rmse", "sg_match_rate", "crmse", "metre", "metre_crmse")
HEADS = {
    "match_rate": "match rate (%)",
    "rmse": "RMSE (normalised)",
    "sg_match_rate": "match rate, same space group (%)",
    "crmse": "cRMSE",
    "metre": "METRe (%)",
    "metre_crmse": "METRe cRMSE",
}
RATES = ("match_rate", "sg_match_rate", "metre")
# the columns before the scores: a relaxed row names its potential, others leave it empty
LEAD = ("method", "samples", "test_set", "relaxed_with", "source")


def load_published(path: str | os.PathLike) -> dict[str, Any]:
    """The published rows, checked: each names a source listed under ``sources`` and gives, per
    dataset, ``match_rate`` (percent, 0-100) and ``rmse`` (>= 0 or null)."""
    try:
        doc = load_mapping(path)
    except ConfigError as exc:
        raise ConfigError(f"cannot read published CSP results {exc}") from None
    convention = doc.get("convention")
    if convention not in CONVENTION_NAMES:
        raise ConfigError(f"{path}: 'convention' must be one of {', '.join(CONVENTION_NAMES)}, got {convention!r}")
    sources = doc.get("sources") or {}
    if not isinstance(sources, dict):
        raise ConfigError(f"{path}: 'sources' must be a mapping")
    rows = doc.get("rows")
    if not isinstance(rows, list):
        raise ConfigError(f"{path}: 'rows' must be a list")
    for n, row in enumerate(rows):
        where = f"{path}: rows[{n}]"
        if not isinstance(row, dict) or not isinstance(row.get("method"), str):
            raise ConfigError(f"{where}: needs a 'method' name")
        if not isinstance(row.get("samples"), int) or row["samples"] < 1:
            raise ConfigError(f"{where} ({row['method']}): 'samples' must be a positive integer")
        if row.get("source") not in sources:
            raise ConfigError(f"{where} ({row['method']}): source {row.get('source')!r} is not under 'sources'")
        scores = row.get("scores") or {}
        if not isinstance(scores, dict) or not all(isinstance(s, dict) for s in scores.values()):
            raise ConfigError(f"{where} ({row['method']}): 'scores' must map each dataset to its scores")
        for dataset, score in scores.items():
            rate, rmse = score.get("match_rate"), score.get("rmse")
            if not isinstance(rate, (int, float)) or not 0 <= rate <= 100:
                raise ConfigError(f"{where} ({row['method']}, {dataset}): match_rate must be a percentage")
            if rmse is not None and (not isinstance(rmse, (int, float)) or rmse < 0):
                raise ConfigError(f"{where} ({row['method']}, {dataset}): rmse must be a non-negative number")
    return {"convention": convention, "sources": sources, "rows": rows}


def score_column(dataset: str, convention: str, metric: str) -> str:
    return f"{dataset}:{convention}:{metric}"


def items_column(dataset: str) -> str:
    """The number of test items a row of ours is over, per dataset (published rows: the full
    CDVAE test sets, left empty)."""
    return f"{dataset}:items"


def _datasets(ours: Iterable[str], published: dict[str, Any]) -> list[str]:
    out = list(dict.fromkeys(ours))
    pub = {d for row in published["rows"] for d in (row.get("scores") or {})}
    out += [d for d in BUILTIN_ORDER if d in pub and d not in out]
    out += sorted(pub - set(out))
    return out


def csp_table(summaries: list[dict[str, Any]], published: dict[str, Any]) -> pd.DataFrame:
    """One row per (method, samples, test set): published first (file order), then ours (in the
    order of ``summaries``, each with ``dataset`` added)."""
    datasets = _datasets([s["dataset"] for s in summaries], published)
    columns = list(LEAD) + [
        col
        for d in datasets
        for col in (
            items_column(d),
            *(score_column(d, c, m) for c in CONVENTION_NAMES for m in METRICS),
        )
    ]
    rows = []
    for row in published["rows"]:
        line = {"method": row["method"], "samples": row["samples"], "test_set": "all", "source": row["source"]}
        for d, score in (row.get("scores") or {}).items():
            line[score_column(d, published["convention"], "match_rate")] = float(score["match_rate"])
            line[score_column(d, published["convention"], "rmse")] = (
                None if score.get("rmse") is None else float(score["rmse"])
            )
        rows.append(line)
    responders = list(dict.fromkeys(s["responder"] for s in summaries))
    for responder in responders:
        mine = [s for s in summaries if s["responder"] == responder]
        ks = sorted({1, *(int(s["k"]) for s in mine)})
        # the same samples relaxed with a potential: the row right below the one before relaxation
        relaxed = sorted({s["relaxed_with"] for s in mine if s.get("relaxed_with")})
        for subset in ("all", "deduplicated"):
            for k in ks:
                for potential in [None, *relaxed]:
                    line = _our_row(responder, k, subset, potential, mine)
                    if line is not None:
                        rows.append(line)
    df = pd.DataFrame(rows, columns=columns)
    for col in columns[len(LEAD) :]:
        kind = "Int64" if col.endswith(":items") else float
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(kind)
    df["samples"] = df["samples"].astype(int)
    return df


def _our_row(responder: str, k: int, subset: str, potential: str | None, mine: list[dict]) -> dict | None:
    """The row of ``responder``'s summaries (``mine``) at ``k`` samples on ``subset``, of its
    samples as drawn (``potential`` None) or relaxed with ``potential``; None without scores."""
    line = {"method": responder, "samples": k, "test_set": subset, "relaxed_with": potential, "source": "this run"}
    filled = False
    at = "@1" if k == 1 else "@k"
    for s in mine:
        if (k != 1 and int(s["k"]) != k) or s.get("relaxed_with") != potential:
            continue
        for c, block in s["conventions"].items():
            metrics = block.get(subset)
            if metrics is None:
                continue
            # a rate over no items (an empty de-duplicated set) prints as "–", not 0 %; a metric
            # a summary made before it lacks stays empty
            empty = metrics.get("total") == 0
            for metric in METRICS:
                value = metrics.get(f"{metric}{at}")
                line[score_column(s["dataset"], c, metric)] = None if empty and metric in RATES else value
            line[items_column(s["dataset"])] = metrics.get("total")
            filled = True
    return line if filled else None


def table_headers(df: pd.DataFrame) -> dict[str, str]:
    heads = {
        "method": "method",
        "samples": "# of samples",
        "test_set": "test set",
        "relaxed_with": "relaxed with",
        "source": "source",
    }
    for col in df.columns[len(LEAD) :]:
        if col.endswith(":items"):
            heads[col] = f"{col.rsplit(':', 1)[0]} test items"
            continue
        dataset, convention, metric = col.split(":")
        heads[col] = f"{dataset} {HEADS[metric]} [{convention}]"
    return heads


def percent_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if c.rsplit(":", 1)[-1] in RATES]


def caption(summaries: list[dict[str, Any]]) -> str:
    from crucible.crystal.audit_table import left_out_text

    counts = ", ".join(
        f"{d}: {n} test items"
        for d, n in dict.fromkeys((s["dataset"], s["n_items"]) for s in summaries)
        if n is not None
    )
    return (
        "Match rate (percent of test items) and RMSE (normalised by (V/n)^(1/3), mean over matched "
        f"items) with 1 and k samples per test item, under both matcher conventions (default "
        f"{DEFAULT_CONVENTION}); published rows on the full CDVAE test sets, ours on the test items of "
        f"this run ({counts or 'none'}{left_out_text(summaries)}; the de-duplicated rows on the audit's "
        "subset, items per row in the test items columns). The chance rows: uniformly random cells of each "
        "item's composition and number of sites, the floor a match rate is read against. Beside the papers' "
        "columns, ours only: the match rate in the reference's space group; cRMSE, the mean RMSE with the "
        "convention's stol for each unmatched item; METRe, the percent of test items matched by any sample "
        "of any item (the first sample of each, or the first k), and its cRMSE (arXiv:2509.12178). "
        f"{_relaxed_text(summaries)}"
    ).rstrip()


def _relaxed_text(summaries: list[dict[str, Any]]) -> str:
    """What the relaxed rows are, with the relaxations that failed (their samples are unmatched)."""
    relaxed = [s for s in summaries if s.get("relaxed_with")]
    if not relaxed:
        return ""
    failed = "; ".join(
        f"{s['responder']} on {s['dataset']} with {s['relaxed_with']}: {n} of {info.get('samples', '?')}"
        for s in relaxed
        if (n := (info := (s.get("generation") or {}).get("relaxation") or {}).get("failed"))
    )
    return (
        "A row 'relaxed with' a potential scores the same samples after relaxing each (cell and positions) with "
        "that potential, right below the row before relaxation; a sample the potential cannot relax counts as "
        f"unmatched{f' (failed relaxations: {failed})' if failed else ''}."
    )


def _short_samples(summaries: list[dict[str, Any]]) -> str:
    """Responders that drew fewer than k samples for some items: their k-sample rows are over fewer."""
    short = [
        f"{s['responder']} on {s['dataset']}: {s['samples_per_item']:g} per item on average, "
        f"{s['items_with_fewer_than_k']} of {s['n_items']} items with fewer than {s['k']}"
        for s in summaries
        if s.get("items_with_fewer_than_k")
    ]
    return (
        f" Some items got fewer than k samples, so the k-sample rows rest on fewer: {'; '.join(short)}."
        if short
        else ""
    )


# Unmatched samples the caption names apart from malformed ones: (reason, what it says of them).
NAMED_FAILURES = (
    ("cut_off", "Samples cut off at the token limit count as unmatched (reason cut_off, apart from malformed ones)"),
    (
        "off_schema",
        "Samples off the answer schema their request asked for count as unmatched "
        "(reason off_schema, apart from malformed ones)",
    ),
)


def _cut_off_samples(summaries: list[dict[str, Any]]) -> str:
    """Responders some of whose replies stopped at the token limit or broke their schema: those
    samples are unmatched, and the caption says how many."""
    text = ""
    for reason, words in NAMED_FAILURES:
        counts = [
            f"{s['responder']} on {s['dataset']}: {n} of {s['n_items'] * s['k']}"
            for s in summaries
            if (n := s.get("unmatched_samples", {}).get(reason))
        ]
        text += f" {words}: {'; '.join(counts)}." if counts else ""
    return text


def preamble(summaries: list[dict[str, Any]], published: dict[str, Any]) -> str:
    cites = "; ".join(f"{key}: {src.get('citation', '').strip()}" for key, src in published["sources"].items())
    return (
        "Crystal structure prediction: an item is matched at k samples if one of its first k samples "
        "matches the reference (StructureMatcher; cdvae: ltol 0.3, stol 0.5, angle_tol 10; "
        "pymatgen-default: ltol 0.2, stol 0.3, angle_tol 5). RMSE: normalised RMS distance of the "
        "best-matching sample, mean over matched items. Published rows are on the full CDVAE test sets "
        "and apply the papers' validity check; ours do not (the caption says how many items). "
        f"Published: {cites}.{_short_samples(summaries)}{_cut_off_samples(summaries)}"
    )


def write_csp_table(
    summaries: list[dict[str, Any]],
    published_path: str | os.PathLike,
    csv: str | os.PathLike,
    md: str | os.PathLike,
    tex: str | os.PathLike,
) -> pd.DataFrame:
    from crucible.report.tables import write_table

    published = load_published(published_path)
    df = csp_table(summaries, published)
    write_table(
        df,
        csv=csv,
        md=md,
        tex=tex,
        digits=4,
        title="Crystal structure prediction",
        caption=caption(summaries),
        notes=preamble(summaries, published),
        headers=table_headers(df),
        percent=percent_columns(df),
        # the CSV keeps every dataset's and convention's columns; printed in one, 57 mostly empty
        # columns were unreadable
        sections=[(heading, block, block_headers(block)) for heading, block in printed_blocks(df)],
    )
    return df


def printed_blocks(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The printed CSP table as one block per dataset and matcher convention: the rows with a
    value there, the lead columns and that block's score columns, each column empty in every row
    of the block left out (the CSV keeps the wide table)."""
    blocks = []
    score_cols = list(df.columns[len(LEAD) :])
    datasets = list(dict.fromkeys(c.split(":", 1)[0] for c in score_cols))
    for dataset in datasets:
        for convention in CONVENTION_NAMES:
            cols = [c for c in score_cols if c.startswith(f"{dataset}:{convention}:")]
            if not cols:
                continue
            # a row of ours over no items (an empty de-duplicated set) stays, its rates "–"
            rows = df[df[[items_column(dataset), *cols]].notna().any(axis=1)]
            if rows.empty:
                continue
            block = rows[[*LEAD, items_column(dataset), *cols]]
            block = block[[c for c in block.columns if not _empty(block[c])]]
            blocks.append((f"{dataset}, {convention} matcher", block.reset_index(drop=True)))
    return blocks


def _empty(column: pd.Series) -> bool:
    return bool(column.isna().all() or (column.astype(str) == "").all())


def block_headers(block: pd.DataFrame) -> dict[str, str]:
    """A block's headers: its heading names the dataset and convention, so its columns do not."""
    heads = table_headers(block)
    for col in block.columns:
        if col.endswith(":items"):
            heads[col] = "test items"
        elif col.count(":") == 2:
            heads[col] = HEADS[col.rsplit(":", 1)[1]]
    return heads


def write_csp_table_from_files(
    inputs: Iterable[InFile],
    published: str | os.PathLike,
    csv: str | os.PathLike,
    md: str | os.PathLike,
    tex: str | os.PathLike,
) -> pd.DataFrame:
    """:func:`write_csp_table` of the CSP summary JSONs ``inputs`` (:func:`read_csp_summaries`).

    Args:
        inputs: the CSP summaries score-samples wrote, any datasets, in row order:
            results/crystal/{dataset}/csp/{responder}.json (the dataset from the path if a summary lacks it)
        published: YAML of the published rows (method, samples, match rate in % and RMSE per dataset, with
            their source), shown above ours (default: %(default)s)
        csv: the table to write (CSV): results/tables/crystal_csp.csv
        md: the table as Markdown, with its caption and sources: results/tables/crystal_csp.md
        tex: the table as LaTeX: results/tables/crystal_csp.tex
    """
    return write_csp_table(read_csp_summaries(inputs), published, csv, md, tex)


def read_csp_summaries(paths: Iterable[str | os.PathLike]) -> list[dict[str, Any]]:
    """CSP summaries (``results/crystal/{dataset}/csp/{responder}.json``) with their dataset added
    from the path when the summary does not carry it."""
    from crucible.core.io import read_json

    out = []
    for p in paths:
        s = read_json(p)
        s.setdefault("dataset", Path(p).parents[1].name)
        out.append(s)
    return out
