"""Multiple-choice questions (RxnOptBench's ``build_multiple_choice.py`` schema): ``all_varying``,
``single_varying``, their ``*_reference`` and ``*_reference_control`` variants and
``cross_substrate_reference``, as :mod:`crucible.reactions.questions` describes them."""

from __future__ import annotations

from typing import Any

import numpy as np

from crucible.reactions.question_table import (
    FEW_REFERENCES,
    FEWER_THAN_TWO,
    NO_OTHER_SUBSTRATE,
    NOTHING_TO_WIN,
    Table,
    none_if_nan,
    question_rng,
    reference_entry,
    reference_rows,
)
from crucible.reactions.scoring import MC_TYPES, RELATIVE_ONE


def sample_options(effective: np.ndarray, n_options: int, rng: np.random.Generator) -> np.ndarray:
    """Positions into ``effective``: the best, plus one from each slice of the rest sorted by score."""
    n = len(effective)
    order = np.argsort(-effective, kind="stable")
    if n <= n_options:
        chosen = order
    else:
        best, rest = order[0], order[1:][::-1]  # rest ascending by score
        picks = [int(rng.choice(chunk)) for chunk in np.array_split(rest, n_options - 1)]
        chosen = np.array([best, *picks])
    return chosen[rng.permutation(len(chosen))]


def _mc_record(
    t: Table,
    qid: str,
    qtype: str,
    substrate: str,
    varying: list[str],
    option_rows: np.ndarray,
    constant_rows: dict[str, int] | None,
    extra_meta: dict[str, Any],
) -> dict[str, Any] | None:
    eff = t.eff(option_rows)
    best = float(eff.max())
    if best <= 0:
        t.leave_out(qtype, NOTHING_TO_WIN)
        return None
    if len(option_rows) < 2:
        t.leave_out(qtype, FEWER_THAN_TWO)
        return None
    sub_rows = t.rows[substrate]
    sub_eff = t.eff(sub_rows)
    yields = [none_if_nan(t.col["yield"][r]) for r in option_rows]
    known = [y for y in yields if y is not None]
    relative = [float(e / best) for e in eff]
    constant: dict[str, list[dict[str, str]]] = {
        k: [{"content": v, "SMILES": ""}] for k, v in sorted(t.constants.items())
    }
    for k, row in (constant_rows or {}).items():
        constant[k] = [t.item(k, row)]
    global_best = float(sub_eff.max())
    return {
        "id": qid,
        "question_type": qtype,
        "varying_keys": varying,
        "input": {"reactants": t.reactants(substrate), "products": [], "constant_conditions": constant},
        "options": [t.conditions(int(r), varying) for r in option_rows],
        "answer": [i for i, r in enumerate(relative) if r >= RELATIVE_ONE],
        "meta": {
            "dataset": t.dataset,
            "parent_table_id": f"{t.dataset}:{substrate}",
            "substrate": substrate,
            "source_file": t.card["source_file"],
            "source_sha256": t.card["source_sha256"],
            "total_entries_in_source_table": int(len(sub_rows)),
            "scores": [t.score(int(r)) for r in option_rows],
            "yields": yields,
            "effective_scores": [float(e) for e in eff],
            "option_relative_scores": relative,
            "option_source_entries": [{"row_index": int(r)} for r in option_rows],
            "best_yield": max(known) if known else None,
            "best_effective_score": best,
            "best_entry_indices": [int(r) for r, e in zip(option_rows, eff) if e >= best * RELATIVE_ONE],
            "global_best_yield": none_if_nan(float(np.nanmax(t.df["yield"].to_numpy()[sub_rows])) if known else None),
            "global_best_effective_score": global_best,
            "global_best_entry_indices": [int(r) for r, e in zip(sub_rows, sub_eff) if e >= global_best * RELATIVE_ONE],
            **extra_meta,
        },
    }


def _with_references(
    rec: dict[str, Any], refs: list[dict[str, Any]], qtype: str, qid: str, info: dict[str, Any]
) -> dict[str, Any]:
    out = {
        **rec,
        "id": qid,
        "question_type": qtype,
        "input": {**rec["input"], "reference_conditions": refs},
        "meta": {**rec["meta"], "reference_info": info, "pair_id": rec["id"]},
    }
    return out


def _control(rec: dict[str, Any], qtype: str, qid: str, info: dict[str, Any]) -> dict[str, Any]:
    return {
        **rec,
        "id": qid,
        "question_type": qtype,
        "meta": {**rec["meta"], "reference_info": info, "pair_id": rec["id"]},
    }


