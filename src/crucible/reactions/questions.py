"""Question builders: a clean table -> RxnOptBench question records, one file per question type.

Every option, reference and legal combination is a real row of the table. Each question draws
from its own generator seeded by (seed, question id), so a question does not change when
another is added, and two builds are byte-identical.

Multiple choice (the schema of RxnOptBench's ``build_multiple_choice.py``, Hugging Face dataset
songjhPKU/RxnOptBench, testsetV6; record fields as in its ``multiple_choice_*.json``):

- ``all_varying``: one question per substrate; ``n_options`` rows of that substrate, always the
  best one, the others one from each of ``n_options - 1`` equal slices of the substrate's rows
  sorted by effective score (spread over the yield range), in shuffled order.
- ``single_varying``: one question per (substrate, varying key): among the real combinations of
  the other varying keys, the one covering the most values of the key is fixed (ties: a seeded
  draw); the options are the key's values actually run with it.
- ``*_reference``: the same question plus 2–5 reference condition groups of the same
  substrate, drawn from rows outside the options whose effective score is below the options'
  best and at most the substrate's ``reference_quantile`` (low-to-mid performers);
  ``*_reference_control`` is the identical question without them (a paired design).
- ``cross_substrate_reference`` (beyond RxnOptBench): the ``all_varying`` question plus the best
  condition group of up to ``cross_references`` other substrates of the table — what a chemist
  has in hand before running a new substrate. Its control is ``all_varying``.

Fill in the blank: ``all_blank`` asks for one candidate index per varying key; the legal
combinations are exactly the substrate's rows; ``all_blank_reference`` adds 2–5 low-to-mid
references, which are then no longer legal answers.

A question is left out, and counted in the build summary's ``left_out`` (per question type, per
reason), when its best effective score is 0 (nothing to score relative to), when it would offer
fewer than two options (multiple choice) or legal combinations (fill in the blank): every answer
would score 1.0, so a table of one condition per substrate built questions any model aced;
when too few rows qualify as references; or, for ``cross_substrate_reference``, when no other
substrate has a row worth anything. A question left out leaves out the variants built from it.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import numpy as np
import pandas as pd

from crucible.core.io import InFile
from crucible.reactions.data import NONE_VALUE, condition_keys_of
from crucible.reactions.scoring import FB_TYPES, MC_TYPES, QUESTION_TYPES, RELATIVE_ONE, effective_score

# Why a question was not built (the build summary's left_out)
NOTHING_TO_WIN = "best_effective_0"
FEWER_THAN_TWO = "fewer_than_2_options"
FEW_REFERENCES = "too_few_reference_rows"
NO_OTHER_SUBSTRATE = "no_other_substrate"
LEFT_OUT_REASONS = (NOTHING_TO_WIN, FEWER_THAN_TWO, FEW_REFERENCES, NO_OTHER_SUBSTRATE)
# The variants built from a question, left out with it
VARIANTS = {
    "all_varying": (
        "all_varying",
        "all_varying_reference",
        "all_varying_reference_control",
        "cross_substrate_reference",
    ),
    "single_varying": ("single_varying", "single_varying_reference", "single_varying_reference_control"),
    "all_blank": ("all_blank", "all_blank_reference"),
    "all_varying_reference": ("all_varying_reference", "all_varying_reference_control"),
    "single_varying_reference": ("single_varying_reference", "single_varying_reference_control"),
    "all_blank_reference": ("all_blank_reference",),
    "cross_substrate_reference": ("cross_substrate_reference",),
}

log = logging.getLogger(__name__)

DEFAULTS = {"n_options": 8, "seed": 0, "n_references": [2, 5], "reference_quantile": 0.6, "cross_references": 5}


def _rng(seed: int, qid: str) -> np.random.Generator:
    digest = int.from_bytes(hashlib.sha256(qid.encode()).digest()[:8], "little")
    return np.random.default_rng([int(seed), digest])


def _none_if_nan(x: Any) -> Any:
    return None if x is None or (isinstance(x, float) and np.isnan(x)) else float(x)


class Table:
    """A clean table with its effective scores, grouped by substrate."""

    def __init__(self, df: pd.DataFrame, card: dict[str, Any]):
        self.df = df.reset_index(drop=True)
        self.card = card
        self.dataset = card["dataset"]
        self.keys = condition_keys_of(df)
        self.constants = dict(card.get("constant_conditions") or {})
        self.kinds = dict(card.get("condition_kinds") or {})
        self.df["effective"] = [effective_score(y, e, d) for y, e, d in zip(df["yield"], df["ee"], df["dr"])]
        # Plain lists: scalar lookups in the inner loops are much faster than DataFrame.at.
        self.col = {c: self.df[c].tolist() for c in self.df.columns}
        self.effective = self.df["effective"].to_numpy()
        self.substrates = sorted(self.df["substrate"].unique())
        self.rows = {s: np.flatnonzero((self.df["substrate"] == s).to_numpy()) for s in self.substrates}
        self.left_out: dict[str, dict[str, int]] = {}

    def leave_out(self, qtype: str, reason: str) -> None:
        """Count the question of ``qtype`` (and the variants built from it) as not built."""
        for variant in VARIANTS[qtype]:
            counts = self.left_out.setdefault(variant, {})
            counts[reason] = counts.get(reason, 0) + 1

    def item(self, key: str, row: int) -> dict[str, str]:
        value = self.col[key][row]
        is_smiles = value != NONE_VALUE and self.kinds.get(key, "smiles") == "smiles"
        return {"content": str(self.col[f"{key}_name"][row]), "SMILES": value if is_smiles else ""}

    def conditions(self, row: int, keys: list[str]) -> dict[str, list[dict[str, str]]]:
        return {k: [self.item(k, row)] for k in keys}

    def reactants(self, substrate: str) -> list[dict[str, str]]:
        smiles = self.card["substrate_smiles"][substrate]
        return [{"content": s, "SMILES": s} for s in smiles.split(".") if s]

    def score(self, row: int) -> dict[str, Any]:
        return {
            "yield": _none_if_nan(self.col["yield"][row]),
            "ee": _none_if_nan(self.col["ee"][row]),
            "dr": _none_if_nan(self.col["dr"][row]),
        }

    def eff(self, rows) -> np.ndarray:
        return self.effective[np.asarray(rows, dtype=int)]


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
    yields = [_none_if_nan(t.col["yield"][r]) for r in option_rows]
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
            "global_best_yield": _none_if_nan(float(np.nanmax(t.df["yield"].to_numpy()[sub_rows])) if known else None),
            "global_best_effective_score": global_best,
            "global_best_entry_indices": [int(r) for r, e in zip(sub_rows, sub_eff) if e >= global_best * RELATIVE_ONE],
            **extra_meta,
        },
    }


def _references(
    t: Table, substrate: str, exclude: set[int], below: float, rng: np.random.Generator, params: dict[str, Any]
) -> tuple[list[int], dict[str, Any]]:
    rows = t.rows[substrate]
    eff = t.eff(rows)
    cap = float(np.quantile(eff, params["reference_quantile"]))
    pool = [int(r) for r, e in zip(rows, eff) if int(r) not in exclude and e < below and e <= cap]
    lo, hi = params["n_references"]
    info = {
        "rule": f"rows outside the options with effective < the options' best and <= the substrate's "
        f"{params['reference_quantile']:g} quantile ({cap:.4g})",
        "pool_size": len(pool),
    }
    if len(pool) < lo:
        return [], info
    n = int(min(rng.integers(lo, hi + 1), len(pool)))
    chosen = sorted(int(x) for x in rng.choice(pool, size=n, replace=False))
    info["n_references"] = n
    return chosen, info


def _reference_entry(t: Table, row: int, with_substrate: bool = False) -> dict[str, Any]:
    entry: dict[str, Any] = {"conditions": t.conditions(row, t.keys), **t.score(row), "row_index": int(row)}
    if with_substrate:
        sub = t.col["substrate"][row]
        entry = {"substrate": sub, "reactants": t.reactants(sub), **entry}
    return entry


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
        rng = _rng(seed, base_id)
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
            ref_rows, info = _references(t, s, set(int(r) for r in opt), best, _rng(seed, base_id + ":ref"), params)
            if ref_rows:
                refs = [_reference_entry(t, r) for r in ref_rows]
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
                crng = _rng(seed, base_id + ":cross")
                pick = sorted(crng.choice(others, size=min(params["cross_references"], len(others)), replace=False))
                cross_rows = [int(t.rows[o][int(np.argmax(t.eff(t.rows[o])))]) for o in pick]
                cinfo = {"rule": "the best row of each of these other substrates", "substrates": [str(p) for p in pick]}
                out["cross_substrate_reference"].append(
                    _with_references(
                        rec,
                        [_reference_entry(t, r, with_substrate=True) for r in cross_rows],
                        "cross_substrate_reference",
                        f"{t.dataset}:cross_substrate_reference:{s}",
                        cinfo,
                    )
                )
        for key in t.keys:
            sid = f"{t.dataset}:single_varying:{s}:{key}"
            srng = _rng(seed, sid)
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
            ref_rows, rinfo = _references(
                t, s, set(int(r) for r in sopt), srec["meta"]["best_effective_score"], _rng(seed, sid + ":ref"), params
            )
            if ref_rows:
                refs = [_reference_entry(t, r) for r in ref_rows]
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
        ref_rows, info = _references(
            t, s, set(), best, _rng(params["seed"], f"{t.dataset}:all_blank_reference:{s}"), params
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
                "input": {**rec["input"], "reference_conditions": [_reference_entry(t, r) for r in ref_rows]},
                "meta": {
                    **rec["meta"],
                    "legal_combinations": legal(set(ref_rows)),
                    "reference_info": info,
                    "pair_id": qid,
                },
            }
            out["all_blank_reference"].append(rrec)
    return out


def limit_per_type(sets: dict[str, list[dict[str, Any]]], k: int) -> dict[str, list[dict[str, Any]]]:
    """At most ``k`` questions of each type, for a small run: those of the first ``k`` pair ids
    in sorted order, so that a design and its control keep the same pairs (a question without
    a pair id counts as its own)."""
    out = {}
    for qtype, questions in sets.items():
        keys = sorted({q["meta"].get("pair_id", q["id"]) for q in questions})[:k]
        keep = set(keys)
        out[qtype] = [q for q in questions if q["meta"].get("pair_id", q["id"]) in keep]
    return out


def build_all(
    df: pd.DataFrame, card: dict[str, Any], params: dict[str, Any] | None = None
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """Every question type of one dataset, and a build summary (counts, what was left out)."""
    params = {**DEFAULTS, **(params or {})}
    t = Table(df, card)
    sets = {**build_multiple_choice(t, params), **build_fill_in_blank(t, params)}
    if params.get("max_per_type"):
        sets = limit_per_type(sets, int(params["max_per_type"]))
    summary = {
        "dataset": t.dataset,
        "params": params,
        "substrates": len(t.substrates),
        "substrates_with_best_effective_0": [s for s in t.substrates if t.eff(t.rows[s]).max() <= 0],
        "questions": {q: len(sets[q]) for q in QUESTION_TYPES},
        # questions not built, per type and reason (LEFT_OUT_REASONS; max_per_type's cut is not here)
        "left_out": {q: dict(sorted(t.left_out[q].items())) for q in QUESTION_TYPES if q in t.left_out},
    }
    for qtype, counts in summary["left_out"].items():
        if FEWER_THAN_TWO in counts:
            log.warning(
                "%s: %d %s question(s) not built: fewer than 2 options (every answer would score 1.0)",
                t.dataset,
                counts[FEWER_THAN_TWO],
                qtype,
            )
    return {q: sets[q] for q in QUESTION_TYPES}, summary


def write_question_files(
    data: InFile,
    card: InFile,
    params: dict[str, Any] | None,
    types: list[str],
    out_questions: list[str],
    out_prompts: list[str],
    out_summary: str,
    system_prompt: str | None = None,
) -> None:
    """Build every question type of a clean table and write, per requested type, its question
    file (RxnOptBench's schema) and its ``prompts.jsonl``; then the build summary.

    Args:
        params: JSON: n_options, seed, n_references, reference_quantile, cross_references
        types: question types to build, e.g. single_varying all_varying
        out_questions: question files to write, one per --types entry: .../{question_type}/questions.json
        out_prompts: prompt files to write, one per --types entry: .../{question_type}/prompts.jsonl
        out_summary: the build record to write (counts per type, parameters):
            results/reactions/{dataset}/build.json
        system_prompt: system prompt of every prompt (default: none)
        data: the clean table: results/reactions/data/{dataset}.parquet
        card: its card: results/reactions/data/{dataset}.json
    """
    from crucible.core.errors import ConfigError
    from crucible.core.io import read_json, read_parquet, write_json, write_text
    from crucible.reactions import prompts

    if not len(types) == len(out_questions) == len(out_prompts):
        raise ConfigError(
            f"{len(types)} question types, {len(out_questions)} question files and {len(out_prompts)} prompt "
            "files: give one question file and one prompt file per type, in the same order"
        )
    sets, summary = build_all(read_parquet(data), read_json(card), params)
    for qtype, q_out, p_out in zip(types, out_questions, out_prompts):
        if qtype not in sets:
            raise ConfigError(f"unknown question type {qtype!r}; known: {', '.join(sets)}")
        write_json(sets[qtype], q_out, indent=1)
        write_text(prompts.prompts_jsonl(sets[qtype], system_prompt or prompts.SYSTEM_PROMPT), p_out)
    write_json(summary, out_summary)
