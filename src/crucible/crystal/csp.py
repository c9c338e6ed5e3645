"""Crystal structure prediction (CSP) scores at 1 and at k samples per item, as the generative-model
papers report them, under both matcher conventions.

CDVAE/DiffCSP (``scripts/compute_metrics.py``, ``RecEvalBatch`` in jiaor17/DiffCSP): an item is
matched at k if at least one of its first k samples matches the reference; its RMSE is that of
the best-matching sample (the lowest normalised RMS among the matched ones); ``match_rate@k`` is
the percentage of items matched at k and ``rmse@k`` the mean RMSE over the matched items. At 1
this is OpenCompass's ``match_rate``/``mean_rms_dist`` of sample 0.

What the papers' code does and this does not: it also calls a sample unmatched when it fails
their validity check (SMACT charge balance and a 0.5 Å minimum distance); here every sample goes
to the matcher, as in OpenCompass. The CSP table says so.

Beside each match, the space groups of the sample and the reference (pymatgen's
``SpacegroupAnalyzer``, symprec 0.1): the matcher can match crystals of different space groups
(pymatgen issue #3796), so ``sg_match_rate@1/@k`` (matched and in the reference's group) is a
second match column, beside the papers' match rate, never instead of it.

Beside the papers' numbers, never instead of them, the two metrics of Martirossyan et al. (arXiv
2509.12178, :mod:`crucible.crystal.metre`): cRMSE, the RMSE with the convention's ``stol`` for each
unmatched item, and METRe, the share of references matched by any sample of any item (with its
RMSE and cRMSE), at 1 and at k samples.

Beside the whole test set, each summary reports the de-duplicated test set of the leakage audit
(:mod:`crucible.crystal.audit`) and the match rate per distinct prompt: items whose prompts are
the same text cannot be told apart by a deterministic model, so each distinct prompt weighs one.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

import numpy as np
import pandas as pd
import pyarrow as pa

from crucible.core.errors import DataValidationError
from crucible.core.io import InFile
from crucible.crystal import parsing
from crucible.crystal.samples import Sample
from crucible.crystal.scoring import CONVENTION_NAMES, DEFAULT_CONVENTION, TIMEOUT_S, MatcherWorker, convention_params

SAMPLE_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("rank", pa.int64()),  # position among the item's samples, 0 = first
        ("sample", pa.int64()),  # the sample number as given; null where the item has fewer than k
        ("convention", pa.string()),
        ("matched", pa.bool_()),
        ("rms_dist", pa.float64()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        # space groups (SpacegroupAnalyzer, symprec 0.1) of a matched sample and its reference
        ("sample_spacegroup", pa.int64()),
        ("reference_spacegroup", pa.int64()),
    ]
)


def score_samples(
    samples: dict[str, list[Sample]],
    items: Iterable[dict[str, Any]],
    k: int,
    conventions: Iterable[str] = CONVENTION_NAMES,
    timeout: float = TIMEOUT_S,
    progress: bool = False,
) -> pd.DataFrame:
    """One row per (item, rank < k, convention), in item order; each matcher call has its own
    time limit. A rank the item has no sample for is ``no_response``."""
    from tqdm import tqdm

    items, conventions = list(items), list(conventions)
    if k < 1:
        raise DataValidationError(f"k must be at least 1, got {k}")  # a ValueError was a bare traceback
    for name in conventions:
        convention_params(name)
    rows = []
    with MatcherWorker(timeout) as worker:
        for item in tqdm(items, desc=f"score@{k}", disable=not progress):
            chosen = samples.get(item["id"], [])[:k]
            seen: dict = {}
            for rank in range(k):
                sample = chosen[rank] if rank < len(chosen) else None
                for name in conventions:
                    if sample is None:
                        rms, reason, detail = None, parsing.NO_RESPONSE, f"fewer than {k} samples"
                    elif sample.payload is None:
                        rms, reason, detail = None, parsing.NO_RESPONSE, sample.error or ""
                    elif sample.off_schema:  # not the format the request asked for: never matched
                        rms, reason, detail = None, parsing.OFF_SCHEMA, sample.off_schema
                    else:
                        rms, reason, detail = worker.score_sample(
                            sample.kind, sample.payload, item["ground_truth"], name
                        )
                        if sample.cut_off and reason in parsing.FORMAT_FAILURES:  # as a single answer is
                            reason, detail = parsing.CUT_OFF, f"{sample.cut_off}; {reason}: {detail}"
                    groups = (None, None)
                    if rms is not None:  # one analysis per sample, whichever convention matched first
                        key = (rank, "sg")
                        if key not in seen:
                            seen[key] = worker.space_groups(sample.kind, sample.payload, item["ground_truth"])
                        groups = seen[key]
                    rows.append(
                        {
                            "id": item["id"],
                            "rank": rank,
                            "sample": None if sample is None else sample.number,
                            "convention": name,
                            "matched": rms is not None,
                            "rms_dist": np.nan if rms is None else float(rms),
                            "reason": reason,
                            "detail": detail,
                            "sample_spacegroup": groups[0],
                            "reference_spacegroup": groups[1],
                        }
                    )
    df = pd.DataFrame(rows, columns=SAMPLE_SCHEMA.names)
    for col in ("sample", "sample_spacegroup", "reference_spacegroup"):
        df[col] = df[col].astype("Int64")
    return df


def item_results(sample_scores: pd.DataFrame, k: int | None = None) -> pd.DataFrame:
    """Per (item, convention): matched and RMSE at 1 and at k, the best sample and the first
    matching rank. ``k`` (default: every rank present) may be smaller than what was scored."""
    df = sample_scores if k is None else sample_scores[sample_scores["rank"] < k]
    if "sample_spacegroup" in df.columns:
        same_group = (df["sample_spacegroup"] == df["reference_spacegroup"]).fillna(False).astype(bool)
    else:  # scores written before the space-group column
        same_group = pd.Series(False, index=df.index)
    df = df.assign(same_group=df["matched"] & same_group)
    rows = []
    for (ident, name), g in df.groupby(["id", "convention"], sort=False):
        g = g.sort_values("rank")
        first = g.iloc[0]
        hits = g[g["matched"]]
        best = hits.loc[hits["rms_dist"].idxmin()] if len(hits) else None
        rows.append(
            {
                "id": ident,
                "convention": name,
                "n_samples": int(g["sample"].notna().sum()),
                "matched_at_1": bool(first["rank"] == 0 and first["matched"]),
                "rms_at_1": float(first["rms_dist"]) if first["rank"] == 0 and first["matched"] else np.nan,
                "matched_at_k": best is not None,
                "rms_at_k": float(best["rms_dist"]) if best is not None else np.nan,
                "best_sample": int(best["sample"]) if best is not None else None,
                "first_match_rank": int(hits["rank"].min()) if len(hits) else None,
                # matched and of the reference's space group: sample 0, any of the first k
                "matched_sg_at_1": bool(first["rank"] == 0 and first["same_group"]),
                "matched_sg_at_k": bool(g["same_group"].any()),
            }
        )
    out = pd.DataFrame(rows)
    for col in ("best_sample", "first_match_rank"):
        out[col] = out[col].astype("Int64") if len(out) else pd.Series(dtype="Int64")
    return out


def _rate(matched: pd.Series) -> float:
    return round(100.0 * float(matched.mean()), 4) if len(matched) else 0.0


def _mean(values: pd.Series) -> float | None:
    values = values.dropna()
    return round(float(values.mean()), 4) if len(values) else None


def csp_metrics(per_item: pd.DataFrame, convention: str | None = None) -> dict[str, Any]:
    """match_rate@1/@k (percent of items), rmse@1/@k (mean over matched items), counts; with the
    ``convention`` (its stol), cRMSE, and METRe where ``per_item`` has its columns
    (:func:`crucible.crystal.metre.metre_metrics`)."""
    from crucible.crystal.metre import metre_metrics

    extra = metre_metrics(per_item, convention) if convention else {}
    return {
        "match_rate@1": _rate(per_item["matched_at_1"]),
        "rmse@1": _mean(per_item["rms_at_1"]),
        "matched@1": int(per_item["matched_at_1"].sum()),
        "match_rate@k": _rate(per_item["matched_at_k"]),
        "rmse@k": _mean(per_item["rms_at_k"]),
        "matched@k": int(per_item["matched_at_k"].sum()),
        # a second match column: matched and in the reference's space group (symprec 0.1)
        "sg_match_rate@1": _rate(per_item["matched_sg_at_1"]),
        "sg_match_rate@k": _rate(per_item["matched_sg_at_k"]),
        "total": int(len(per_item)),
        **extra,
    }


def prompt_text(item: dict[str, Any]) -> str:
    """What the model sees: every message of the item, in order."""
    return "\x1e".join(f"{m['role']}\x1f{m['content']}" for m in item["messages"])


def prompt_groups(items: Iterable[dict[str, Any]]) -> dict[str, int]:
    """``{item id: distinct-prompt number}``, numbered in order of first appearance."""
    numbers: dict[str, int] = {}
    out = {}
    for it in items:
        out[it["id"]] = numbers.setdefault(prompt_text(it), len(numbers))
    return out


def per_prompt_rates(per_item: pd.DataFrame, groups: dict[str, int], columns: Iterable[str]) -> dict[str, Any]:
    """Match rate with every distinct prompt weighing one: per prompt, the fraction of its items
    matched; then the mean over prompts (percent)."""
    df = per_item.assign(prompt=[groups[i] for i in per_item["id"]])
    by_prompt = df.groupby("prompt")[list(columns)].mean()
    out = {f"{col}_per_prompt": round(100.0 * float(by_prompt[col].mean()), 4) if len(df) else 0.0 for col in columns}
    out["n_prompts"] = int(df["prompt"].nunique())
    out["n_items"] = int(len(df))
    return out


def _reason_order(reason: str) -> tuple[int, str]:
    known = parsing.REASONS
    return (known.index(reason) if reason in known else len(known), reason)


def summarize_csp(
    sample_scores: pd.DataFrame,
    items: list[dict[str, Any]],
    k: int,
    responder: str,
    dedup_ids: Iterable[str] | None = None,
    generation: dict[str, Any] | None = None,
    pairs: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """The CSP summary of one responder on one dataset: per convention, the whole test set, the
    de-duplicated one (when the audit gives it) and the per-prompt rates. With the cross matches
    (``pairs``, :func:`crucible.crystal.metre.cross_matches`) also METRe, each subset's over its
    own items (references and generated set alike)."""
    from crucible.crystal.metre import metre_items, with_metre

    per_item = item_results(sample_scores, k)
    groups = prompt_groups(items)
    keep = None if dedup_ids is None else set(dedup_ids)
    every = metre_items(sample_scores, pairs, k) if pairs is not None else None
    kept = metre_items(sample_scores, pairs, k, keep) if pairs is not None and keep is not None else None
    conventions = {}
    for name, g in per_item.groupby("convention", sort=False):
        block = {
            "all": csp_metrics(with_metre(g, every), name),
            "deduplicated": csp_metrics(with_metre(g[g["id"].isin(keep)], kept), name) if keep is not None else None,
            "per_prompt": per_prompt_rates(g, groups, ("matched_at_1", "matched_at_k")),
        }
        conventions[name] = block
    counts = per_item.drop_duplicates("id")["n_samples"] if len(per_item) else pd.Series(dtype=int)
    scored = sample_scores[(sample_scores["rank"] < k) & (sample_scores["convention"] == DEFAULT_CONVENTION)]
    failures = scored.loc[~scored["matched"], "reason"].value_counts()
    return {
        "responder": responder,
        "dataset": next((it.get("meta", {}).get("dataset") for it in items), None),
        "k": int(k),
        "default_convention": DEFAULT_CONVENTION,
        "n_items": len(items),
        "samples_per_item": round(float(counts.mean()), 4) if len(counts) else 0.0,
        "items_with_fewer_than_k": int((counts < k).sum()),
        # unmatched samples of the default convention by reason (a reply cut off at the token
        # limit, or off its schema, apart from malformed ones), in the order of crucible.crystal.parsing.REASONS
        "unmatched_samples": {r: int(failures[r]) for r in sorted(failures.index, key=_reason_order)},
        "conventions": conventions,
        "generation": generation or {},
    }


def read_dedup_ids(audit_path: str | os.PathLike | None) -> list[str] | None:
    """The de-duplicated test ids of an audit summary (``audit.json``), or None without one."""
    if not audit_path:
        return None
    from crucible.core.io import read_json

    return list(read_json(audit_path)["deduplicated_test_ids"])


def score_samples_file(
    prompts: InFile,
    samples: InFile,
    responder: str,
    k: int,
    out: str | os.PathLike,
    out_summary: str | os.PathLike,
    format: str = "auto",
    audit: InFile | None = None,
    info: str | os.PathLike | None = None,
    unrelaxed: InFile | None = None,
    out_pairs: str | os.PathLike | None = None,
    timeout: float = TIMEOUT_S,
    workers: int = 1,
    progress: bool = True,
) -> dict[str, Any]:
    """Score a samples file against a prompt set: per-sample rows (parquet), the matches of samples
    with other items' references (METRe, :mod:`crucible.crystal.metre`) and the CSP summary;
    ``format`` is the samples' (:func:`crucible.crystal.samples.read_samples`), ``info`` their
    sidecar (skipped when absent), ``audit`` the set's audit summary.

    Args:
        samples: several samples per item: JSON lines, extended XYZ, a directory or .tar(.gz) of
            {id}__{sample}.cif files, or the LLM stage's answers to sample-prompts' prompt set
        responder: the responder's name (generator, language model, samples file), shown in tables
        out: per-sample scores to write (parquet: rank, sample, convention, RMS or failure reason):
            results/crystal/{dataset}/csp/{responder}.parquet
        out_summary: the CSP summary to write (JSON: match rate in %, RMSE and cRMSE at 1 and k, METRe, per
            convention, whole and de-duplicated test set): .../csp/{responder}.json
        out_pairs: every match of a sample with another item's reference, what METRe adds (parquet: reference,
            id, rank, sample, convention, RMS): results/crystal/{dataset}/csp_pairs/{responder}.parquet (default:
            not written; METRe is in the summary either way)
        format: the samples' format; auto (default) tells it from the name: .jsonl, .xyz/.extxyz, a directory
            or .tar(.gz) of CIFs; responses (the LLM stage's, ids {id}#{sample}) must be named
        prompts: as in :func:`crucible.crystal.generators.write_generator_answers`
        k: an item's first k samples (lowest sample numbers) count; missing ones are no_response (default %(default)s)
        info: as in :func:`crucible.crystal.report.score_response_file`
        audit: as in :func:`crucible.crystal.report.score_response_file`
        unrelaxed: for relaxed samples, the CSP summary of the same samples before relaxation, whose scores the
            summary repeats beside its own (before_relaxation)
        timeout: as in :func:`crucible.crystal.report.score_response_file`
        workers: matcher processes run side by side for METRe's cross matches (the scores do not depend on it;
            default %(default)s)
    """
    from pathlib import Path

    from crucible.core.io import read_json, write_json, write_parquet
    from crucible.crystal.metre import PAIR_SCHEMA, cross_matches
    from crucible.crystal.samples import read_samples
    from crucible.llm.files import read_prompt_records

    items = read_prompt_records(prompts)
    drawn = read_samples(samples, [it["id"] for it in items], format, str(prompts))
    df = score_samples(drawn, items, k, timeout=timeout, progress=progress)
    pairs, cross = cross_matches(drawn, items, k, timeout=timeout, workers=workers, progress=progress)
    sidecar = read_json(info) if info and Path(info).exists() else {}
    summary = summarize_csp(df, items, k, responder, read_dedup_ids(audit), sidecar, pairs)
    summary["metre_matching"] = cross
    if unrelaxed:
        before = read_json(unrelaxed)
        # another responder's, dataset's or k's summary was shown as these samples before relaxation
        for key in ("responder", "dataset", "k"):
            if before.get(key) != summary[key]:
                raise DataValidationError(
                    f"{unrelaxed}: field {key!r} is {before.get(key)!r}, not {summary[key]!r}: not the CSP "
                    f"summary of these samples before relaxation"
                )
        summary["relaxed_with"] = (sidecar.get("relaxation") or {}).get("potential")
        summary["before_relaxation"] = {
            name: {"all": block["all"], "deduplicated": block.get("deduplicated")}
            for name, block in before["conventions"].items()
        }
    if audit:  # the site limit and what it left out, for the CSP table's caption
        from crucible.crystal.audit_table import site_limit

        summary.update(site_limit(read_json(audit)))
    write_parquet(df, out, schema=SAMPLE_SCHEMA)
    if out_pairs:
        write_parquet(pairs, out_pairs, schema=PAIR_SCHEMA)
    write_json(summary, out_summary)
    return summary
