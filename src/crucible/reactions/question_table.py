"""The clean table as the question builders see it (:class:`Table`: effective scores, rows by
substrate, the questions left out and why), each question's own seeded generator, and the
reference rows a ``*_reference`` question adds: what multiple choice
(:mod:`crucible.reactions.multiple_choice`) and fill in the blank
(:mod:`crucible.reactions.fill_in_blank`) share."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pandas as pd

from crucible.reactions.data import NONE_VALUE, condition_keys_of
from crucible.reactions.scoring import effective_score

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


def question_rng(seed: int, qid: str) -> np.random.Generator:
    digest = int.from_bytes(hashlib.sha256(qid.encode()).digest()[:8], "little")
    return np.random.default_rng([int(seed), digest])


def none_if_nan(x: Any) -> Any:
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
            "yield": none_if_nan(self.col["yield"][row]),
            "ee": none_if_nan(self.col["ee"][row]),
            "dr": none_if_nan(self.col["dr"][row]),
        }

    def eff(self, rows) -> np.ndarray:
        return self.effective[np.asarray(rows, dtype=int)]


def reference_rows(
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


def reference_entry(t: Table, row: int, with_substrate: bool = False) -> dict[str, Any]:
    entry: dict[str, Any] = {"conditions": t.conditions(row, t.keys), **t.score(row), "row_index": int(row)}
    if with_substrate:
        sub = t.col["substrate"][row]
        entry = {"substrate": sub, "reactants": t.reactants(sub), **entry}
    return entry
