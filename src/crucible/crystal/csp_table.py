"""The CSP table: method x number of samples x dataset x {match rate, RMSE}, laid out as in the
CDVAE/DiffCSP papers, with the published rows (``config/published_crystal.yaml``) above ours.

Every score column names its matcher convention; published numbers exist only under the one they
were computed with (``cdvae``), the other convention's cells stay empty. Our rows come twice per
responder (1 sample and k samples), and again on the de-duplicated test set of the audit.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

import pandas as pd
import yaml

from crucible.crystal.scoring import CONVENTION_NAMES, DEFAULT_CONVENTION
from crucible.errors import ConfigError

BUILTIN_ORDER = ("perov-5", "carbon-24", "mp-20")


def load_published(path: str | os.PathLike) -> dict[str, Any]:
    """The published rows, checked: each names a source listed under ``sources`` and gives, per
    dataset, ``match_rate`` (percent, 0-100) and ``rmse`` (>= 0 or null)."""
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read published CSP results {path}: {exc}") from exc
    convention = doc.get("convention")
    if convention not in CONVENTION_NAMES:
        raise ConfigError(f"{path}: 'convention' must be one of {', '.join(CONVENTION_NAMES)}, got {convention!r}")
    sources = doc.get("sources") or {}
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
        for dataset, score in (row.get("scores") or {}).items():
            rate, rmse = (score or {}).get("match_rate"), (score or {}).get("rmse")
            if not isinstance(rate, (int, float)) or not 0 <= rate <= 100:
                raise ConfigError(f"{where} ({row['method']}, {dataset}): match_rate must be a percentage")
            if rmse is not None and (not isinstance(rmse, (int, float)) or rmse < 0):
                raise ConfigError(f"{where} ({row['method']}, {dataset}): rmse must be a non-negative number")
    return {"convention": convention, "sources": sources, "rows": rows}


def score_column(dataset: str, convention: str, metric: str) -> str:
    return f"{dataset}:{convention}:{metric}"


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
    columns = ["method", "samples", "test_set", "source"] + [
        score_column(d, c, m) for d in datasets for c in CONVENTION_NAMES for m in ("match_rate", "rmse")
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
        for subset in ("all", "deduplicated"):
            for k in ks:
                line = {"method": responder, "samples": k, "test_set": subset, "source": "this run"}
                filled = False
                for s in mine:
                    if k != 1 and int(s["k"]) != k:
                        continue
                    at = "@1" if k == 1 else "@k"
                    for c, block in s["conventions"].items():
                        metrics = block.get(subset)
                        if metrics is None:
                            continue
                        line[score_column(s["dataset"], c, "match_rate")] = metrics[f"match_rate{at}"]
                        line[score_column(s["dataset"], c, "rmse")] = metrics[f"rmse{at}"]
                        filled = True
                if filled:
                    rows.append(line)
    df = pd.DataFrame(rows, columns=columns)
    for col in columns[4:]:
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    df["samples"] = df["samples"].astype(int)
    return df


def table_headers(df: pd.DataFrame) -> dict[str, str]:
    heads = {"method": "method", "samples": "# of samples", "test_set": "test set", "source": "source"}
    for col in df.columns[4:]:
        dataset, convention, metric = col.split(":")
        heads[col] = f"{dataset} {'match rate (%)' if metric == 'match_rate' else 'RMSE'} [{convention}]"
    return heads


def preamble(summaries: list[dict[str, Any]], published: dict[str, Any]) -> str:
    counts = ", ".join(
        f"{d}: {n} items" for d, n in dict.fromkeys((s["dataset"], s["n_items"]) for s in summaries) if n is not None
    )
    cites = "; ".join(f"{key}: {src.get('citation', '').strip()}" for key, src in published["sources"].items())
    return (
        "Crystal structure prediction: an item is matched at k samples if one of its first k samples "
        "matches the reference (StructureMatcher; cdvae: ltol 0.3, stol 0.5, angle_tol 10; "
        "pymatgen-default: ltol 0.2, stol 0.3, angle_tol 5). RMSE: normalised RMS distance of the "
        "best-matching sample, mean over matched items. Published rows are on the full CDVAE test sets "
        f"and apply the papers' validity check; ours do not, and are on the test items of this run ({counts or 'none'}). "
        f"Published: {cites}."
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
    caption = (
        "Match rate (%) and RMSE with 1 and k samples per test item, under both matcher conventions "
        f"(default {DEFAULT_CONVENTION}); published rows beside ours."
    )
    write_table(
        df,
        csv=csv,
        md=md,
        tex=tex,
        digits=4,
        title="Crystal structure prediction",
        caption=caption,
        notes=preamble(summaries, published),
        headers=table_headers(df),
    )
    return df


def read_csp_summaries(paths: Iterable[str | os.PathLike]) -> list[dict[str, Any]]:
    """CSP summaries (``results/crystal/{dataset}/csp/{responder}.json``) with their dataset added
    from the path when the summary does not carry it."""
    from crucible.io import read_json

    out = []
    for p in paths:
        s = read_json(p)
        s.setdefault("dataset", Path(p).parents[1].name)
        out.append(s)
    return out
