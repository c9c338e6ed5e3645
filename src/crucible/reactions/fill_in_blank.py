"""Fill-in-the-blank questions: ``all_blank`` (one candidate index per varying key; the legal
combinations are exactly the substrate's rows) and ``all_blank_reference``."""

from __future__ import annotations

from typing import Any

import numpy as np

from crucible.reactions.question_table import (
    FEW_REFERENCES,
    FEWER_THAN_TWO,
    NOTHING_TO_WIN,
    Table,
    question_rng,
    reference_entry,
    reference_rows,
)
from crucible.reactions.scoring import FB_TYPES


def build_fill_in_blank(t: Table, params: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {q: [] for q in FB_TYPES}
    for s in t.substrates:
        rows = t.rows[s]
        sub = t.df.iloc[rows]
        values = {k: sorted(sub[k].unique()) for k in t.keys}
        index = {k: {v: i for i, v in enumerate(vals)} for k, vals in values.items()}
        first_row = {k: {v: int(sub.index[sub[k] == v][0]) for v in vals} for k, vals in values.items()}
        candidates = {
            k: [{"index": i, **t.item(k, first_row[k][v])} for i, v in enumerate(vals)] for k, vals in values.items()
        }
        eff = t.eff(rows)
        best = float(eff.max())
        if best <= 0:
            t.leave_out("all_blank", NOTHING_TO_WIN)
            continue
        if len(rows) < 2:  # one legal combination: any answer that is legal is the best
            t.leave_out("all_blank", FEWER_THAN_TWO)
            continue

        # Defaults bind this substrate's arrays: the closure is only called inside this iteration.
        def legal(exclude: set[int], rows=rows, eff=eff, index=index, best=best) -> list[dict[str, Any]]:
            out_rows = []
            for r, e in zip(rows, eff):
                if int(r) in exclude:
                    continue
                out_rows.append(
                    {
                        "combination": {k: index[k][t.col[k][r]] for k in t.keys},
                        **t.score(int(r)),
                        "effective_score": float(e),
                        "relative_score": float(e / best),
                        "row_index": int(r),
                    }
                )
            return out_rows

        constant = {k: [{"content": v, "SMILES": ""}] for k, v in sorted(t.constants.items())}
        qid = f"{t.dataset}:all_blank:{s}"
        rec = {
            "id": qid,
            "question_type": "all_blank",
            "query_keys": list(t.keys),
            "input": {
                "reactants": t.reactants(s),
                "products": [],
                "constant_conditions": constant,
                "candidate_values": candidates,
            },
            "meta": {
                "dataset": t.dataset,
                "parent_table_id": f"{t.dataset}:{s}",
                "substrate": s,
                "source_file": t.card["source_file"],
                "source_sha256": t.card["source_sha256"],
                "total_entries_in_source_table": int(len(rows)),
                "best_effective_score": best,
                "search_space_size": int(np.prod([len(v) for v in values.values()])),
                "legal_combinations": legal(set()),
            },
        }
        out["all_blank"].append(rec)
        ref_rows, info = reference_rows(
            t, s, set(), best, question_rng(params["seed"], f"{t.dataset}:all_blank_reference:{s}"), params
        )
        if not ref_rows:
            t.leave_out("all_blank_reference", FEW_REFERENCES)
        elif len(rows) - len(ref_rows) < 2:
            t.leave_out("all_blank_reference", FEWER_THAN_TWO)
        else:
            rrec = {
                **rec,
                "id": f"{t.dataset}:all_blank_reference:{s}",
                "question_type": "all_blank_reference",
                "input": {**rec["input"], "reference_conditions": [reference_entry(t, r) for r in ref_rows]},
                "meta": {
                    **rec["meta"],
                    "legal_combinations": legal(set(ref_rows)),
                    "reference_info": info,
                    "pair_id": qid,
                },
            }
            out["all_blank_reference"].append(rrec)
    return out
