"""Leakage and duplicate audit of a crystal set: what Matbench's task-overlap table does for Matbench.

Measured from the data, under the benchmark's own matcher (``get_rms_dist`` of one convention,
default ``cdvae``: "a duplicate" means "this structure, answered verbatim, would score as a match"):

* duplicates inside each split: greedy clustering, each structure against the representatives
  (first members) of the clusters found so far, stopping at the first match (pymatgen's
  ``group_structures`` works the same way); a split's distinct structures are its clusters;
* duplicates across splits: each cluster representative of val and test against those of train
  (and test against val), stopping at the first match;
* polymorphs: test items whose reduced formula occurs in train without a matching structure;
* distinct prompts per prompt template: items whose prompts are the same text cannot be told
  apart by any model, so a deterministic one can only be scored per prompt.

Only structures that can match are compared: same reduced formula and the same number of sites
in the primitive cell the matcher reduces to (with ``attempt_supercell`` off, the matcher returns
no match otherwise), so the grouping loses nothing. The cost is capped per group: at most
``max_comparisons`` matcher calls per (group, pass); past the cap the remaining structures are
left unchecked (each its own cluster) and counted, so a capped count is a lower bound.

The de-duplicated test set keeps one test item per test cluster (the first by id) and drops every
cluster that matches a train or val structure.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa

from crucible.crystal.scoring import DEFAULT_CONVENTION, STRUCTURE, TIMEOUT_S, MatcherWorker, convention_params

DEFAULT_MAX_COMPARISONS = 2000
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
        ("in_deduplicated_test", pa.bool_()),
    ]
)


def primitive_sites(structure) -> int:
    """Sites of the cell the matcher reduces to (its own niggli + primitive reduction)."""
    from pymatgen.analysis.structure_matcher import StructureMatcher

    try:
        return len(StructureMatcher._get_reduced_structure(structure, True, True))
    except Exception:  # noqa: BLE001 - an unreducible cell is compared with its formula group as a whole
        return -1


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


def _first_match(reps: list, others: list, match: Matcher, budget: list[int]):
    """{representative id: id of the first matching representative of ``others``} within budget."""
    found = {}
    for rep in reps:
        for other in others:
            if budget[0] <= 0:
                return found, True
            budget[0] -= 1
            if match(rep, other):
                found[rep[0]] = other[0]
                break
    return found, False


def audit_splits(
    splits: dict[str, list],
    convention: str = DEFAULT_CONVENTION,
    max_comparisons: int = DEFAULT_MAX_COMPARISONS,
    timeout: float = TIMEOUT_S,
    progress: bool = False,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(per-structure table, counts) of the duplicate and leakage checks over ``splits``."""
    from tqdm import tqdm

    convention_params(convention)
    names = [s for s in SPLIT_ORDER if s in splits]
    formulas = {(s, i): st.composition.reduced_formula for s in names for i, st in splits[s]}
    per_formula = defaultdict(int)
    for f in formulas.values():
        per_formula[f] += 1
    # the primitive reduction only where another structure shares the formula (0: not computed)
    prim = {
        (s, i): primitive_sites(st) if per_formula[formulas[(s, i)]] > 1 else 0 for s in names for i, st in splits[s]
    }
    groups: dict[tuple[str, int], dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for s in names:
        for i, st in splits[s]:
            groups[(formulas[(s, i)], prim[(s, i)])][s].append((i, st))

    cluster_of: dict[tuple[str, str], str] = {}
    rep_ids: set[tuple[str, str]] = set()
    unchecked_ids: set[tuple[str, str]] = set()
    cross: dict[tuple[str, str], dict[str, str]] = {pair: {} for pair in CROSS_PASSES}
    capped_groups = 0
    with MatcherWorker(timeout) as worker:
        match = Matcher(worker, convention)
        multi = [g for g, v in groups.items() if sum(len(m) for m in v.values()) > 1]
        for _, by_split in tqdm(sorted(groups.items()), desc="audit", disable=not progress):
            reps: dict[str, list] = {}
            hit_cap = False
            for s in names:
                members = by_split.get(s, [])
                if len(members) > 1:
                    clusters, unchecked = _cluster(members, match, max_comparisons)
                else:
                    clusters, unchecked = [[m] for m in members], []
                hit_cap |= bool(unchecked)
                reps[s] = [cl[0] for cl in clusters]
                for cl in clusters:
                    for i, _ in cl:
                        cluster_of[(s, i)] = f"{s}:{cl[0][0]}"
                    rep_ids.add((s, cl[0][0]))
                unchecked_ids.update((s, i) for i in unchecked)
            for a, b in CROSS_PASSES:
                if reps.get(a) and reps.get(b):
                    budget = [max_comparisons]
                    found, capped = _first_match(reps[a], reps[b], match, budget)
                    hit_cap |= capped
                    cross[(a, b)].update(found)
            capped_groups += hit_cap
        calls, timeouts = match.calls, match.timeouts

    train_formulas = {formulas[("train", i)] for i, _ in splits.get("train", [])}
    rows = []
    for s in names:
        for i, _ in splits[s]:
            rep = cluster_of[(s, i)].split(":", 1)[1]
            in_train = s != "train" and rep in cross.get((s, "train"), {})
            in_val = s == "test" and rep in cross.get(("test", "val"), {})
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
                    "in_deduplicated_test": s == "test" and (s, i) in rep_ids and not in_train and not in_val,
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
            "groups_compared": len(multi),
            "groups_capped": int(capped_groups),
            "unchecked": int(len(unchecked_ids)),
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


def audit_rows(dataset: str, summary: dict[str, Any]) -> pd.DataFrame:
    """The audit table: one row per check, with its count, denominator and percentage."""
    rows = []

    def add(check: str, split: str, count: int, total: int, note: str = "", share: bool = True) -> None:
        pct = round(100.0 * count / total, 2) if total and share else None
        rows.append(
            {"check": check, "split": split, "count": int(count), "of": int(total), "percent": pct, "note": note}
        )

    splits = summary["splits"]
    for s, c in splits.items():
        add("items", s, c["items"], c["items"])
        add("distinct structures", s, c["distinct_structures"], c["items"])
        add(
            "duplicates within the split",
            s,
            c["duplicates_within"],
            c["items"],
            "items beyond the first of their cluster",
        )
        add("distinct reduced formulas", s, c["distinct_formulas"], c["items"])
    n_test = splits.get("test", {}).get("items", 0)
    if "val" in splits:
        add("val structure also in train", "val", summary["val_duplicate_in_train"], splits["val"]["items"])
        add("test structure also in val", "test", summary["test_duplicate_in_val"], n_test)
    add("test structure also in train", "test", summary["test_duplicate_in_train"], n_test)
    add("test formula also in train", "test", summary["test_formula_in_train"], n_test)
    add(
        "test formula in train, structure not (polymorph)",
        "test",
        summary["test_polymorph_in_train"],
        n_test,
    )
    add(
        "de-duplicated test set",
        "test",
        summary["deduplicated_test_items"],
        n_test,
        "one per test cluster, none matching train or val",
    )
    for name, p in summary.get("prompts", {}).items():
        add(
            f"distinct prompts: {name}",
            "test",
            p["distinct_prompts"],
            p["items"],
            f"largest group {p['largest_group']}",
        )
    cap_note = (
        f"{summary['groups_capped']} group(s) hit the cap of {summary['max_comparisons']} comparisons; "
        f"{summary['unchecked']} structure(s) unchecked"
    )
    add("matcher calls", "all", summary["matcher_calls"], summary["matcher_calls"], cap_note, share=False)
    return pd.DataFrame(rows)


def run_audit(
    source: str,
    dataset: str,
    inputs: list[str],
    templates_path: str | os.PathLike,
    out_items: str | os.PathLike,
    out_summary: str | os.PathLike,
    out_csv: str | os.PathLike,
    out_md: str | os.PathLike,
    test_fraction: float = 0.5,
    seed: int = 0,
    max_sites: int = 20,
    convention: str = DEFAULT_CONVENTION,
    max_comparisons: int = DEFAULT_MAX_COMPARISONS,
    timeout: float = TIMEOUT_S,
    progress: bool = False,
    sources: Any = None,
) -> dict[str, Any]:
    """The audit of one crystal set: per-structure table (parquet), summary (JSON), table (CSV, MD).
    A built-in set's files are checked against their pins (``sources``: another sources file or
    document than config/sources.yaml)."""
    from crucible.crystal import data
    from crucible.crystal.items import load_templates
    from crucible.io import write_json, write_parquet
    from crucible.report.tables import write_table

    splits = data.load_splits(source, inputs, test_fraction, seed, max_sites, dataset=dataset, sources=sources)
    table, summary = audit_splits(splits, convention, max_comparisons, timeout, progress)
    summary["dataset"] = dataset
    summary["prompts"] = prompt_counts(dataset, splits.get("test", []), load_templates(templates_path))
    rows = audit_rows(dataset, summary)
    caption = (
        f"Train, validation and test items of {dataset} compared with StructureMatcher ({convention} "
        f"convention; at most {max_comparisons} comparisons per formula group and pass)."
    )
    write_parquet(table, out_items, schema=ITEM_SCHEMA)
    write_json(summary, out_summary)
    write_table(
        rows, csv=out_csv, md=out_md, digits=2, title=f"Leakage and duplicate audit of {dataset}", caption=caption
    )
    return summary
