"""METRe and cRMSE beside the papers' match rate (Martirossyan et al., "All that structure matches
does not glitter", arXiv 2509.12178).

With N references r_1 .. r_N (the test items), a generated set G, and m(g, r) the matcher's RMS
displacement of g onto r normalised by (V/N)^(1/3) (``StructureMatcher.get_rms_dist(g, r)[0]``),
defined only when g matches r:

* the one-to-one match rate (CDVAE, DiffCSP, FlowMM): MR = (1/N) sum_j [g_j matches r_j], g_j
  item j's own sample (at k samples: any of its own first k, m the lowest); RMSE = the mean of
  m_j over the matched items only;
* cRMSE, the corrected RMSE: (1/N) sum_j c_j with c_j = m_j if r_j is matched, else the matcher's
  site tolerance ``stol`` (the largest RMS a match can have): an unmatched reference is
  penalised instead of left out, so a model cannot lower its RMSE by matching fewer items;
* METRe, match everyone to reference: (1/N) sum_j [some g of the whole generated set G matches
  r_j], G being every item's samples, not only r_j's own; its RMS per reference is the lowest
  over the g that match, and its cRMSE is the mean of those with ``stol`` for each reference no
  g matches.

The paper's point: where a set holds several crystals of one composition (carbon-24: all carbon;
perov-5's polymorphs), a model prompted with item i's composition that answers with reference
j's crystal (same composition) predicted a real crystal of that composition, yet the one-to-one
rate counts it wrong; METRe counts it. METRe is never below the match rate.

These definitions follow the authors' reference implementation (the OMatG repository,
``omg/analysis/analysis.py``: ``match_rmsds`` and ``metre_rmsds``, read for the semantics;
nothing of it is copied here): a pair is compared only when the reduced compositions agree
(their default ``check_reduced``), the METRe denominator is the number of references, the RMS
of a METRe match is the minimum over matching generated structures, and an unmatched reference
counts ``stol`` in both cRMSEs. Their code scores one generated structure per reference; at k
samples we take G@1 = sample 0 of every item and G@k = the first k samples of every item, and the
one-to-one rate at k is the papers' match@k. Their optional validity filter (``ValidAtoms``) is
not applied, as for our match rate.

Cost: the matcher can only match a generated structure and a reference of the same reduced
composition (its comparator's hash) and, with ``attempt_supercell`` off, the same number of
sites after its own primitive reduction, so only such pairs are compared: these pre-filters cannot
change a verdict. The primitive reductions (one per structure) and the matcher calls run on the
scoring worker processes (:func:`crucible.crystal.pool.map_calls`), each with the
matcher's time limit. An item's own sample against its own reference is the one-to-one call
already made (:mod:`crucible.crystal.csp`), not repeated; the calls here are the cross pairs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Iterable

import pandas as pd
import pyarrow as pa

from crucible.crystal import parsing
from crucible.crystal.pool import map_calls
from crucible.crystal.samples import Sample
from crucible.crystal.scoring import (
    CONVENTION_NAMES,
    CONVENTIONS,
    TEXT,
    TIMEOUT_S,
    _rms,
    convention_params,
    primitive_sites,
    reference_structure,
    sample_as_structure,
)

# Every match of a sample with another item's reference (an item's own matches are in the
# per-sample scores): results/crystal/{dataset}/csp_pairs/{responder}.parquet
PAIR_SCHEMA = pa.schema(
    [
        ("reference", pa.string()),  # the test item whose reference crystal was matched
        ("id", pa.string()),  # the item whose sample matched it (never the reference's own)
        ("rank", pa.int64()),  # the sample's position among that item's samples, 0 = first
        ("sample", pa.int64()),  # the sample number as given
        ("convention", pa.string()),
        ("rms_dist", pa.float64()),
    ]
)


def sample_key(kind: str, payload: Any, ground_truth: dict[str, Any], lone_formula: str | None):
    """(reduced formula, primitive sites) of a sample as the matcher gets it, or None where it
    has no structure; primitive sites 0 (not computed) when its formula is ``lone_formula``, its
    own reference's held by no other reference. Runs in a worker; never raises."""
    try:
        structure = sample_as_structure(kind, payload, ground_truth)
        formula = structure.composition.reduced_formula
    except Exception:  # noqa: BLE001 - a sample without a structure matches nothing
        return None
    return (formula, 0) if formula == lone_formula else (formula, primitive_sites(structure))


