"""Leakage and duplicate audit of a crystal set: what Matbench's task-overlap table does for Matbench.

Measured from the data, under the benchmark's own matcher (``get_rms_dist`` of one convention,
default ``cdvae``: "a duplicate" means "this structure, answered verbatim, would score as a match"):

* duplicates inside each split: greedy clustering, each structure against the representatives
  (first members) of the clusters found so far, stopping at the first match (pymatgen's
  ``group_structures`` works the same way); a split's distinct structures are its clusters;
* duplicates across splits: each val and test structure against every train structure of its
  group (and test against val), stopping at the first match: the matcher is not transitive, so a
  test crystal can match a train crystal its cluster's representative does not match, and
  comparing representatives only misses such leaks;
* polymorphs: test items whose reduced formula occurs in train without a matching structure;
* distinct prompts per prompt template: items whose prompts are the same text cannot be told
  apart by any model, so a deterministic one can only be scored per prompt.

Only structures that can match are compared: same reduced formula and the same number of sites
in the primitive cell the matcher reduces to (with ``attempt_supercell`` off, the matcher returns
no match otherwise), so the grouping loses nothing. The cost is capped per group: at most
``max_comparisons`` matcher calls per (group, pass); past the cap the remaining structures are
left unchecked and counted (within a split: each its own cluster; across splits: not found in
train), so a capped count is a lower bound. The primitive reductions and the matcher calls run in
the scoring worker processes (``workers`` side by side, each call with the matcher's time limit; a
reduction past it counts as unreducible, as the matcher, which reduces the same way, would fail).

The de-duplicated test set is chosen among the test items actually scored (after the seeded
``max_test_items`` subsample build-items takes): in id order, a scored item is kept when it
matches no train or val structure and none of the items kept before it; an item whose
comparisons the cap cut short is not kept (it cannot be called distinct), and is counted.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa

from crucible.core.io import InFile
from crucible.crystal.pool import map_calls, run_on_workers
from crucible.crystal.scoring import (
    DEFAULT_CONVENTION,
    DEFAULT_MAX_COMPARISONS,
    STRUCTURE,
    TIMEOUT_S,
    MatcherWorker,
    convention_params,
    primitive_sites,
)

SPLIT_ORDER = ("train", "val", "test")
CROSS_PASSES = (("val", "train"), ("test", "train"), ("test", "val"))

ITEM_SCHEMA = pa.schema(
    [
        ("split", pa.string()),
        ("id", pa.string()),
        ("reduced_formula", pa.string()),
        ("primitive_sites", pa.int64()),
        ("cluster", pa.string()),  # "<split>:<id of the cluster's representative>"
        ("is_representative", pa.bool_()),
        ("unchecked", pa.bool_()),  # left out of the within-split comparisons by the cap
        ("duplicate_in_train", pa.bool_()),
        ("duplicate_in_val", pa.bool_()),
        ("formula_in_train", pa.bool_()),
        ("scored", pa.bool_()),  # a test item the benchmark scores (after any max_test_items subsample)
        ("in_deduplicated_test", pa.bool_()),
    ]
)


@dataclass
class Matcher:
    """Counts matcher calls; each call runs in the scoring worker with its time limit."""

    worker: MatcherWorker
    convention: str
    calls: int = 0
    timeouts: int = 0
    _gt: dict = field(default_factory=dict)
    _dicts: dict = field(default_factory=dict)

    def __call__(self, a: tuple[str, Any], b: tuple[str, Any]) -> bool:
        from crucible.crystal.items import ground_truth

        key_a, key_b = id(a[1]), id(b[1])
        if key_a not in self._dicts:
            self._dicts[key_a] = a[1].as_dict()
        if key_b not in self._gt:
            self._gt[key_b] = ground_truth(b[1])
        self.calls += 1
        rms, reason, _ = self.worker.score_sample(STRUCTURE, self._dicts[key_a], self._gt[key_b], self.convention)
        self.timeouts += reason == "timeout"
        return rms is not None


def _cluster(members: list, match: Matcher, cap: int) -> tuple[list[list], list[str]]:
    """Greedy clusters of ``members`` ((id, Structure), in order), and the ids the cap left
    without a full comparison (each then starts its own cluster)."""
    clusters: list[list] = []
    calls, unchecked = 0, []
    for m in members:
        placed = complete = False
        for cl in clusters:
            if calls >= cap:
                break
            calls += 1
            if match(m, cl[0]):
                cl.append(m)
                placed = True
                break
        else:
            complete = True
        if not placed:
            if not complete:
                unchecked.append(m[0])
            clusters.append([m])
    return clusters, unchecked


def _first_in(item: tuple, others: list, match: Matcher, budget: list[int]) -> tuple[str | None, bool]:
    """(id of the first of ``others`` that matches ``item``, or None; whether every one of them
    was compared). Each comparison spends one of ``budget``."""
    for other in others:
        if budget[0] <= 0:
            return None, False
        budget[0] -= 1
        if match(item, other):
            return other[0], True
    return None, True


def _group_audit(by_split: dict[str, list], names: list[str], match: Matcher, cap: int, scored: set | None) -> dict:
    """Every check inside one (formula, primitive sites) group.

    Across splits each member of ``a`` is compared with every member of ``b`` (not only cluster
    representatives: the matcher is not transitive, so a crystal can match a train member that
    its own cluster's representative does not), stopping at its first match, at most ``cap``
    matcher calls per pass. The de-duplicated test members are then chosen among the scored ones
    (``scored``: ids, None: all) that match no train or val crystal: in id order, each kept
    when it matches none kept before it."""
    out = {"cluster_of": {}, "reps": set(), "unchecked": set(), "cross": {}, "cross_unchecked": {}, "capped": False}
    for s in names:
        members = by_split.get(s, [])
        clusters, unchecked = _cluster(members, match, cap) if len(members) > 1 else ([[m] for m in members], [])
        out["capped"] |= bool(unchecked)
        for cl in clusters:
            for i, _ in cl:
                out["cluster_of"][(s, i)] = f"{s}:{cl[0][0]}"
            out["reps"].add((s, cl[0][0]))
        out["unchecked"].update((s, i) for i in unchecked)
    for a, b in CROSS_PASSES:
        found, left = {}, set()
        if by_split.get(a) and by_split.get(b):
            budget = [cap]
            for item in by_split[a]:
                hit, complete = _first_in(item, by_split[b], match, budget)
                if hit is not None:
                    found[item[0]] = hit
                elif not complete:
                    left.add(item[0])
            out["capped"] |= bool(left)
        out["cross"][(a, b)], out["cross_unchecked"][(a, b)] = found, left
    leaked = {i for (a, _), f in out["cross"].items() if a == "test" for i in f}
    unsure = {i for (a, _), u in out["cross_unchecked"].items() if a == "test" for i in u}
    kept, dedup_unchecked, budget = [], set(), [cap]
    for item in by_split.get("test", []):
        if (scored is not None and item[0] not in scored) or item[0] in leaked:
            continue
        if item[0] in unsure:  # not compared with every train/val crystal: not claimed distinct
            dedup_unchecked.add(item[0])
            continue
        hit, complete = _first_in(item, kept, match, budget)
        if not complete:
            dedup_unchecked.add(item[0])
            out["capped"] = True
        elif hit is None:
            kept.append(item)
    out["dedup"] = {i for i, _ in kept}
    out["dedup_unchecked"] = dedup_unchecked
    return out


def _run_groups(
    jobs: list, names: list[str], convention: str, cap: int, timeout: float, scored, workers: int, progress
):
    """``_group_audit`` of every group, in ``jobs`` order, on ``workers`` matcher processes (the
    results do not depend on how many)."""
    results, matchers = run_on_workers(
        jobs,
        lambda match, by_split: _group_audit(by_split, names, match, cap, scored),
        workers,
        timeout,
        progress,
        desc="audit",
        make=lambda worker: Matcher(worker, convention),
    )
    return results, sum(m.calls for m in matchers), sum(m.timeouts for m in matchers)


def primitive_counts(
    structures: list, workers: int = 1, timeout: float = TIMEOUT_S, progress: bool = False
) -> tuple[list[int], int]:
    """(primitive sites of each structure, in order; reductions that timed out), on ``workers``
    matcher processes side by side (the counts do not depend on how many); -1 where the reduction
    fails or times out (the matcher, which reduces the same way, would too)."""
    results = map_calls(
        primitive_sites, [(st,) for st in structures], workers, timeout, progress, "primitive cells", -1
    )
    return [n for n, _ in results], sum(reason is not None for _, reason in results)


def audit_splits(
    splits: dict[str, list],
    convention: str = DEFAULT_CONVENTION,
    max_comparisons: int = DEFAULT_MAX_COMPARISONS,
    timeout: float = TIMEOUT_S,
    progress: bool = False,
    scored_test_ids: set[str] | None = None,
    workers: int = 1,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(per-structure table, counts) of the duplicate and leakage checks over ``splits``;
    ``scored_test_ids``: the test items the benchmark scores (None: all), over which the
    de-duplicated test set is chosen; ``workers``: matcher processes run side by side."""
    convention_params(convention)
    names = [s for s in SPLIT_ORDER if s in splits]
    formulas = {(s, i): st.composition.reduced_formula for s in names for i, st in splits[s]}
    per_formula = defaultdict(int)
    for f in formulas.values():
        per_formula[f] += 1
    # the primitive reduction only where another structure shares the formula (0: not computed),
    # on the matcher processes
    shared = [(s, i, st) for s in names for i, st in splits[s] if per_formula[formulas[(s, i)]] > 1]
    counts_of, reduce_timeouts = primitive_counts([st for _, _, st in shared], workers, timeout, progress)
    prim = {(s, i): 0 for s in names for i, _ in splits[s]}
    prim.update({(s, i): n for (s, i, _), n in zip(shared, counts_of)})
    groups: dict[tuple[str, int], dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for s in names:
        for i, st in splits[s]:
            groups[(formulas[(s, i)], prim[(s, i)])][s].append((i, st))
    multi = [g for g, v in groups.items() if sum(len(m) for m in v.values()) > 1]
    keys = sorted(groups)
    # groups with one structure need no matcher: a lone scored test crystal is distinct and new
    jobs = [groups[g] for g in keys]
    results, calls, timeouts = _run_groups(
        jobs, names, convention, max_comparisons, timeout, scored_test_ids, workers, progress
    )

    cluster_of: dict[tuple[str, str], str] = {}
    rep_ids: set[tuple[str, str]] = set()
    unchecked_ids: set[tuple[str, str]] = set()
    cross = {pair: {} for pair in CROSS_PASSES}
    cross_unchecked = {pair: set() for pair in CROSS_PASSES}
    dedup, dedup_unchecked = set(), set()
    capped_groups = 0
    for r in results:
        cluster_of.update(r["cluster_of"])
        rep_ids |= r["reps"]
        unchecked_ids |= r["unchecked"]
        for pair in CROSS_PASSES:
            cross[pair].update(r["cross"][pair])
            cross_unchecked[pair] |= r["cross_unchecked"][pair]
        dedup |= r["dedup"]
        dedup_unchecked |= r["dedup_unchecked"]
        capped_groups += r["capped"]

    train_formulas = {formulas[("train", i)] for i, _ in splits.get("train", [])}
    rows = []
    for s in names:
        for i, _ in splits[s]:
            in_train = s != "train" and i in cross.get((s, "train"), {})
            in_val = s == "test" and i in cross.get(("test", "val"), {})
            rows.append(
                {
                    "split": s,
                    "id": i,
                    "reduced_formula": formulas[(s, i)],
                    "primitive_sites": int(prim[(s, i)]),
                    "cluster": cluster_of[(s, i)],
                    "is_representative": (s, i) in rep_ids,
                    "unchecked": (s, i) in unchecked_ids,
                    "duplicate_in_train": bool(in_train),
                    "duplicate_in_val": bool(in_val),
                    "formula_in_train": s != "train" and formulas[(s, i)] in train_formulas,
                    "scored": s == "test" and (scored_test_ids is None or i in scored_test_ids),
                    "in_deduplicated_test": s == "test" and i in dedup,
                }
            )
    table = pd.DataFrame(rows, columns=ITEM_SCHEMA.names)
    counts = _counts(table, names)
    counts.update(
        {
            "convention": convention,
            "max_comparisons": int(max_comparisons),
            "matcher_calls": int(calls),
            "timeouts": int(timeouts),
            "primitive_reductions": len(shared),
            "primitive_reduction_timeouts": int(reduce_timeouts),
            "groups_compared": len(multi),
            "groups_capped": int(capped_groups),
            "unchecked": int(len(unchecked_ids)),
            "cross_unchecked": {
                f"{a} in {b}": len(cross_unchecked[(a, b)]) for a, b in CROSS_PASSES if a in names and b in names
            },
            "deduplicated_unchecked": len(dedup_unchecked),
        }
    )
    return table, counts


def _counts(table: pd.DataFrame, names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"splits": {}}
    for s in names:
        t = table[table["split"] == s]
        distinct = int(t["cluster"].nunique())
        out["splits"][s] = {
            "items": int(len(t)),
            "distinct_structures": distinct,
            "duplicates_within": int(len(t) - distinct),
            "items_in_duplicate_groups": int(t["cluster"].duplicated(keep=False).sum()),
            "distinct_formulas": int(t["reduced_formula"].nunique()),
        }
    test = table[table["split"] == "test"]
    out["test_duplicate_in_train"] = int(test["duplicate_in_train"].sum())
    out["test_duplicate_in_val"] = int(test["duplicate_in_val"].sum())
    val = table[table["split"] == "val"]
    out["val_duplicate_in_train"] = int(val["duplicate_in_train"].sum())
    out["test_formula_in_train"] = int(test["formula_in_train"].sum())
    out["test_polymorph_in_train"] = int((test["formula_in_train"] & ~test["duplicate_in_train"]).sum())
    out["scored_test_items"] = int(test["scored"].sum())
    out["deduplicated_test_items"] = int(test["in_deduplicated_test"].sum())
    out["deduplicated_test_ids"] = sorted(test.loc[test["in_deduplicated_test"], "id"].tolist())
    return out


def prompt_counts(dataset: str, test: list, templates: dict[str, dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per template: test items, distinct prompts, items sharing their prompt, the largest group."""
    from crucible.crystal.csp import prompt_groups
    from crucible.crystal.items import make_item

    out = {}
    for name in sorted(templates):
        built = [make_item(dataset, i, st, name, templates[name], set()) for i, st in test]
        groups = prompt_groups(built)
        sizes = pd.Series(list(groups.values())).value_counts()
        out[name] = {
            "items": len(built),
            "distinct_prompts": int(len(sizes)),
            "items_sharing_a_prompt": int(sizes[sizes > 1].sum()) if len(sizes) else 0,
            "largest_group": int(sizes.max()) if len(sizes) else 0,
        }
    return out


def run_audit(
    source: str,
    dataset: str,
    inputs: list[InFile],
    templates: str | os.PathLike,
    out_items: str | os.PathLike,
    out_summary: str | os.PathLike,
    csv: str | os.PathLike,
    md: str | os.PathLike,
    test_fraction: float = 0.5,
    seed: int = 0,
    max_sites: int | None = None,
    convention: str = DEFAULT_CONVENTION,
    max_comparisons: int = DEFAULT_MAX_COMPARISONS,
    timeout: float = TIMEOUT_S,
    progress: bool = True,
    sources: Any = None,
    max_test_items: int = 0,
    workers: int = 1,
    split_by: str = "random",
) -> dict[str, Any]:
    """The audit of one crystal set: per-structure table (parquet), summary (JSON), table (CSV, MD).
    A built-in set's files are checked against their pins (``sources``: another sources file or
    document than config/sources.yaml). ``max_sites`` None: the set's own limit
    (:func:`crucible.crystal.data.max_sites_for`); ``max_test_items`` and ``seed`` pick the test
    items scored exactly as build-items does, and the de-duplicated test set is chosen among them.

    Args:
        inputs: as build-items; cdvae: train, val and test CSV, so that the validation split is audited too
        out_items: per-structure flags to write (parquet: cluster, duplicate in train/val, formula in train,
            kept in the de-duplicated test set): results/crystal/{dataset}/audit.parquet
        out_summary: the summary to write (JSON: counts per split, distinct prompts per template, the
            de-duplicated test ids score and score-samples read): results/crystal/{dataset}/audit.json
        convention: the matcher that decides what a duplicate is: cdvae (ltol 0.3, stol 0.5, angle_tol 10;
            default) or pymatgen-default (0.2, 0.3, 5)
        max_comparisons: matcher calls per formula group and pass; past it the rest are unchecked and counted,
            so a capped count is a lower bound (default %(default)s)
        workers: matcher processes run side by side: the primitive reductions, then one formula group each
            (the counts do not depend on it; default %(default)s)
        source: as in :func:`crucible.crystal.items.build_item_files`
        dataset: as in :func:`crucible.crystal.items.build_item_files`
        templates: as in :func:`crucible.crystal.items.build_item_files`
        test_fraction: as in :func:`crucible.crystal.items.build_item_files`
        seed: as in :func:`crucible.crystal.items.build_item_files`
        split_by: as in :func:`crucible.crystal.items.build_item_files`
        max_sites: as in :func:`crucible.crystal.items.build_item_files`
        max_test_items: as in :func:`crucible.crystal.items.build_item_files`
        timeout: as in :func:`crucible.crystal.report.score_response_file`
        csv: the table to write (CSV): results/tables/crystal_{dataset}_audit.csv
        md: the table as Markdown, with its caption: results/tables/crystal_{dataset}_audit.md
    """
    from crucible.core.io import write_json, write_parquet
    from crucible.crystal import data
    from crucible.crystal.audit_table import write_audit_table
    from crucible.crystal.items import load_templates

    limit = data.max_sites_for(dataset, max_sites)
    left_out: dict[str, int] = {}
    splits = data.load_splits(
        source,
        inputs,
        test_fraction,
        seed,
        limit,
        dataset=dataset,
        sources=sources,
        left_out=left_out,
        split_by=split_by,
    )
    scored = {i for i, _ in data.subsample(splits.get("test", []), max_test_items, seed, "max_test_items")}
    table, summary = audit_splits(splits, convention, max_comparisons, timeout, progress, scored, workers)
    summary["dataset"] = dataset
    summary["max_sites"] = int(limit)
    summary["left_out_over_max_sites"] = dict(sorted(left_out.items()))
    summary["max_test_items"] = int(max_test_items)
    summary["prompts"] = prompt_counts(dataset, splits.get("test", []), load_templates(templates))
    write_parquet(table, out_items, schema=ITEM_SCHEMA)
    write_json(summary, out_summary)
    write_audit_table(dataset, summary, csv, md)
    return summary