def _single_group(t: Table, substrate: str, key: str, rng: np.random.Generator) -> tuple[np.ndarray, dict[str, Any]]:
    rows = t.rows[substrate]
    others = [k for k in t.keys if k != key]
    if not others:
        return rows, {"fixed_conditions": {}, "n_groups": 1, "max_coverage": len({t.col[key][r] for r in rows})}
    groups: dict[tuple, list[int]] = {}
    for r in rows:
        groups.setdefault(tuple(t.col[k][r] for k in others), []).append(int(r))
    coverage = {g: len({t.col[key][r] for r in idx}) for g, idx in groups.items()}
    top = max(coverage.values())
    best_groups = sorted(g for g, c in coverage.items() if c == top)
    chosen = best_groups[int(rng.integers(len(best_groups)))]
    info = {
        "fixed_conditions": dict(zip(others, chosen)),
        "n_groups": len(groups),
        "max_coverage": top,
        "n_groups_with_max_coverage": len(best_groups),
    }
    return np.asarray(sorted(groups[chosen]), dtype=int), info


def build_multiple_choice(t: Table, params: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {q: [] for q in MC_TYPES}
    seed, k_opt = params["seed"], params["n_options"]
    for s in t.substrates:
        # all_varying and its reference / cross-substrate variants share the same options.
        base_id = f"{t.dataset}:all_varying:{s}"
        rng = question_rng(seed, base_id)
        rows = t.rows[s]
        opt = rows[sample_options(t.eff(rows), k_opt, rng)]
        rec = _mc_record(
            t,
            base_id,
            "all_varying",
            s,
            list(t.keys),
            opt,
            None,
            {"selection_info": {"rule": "best + one per score slice", "n_candidates": int(len(rows))}},
        )
        if rec is not None:
            out["all_varying"].append(rec)
            best = rec["meta"]["best_effective_score"]
            ref_rows, info = reference_rows(
                t, s, set(int(r) for r in opt), best, question_rng(seed, base_id + ":ref"), params
            )
            if ref_rows:
                refs = [reference_entry(t, r) for r in ref_rows]
                out["all_varying_reference"].append(
                    _with_references(rec, refs, "all_varying_reference", f"{t.dataset}:all_varying_reference:{s}", info)
                )
                out["all_varying_reference_control"].append(
                    _control(
                        rec, "all_varying_reference_control", f"{t.dataset}:all_varying_reference_control:{s}", info
                    )
                )
            else:
                t.leave_out("all_varying_reference", FEW_REFERENCES)
            others = [o for o in t.substrates if o != s and t.eff(t.rows[o]).max() > 0]
            if not others:
                t.leave_out("cross_substrate_reference", NO_OTHER_SUBSTRATE)
            else:
                crng = question_rng(seed, base_id + ":cross")
                pick = sorted(crng.choice(others, size=min(params["cross_references"], len(others)), replace=False))
                cross_rows = [int(t.rows[o][int(np.argmax(t.eff(t.rows[o])))]) for o in pick]
                cinfo = {"rule": "the best row of each of these other substrates", "substrates": [str(p) for p in pick]}
                out["cross_substrate_reference"].append(
                    _with_references(
                        rec,
                        [reference_entry(t, r, with_substrate=True) for r in cross_rows],
                        "cross_substrate_reference",
                        f"{t.dataset}:cross_substrate_reference:{s}",
                        cinfo,
                    )
                )
        for key in t.keys:
            sid = f"{t.dataset}:single_varying:{s}:{key}"
            srng = question_rng(seed, sid)
            group, sinfo = _single_group(t, s, key, srng)
            if len(group) < 2:
                t.leave_out("single_varying", FEWER_THAN_TWO)
                continue
            sopt = group[sample_options(t.eff(group), k_opt, srng)]
            fixed_rows = {k: int(group[0]) for k in t.keys if k != key}
            srec = _mc_record(t, sid, "single_varying", s, [key], sopt, fixed_rows, {"selection_info": sinfo})
            if srec is None:
                continue
            out["single_varying"].append(srec)
            ref_rows, rinfo = reference_rows(
                t,
                s,
                set(int(r) for r in sopt),
                srec["meta"]["best_effective_score"],
                question_rng(seed, sid + ":ref"),
                params,
            )
            if ref_rows:
                refs = [reference_entry(t, r) for r in ref_rows]
                out["single_varying_reference"].append(
                    _with_references(
                        srec, refs, "single_varying_reference", f"{t.dataset}:single_varying_reference:{s}:{key}", rinfo
                    )
                )
                out["single_varying_reference_control"].append(
                    _control(
                        srec,
                        "single_varying_reference_control",
                        f"{t.dataset}:single_varying_reference_control:{s}:{key}",
                        rinfo,
                    )
                )
            else:
                t.leave_out("single_varying_reference", FEW_REFERENCES)
    return out