def score_cross(
    kind: str, payload: Any, ground_truth: dict[str, Any], reference: dict[str, Any], convention: str
) -> float | None:
    """The RMS of a sample of the item ``ground_truth`` (an answer text takes that item's
    species) matched onto another item's ``reference``, or None: no match, or a sample or
    matcher failure (as the one-to-one score counts them). Runs in a worker; never raises."""
    try:
        pred = sample_as_structure(kind, payload, ground_truth)
        ref = reference_structure(reference)
        if pred.composition.reduced_formula != ref.composition.reduced_formula:
            return None
        rms, _, _ = _rms(pred, ref, convention_params(convention))
        return rms
    except Exception:  # noqa: BLE001 - as in crucible.crystal.scoring: unmatched
        return None


def cross_matches(
    samples: dict[str, list[Sample]],
    items: Iterable[dict[str, Any]],
    k: int,
    conventions: Iterable[str] = CONVENTION_NAMES,
    timeout: float = TIMEOUT_S,
    workers: int = 1,
    progress: bool = False,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(every match of one of an item's first ``k`` samples with *another* item's reference,
    under each convention (:data:`PAIR_SCHEMA`), counts). Only pairs of the same reduced
    formula and primitive site count go to the matcher; ``counts`` says how many pairs there
    were and how many were compared."""
    items, conventions = list(items), list(conventions)
    for name in conventions:
        convention_params(name)
    truth = {it["id"]: it["ground_truth"] for it in items}
    formula = {i: reference_structure(gt).composition.reduced_formula for i, gt in truth.items()}
    refs_of = defaultdict(list)
    for it in items:
        refs_of[formula[it["id"]]].append(it["id"])

    def lone(i: str) -> str | None:
        return formula[i] if len(refs_of[formula[i]]) == 1 else None

    drawn = [(i, rank, s) for i in truth for rank, s in enumerate(samples.get(i, [])[:k]) if s.payload is not None]
    # an answer text takes its own item's species: only its formula's other references can match it
    keyed = [(i, rank, s) for i, rank, s in drawn if s.kind != TEXT or lone(i) is None]
    keys = [
        key
        for key, _ in map_calls(
            sample_key,
            [(s.kind, s.payload, truth[i], lone(i)) for i, _, s in keyed],
            workers,
            timeout,
            progress,
            "keys",
        )
    ]
    wanted = {key[0] for key in keys if key and key[1] != 0}
    ref_ids = [j for j in truth if formula[j] in wanted]
    reduced = map_calls(
        primitive_sites, [(reference_structure(truth[j]),) for j in ref_ids], workers, timeout, progress, "refs", -1
    )
    group = defaultdict(list)
    for j, (sites, _) in zip(ref_ids, reduced):
        group[(formula[j], sites)].append(j)
    # a structure the reduction fails on (-1) fails in the matcher too: it matches nothing
    pairs = [
        (i, rank, s, j)
        for (i, rank, s), key in zip(keyed, keys)
        if key and key[1] > 0
        for j in group.get(key, [])
        if j != i
    ]
    jobs = [(s.kind, s.payload, truth[i], truth[j], name) for i, _, s, j in pairs for name in conventions]
    results = map_calls(score_cross, jobs, workers, timeout, progress, "METRe")
    rows = []
    for n, (rms, failure) in enumerate(results):
        if rms is not None and failure is None and math.isfinite(rms):
            i, rank, s, j = pairs[n // len(conventions)]
            rows.append(
                {
                    "reference": j,
                    "id": i,
                    "rank": rank,
                    "sample": s.number,
                    "convention": jobs[n][4],
                    "rms_dist": float(rms),
                }
            )
    df = pd.DataFrame(rows, columns=PAIR_SCHEMA.names).astype({"rank": "int64", "sample": "int64"})
    counts = {
        # what a blind search would compare: every drawn sample against every other item's reference
        "all_pairs": len(drawn) * max(len(items) - 1, 0),
        "pairs_compared": len(pairs),
        "matcher_calls": len(jobs),
        "primitive_reductions": sum(1 for key in keys if key and key[1] != 0) + len(ref_ids),
        "timeouts": sum(1 for _, failure in results if failure == parsing.TIMEOUT),
    }
    return df, counts


def metre_items(
    sample_scores: pd.DataFrame, pairs: pd.DataFrame, k: int | None = None, ids: Iterable[str] | None = None
) -> pd.DataFrame:
    """Per (reference, convention): METRe at 1 sample and at k (``metre_at_1``, ``metre_rms_at_1``,
    ``metre_at_k``, ``metre_rms_at_k``), from an item's own matches (the per-sample scores) and
    the cross matches (``pairs``). ``ids``: the references and the generated set both limited to
    these items (the de-duplicated test set); None: every item."""
    own = sample_scores[sample_scores["matched"]]
    own = own.assign(reference=own["id"])[["reference", "id", "rank", "convention", "rms_dist"]]
    cross = pairs[["reference", "id", "rank", "convention", "rms_dist"]]
    hits = pd.concat([own, cross], ignore_index=True) if len(cross) else own
    refs = sample_scores[["id", "convention"]].drop_duplicates()
    if k is not None:
        hits = hits[hits["rank"] < k]
    if ids is not None:
        keep = set(ids)
        hits = hits[hits["reference"].isin(keep) & hits["id"].isin(keep)]
        refs = refs[refs["id"].isin(keep)]
    best_k = hits.groupby(["reference", "convention"])["rms_dist"].min()
    best_1 = hits[hits["rank"] == 0].groupby(["reference", "convention"])["rms_dist"].min()
    index = pd.MultiIndex.from_frame(refs)
    out = refs.reset_index(drop=True).assign(
        metre_rms_at_1=best_1.reindex(index).to_numpy(dtype=float),
        metre_rms_at_k=best_k.reindex(index).to_numpy(dtype=float),
    )
    out["metre_at_1"] = out["metre_rms_at_1"].notna()
    out["metre_at_k"] = out["metre_rms_at_k"].notna()
    return out


def _mean(values: pd.Series) -> float | None:
    values = values.dropna()
    return round(float(values.mean()), 4) if len(values) else None


def corrected_rmse(rms: pd.Series, stol: float) -> float | None:
    """cRMSE: the mean RMS with ``stol`` for every unmatched reference (NaN), None over no items."""
    return round(float(rms.fillna(stol).mean()), 4) if len(rms) else None


def metre_metrics(per_item: pd.DataFrame, convention: str) -> dict[str, Any]:
    """cRMSE of the one-to-one match at 1 and k; METRe (percent of references), its RMSE and
    cRMSE at 1 and k, where ``per_item`` has the METRe columns (:func:`metre_items`)."""
    stol = CONVENTIONS[convention]["stol"]
    out = {"crmse@1": corrected_rmse(per_item["rms_at_1"], stol), "crmse@k": corrected_rmse(per_item["rms_at_k"], stol)}
    if "metre_at_k" not in per_item.columns:
        return out
    for at in ("1", "k"):
        matched, rms = per_item[f"metre_at_{at}"].astype(bool), per_item[f"metre_rms_at_{at}"]
        out[f"metre@{at}"] = round(100.0 * float(matched.mean()), 4) if len(matched) else 0.0
        out[f"metre_rmse@{at}"] = _mean(rms)
        out[f"metre_crmse@{at}"] = corrected_rmse(rms, stol)
        out[f"metre_matched@{at}"] = int(matched.sum())
    return out


def with_metre(per_item: pd.DataFrame, metre: pd.DataFrame | None) -> pd.DataFrame:
    """``per_item`` (:func:`crucible.crystal.csp.item_results`) with the METRe columns of ``metre``
    (:func:`metre_items`) joined on (id, convention); unchanged without."""
    if metre is None:
        return per_item
    joined = per_item.merge(metre, on=["id", "convention"], how="left")
    for at in ("1", "k"):
        joined[f"metre_at_{at}"] = joined[f"metre_at_{at}"].astype("boolean").fillna(False).astype(bool)
        joined[f"metre_rms_at_{at}"] = joined[f"metre_rms_at_{at}"].astype(float)
    return joined.set_axis(per_item.index)
