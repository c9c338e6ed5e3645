"""Registered non-LLM models that answer the question files: what "good" means before any LLM.

Each follows scikit-learn's estimator protocol: hyperparameters are the constructor's keyword
arguments, stored unchanged and returned by ``get_params()`` (``set_params``, and so
``sklearn.base.clone``, work); the seeded ones take ``random_state``; ``fit(df, card)`` on the
clean table learns the ``..._`` attributes and returns the model; ``predict(questions) -> {id:
prediction}`` (an option index for multiple choice, ``{key: index}`` for fill in the blank).
The baselines are a :class:`crucible.core.registry.Registry` of :class:`BaselineSpec`; unknown
parameters are refused naming the known ones. Whatever a model knows about the substrate being
asked about comes only from the question itself: ``popularity``, ``nearest-substrate`` and ``yield-model`` use the rows
of the *other* substrates of the table (leave one substrate out), never the asked one's.

- ``random``: a seeded uniform draw (its exact expectation is :func:`crucible.reactions.scoring.expected_random`).
- ``popularity``: the conditions that were best for the most other substrates (ties: the mean
  relative effective score of those conditions over the other substrates).
- ``nearest-substrate``: the best conditions of the most similar other substrate (Tanimoto on
  Morgan fingerprints, radius 2, 2048 bits).
- ``yield-model``: gradient boosting on condition one-hots + substrate fingerprint, trained
  without the asked substrate; picks the option (or candidate combination) it predicts best.
- ``oracle``: reads the answer; checks that a relative score of 1 is reachable.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from crucible.core.errors import ConfigError
from crucible.core.registry import Registry, Spec
from crucible.reactions.data import condition_keys_of
from crucible.reactions.scoring import effective_score

FP_BITS = 2048


def _ident(item: dict[str, str]) -> str:
    return item.get("SMILES") or item.get("content", "")


def _option_conditions(q: dict[str, Any], option: dict[str, Any], keys: list[str]) -> dict[str, str]:
    """The full condition combination an option stands for: the option's keys + the fixed ones."""
    cond = {k: _ident(v[0]) for k, v in option.items()}
    for k, v in q["input"].get("constant_conditions", {}).items():
        if k in keys and k not in cond:
            cond[k] = _ident(v[0])
    return cond


def _fb_candidates(q: dict[str, Any]) -> tuple[list[str], list[tuple[int, ...]], list[dict[str, str]]]:
    keys = list(q["query_keys"])
    cands = q["input"]["candidate_values"]
    combos = list(itertools.product(*[range(len(cands[k])) for k in keys]))
    conds = [{k: _ident(cands[k][i]) for k, i in zip(keys, combo)} for combo in combos]
    for c in conds:
        for k, v in q["input"].get("constant_conditions", {}).items():
            c.setdefault(k, _ident(v[0]))
    return keys, combos, conds


def morgan_fingerprints(smiles: list[str], bits: int = FP_BITS) -> np.ndarray:
    from rdkit import Chem
    from rdkit.Chem import rdFingerprintGenerator

    gen = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=bits)
    out = np.zeros((len(smiles), bits), dtype=np.uint8)
    for i, s in enumerate(smiles):
        out[i] = gen.GetFingerprintAsNumPy(Chem.MolFromSmiles(s))
    return out


def tanimoto(a: np.ndarray, b: np.ndarray) -> float:
    inter = np.logical_and(a, b).sum()
    union = np.logical_or(a, b).sum()
    return float(inter / union) if union else 0.0


class _Base:
    name = "base"
    needs_other_substrates = False

    @classmethod
    def _param_names(cls) -> list[str]:
        """The constructor's keyword arguments: the hyperparameters (scikit-learn's rule)."""
        return sorted(
            p.name
            for p in inspect.signature(cls.__init__).parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        )

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> "_Base":
        unknown = sorted(set(params) - set(self._param_names()))
        if unknown:
            raise ConfigError(
                f"reaction baseline {self.name!r}: unknown parameter(s) {', '.join(unknown)}; "
                f"known: {', '.join(self._param_names()) or 'none'}"
            )
        for name, value in params.items():
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def fit(self, df: pd.DataFrame, card: dict[str, Any]) -> "_Base":
        # a refit forgets what the last fit learned (the lookup below is built lazily)
        self.__dict__.pop("lookup_", None)
        self.df_ = df.reset_index(drop=True).copy()
        self.keys_ = condition_keys_of(df)
        self.df_["effective"] = [effective_score(y, e, d) for y, e, d in zip(df["yield"], df["ee"], df["dr"])]
        best = self.df_.groupby("substrate")["effective"].transform("max")
        self.df_["relative"] = np.where(best > 0, self.df_["effective"] / best.where(best > 0, 1.0), 0.0)
        self.substrates_ = sorted(self.df_["substrate"].unique())
        if self.needs_other_substrates and len(self.substrates_) < 2:
            raise ConfigError(f"model {self.name!r} learns from other substrates; table {card['dataset']!r} has one")
        return self

    # A model scores candidate condition combinations for the asked substrate; higher is better.
    def score_conditions(self, substrate: str, conds: list[dict[str, str]]) -> list[Any]:
        raise NotImplementedError

    def predict(self, questions: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for q in questions:
            if "query_keys" in q:
                keys, combos, conds = _fb_candidates(q)
                best = _argmax(self.score_conditions(q["meta"]["substrate"], conds))
                out[q["id"]] = dict(zip(keys, (int(i) for i in combos[best])))
            else:
                conds = [_option_conditions(q, o, self.keys_) for o in q["options"]]
                out[q["id"]] = int(_argmax(self.score_conditions(q["meta"]["substrate"], conds)))
        return out

    def _relative(self, substrate: str, cond: dict[str, str]) -> float | None:
        """Relative effective score of this substrate's run under ``cond``; None if not run.

        A combination naming only some keys averages over the runs that match it."""
        if not hasattr(self, "lookup_"):
            cols = [self.df_[k].to_numpy() for k in self.keys_]
            self.lookup_ = {(s, *vals): r for s, *vals, r in zip(self.df_["substrate"], *cols, self.df_["relative"])}
        if all(k in cond for k in self.keys_):
            return self.lookup_.get((substrate, *(cond[k] for k in self.keys_)))
        sub = self.df_[self.df_["substrate"] == substrate]
        mask = np.ones(len(sub), dtype=bool)
        for k, v in cond.items():
            if k in sub.columns:
                mask &= (sub[k] == v).to_numpy()
        return float(sub.loc[mask, "relative"].mean()) if mask.any() else None


def _argmax(scores: list[Any]) -> int:
    """Index of the highest score; ties go to the lowest index (deterministic)."""
    best = 0
    for i, s in enumerate(scores):
        if s > scores[best]:
            best = i
    return best


class RandomChoice(_Base):
    """A seeded uniform draw among the options (or candidate values), the same for a question and its control."""

    name = "random"

    def __init__(self, random_state: int = 0):
        self.random_state = random_state

    def predict(self, questions: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for q in questions:
            # Seeded by the pair id, so that a question and its paired control get the same draw.
            key = q.get("meta", {}).get("pair_id", q["id"])
            digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
            rng = np.random.default_rng([self.random_state, digest])
            if "query_keys" in q:
                out[q["id"]] = {k: int(rng.integers(len(q["input"]["candidate_values"][k]))) for k in q["query_keys"]}
            else:
                out[q["id"]] = int(rng.integers(len(q["options"])))
        return out


class Oracle(_Base):
    """Reads the answer: a relative score of 1 must be reachable."""

    name = "oracle"

    def predict(self, questions: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for q in questions:
            if "query_keys" in q:
                legal = q["meta"]["legal_combinations"]
                best = _argmax([c["relative_score"] for c in legal])
                out[q["id"]] = {k: int(legal[best]["combination"][k]) for k in q["query_keys"]}
            else:
                out[q["id"]] = int(q["answer"][0])
        return out


class Popularity(_Base):
    """The conditions that were best for the most other substrates."""

    name = "popularity"
    needs_other_substrates = True

    def fit(self, df, card):
        super().fit(df, card)
        idx = self.df_.groupby("substrate")["effective"].idxmax()
        self.best_rows_ = self.df_.loc[idx].set_index("substrate")
        return self

    def score_conditions(self, substrate, conds):
        others = [s for s in self.substrates_ if s != substrate]
        best = [tuple(self.best_rows_.loc[o, k] for k in self.keys_) for o in others]
        scores = []
        for c in conds:
            key = tuple(c.get(k) for k in self.keys_)
            wins = sum(b == key for b in best)
            rel = [r for r in (self._relative(o, c) for o in others) if r is not None]
            scores.append((wins, float(np.mean(rel)) if rel else -1.0))
        return scores


class NearestSubstrate(_Base):
    """The best conditions of the most similar other substrate (Tanimoto, Morgan fingerprints)."""

    name = "nearest-substrate"
    needs_other_substrates = True

    def fit(self, df, card):
        super().fit(df, card)
        smiles = [card["substrate_smiles"][s] for s in self.substrates_]
        fps = morgan_fingerprints(smiles)
        self.nearest_ = {}
        for i, s in enumerate(self.substrates_):
            sims = [(tanimoto(fps[i], fps[j]), -j) for j in range(len(self.substrates_)) if j != i]
            self.nearest_[s] = self.substrates_[-max(sims)[1]]
        return self

    def score_conditions(self, substrate, conds):
        near = self.nearest_[substrate]
        scores = []
        for c in conds:
            rel = self._relative(near, c)
            scores.append(-1.0 if rel is None else rel)
        return scores


class YieldModel(_Base):
    """HistGradientBoosting on one-hot conditions + substrate fingerprint, leave one substrate out."""

    name = "yield-model"
    needs_other_substrates = True

    def __init__(self, max_iter: int = 100, learning_rate: float = 0.1, fp_bits: int = 128, random_state: int = 0):
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.fp_bits = fp_bits
        self.random_state = random_state

    def fit(self, df, card):
        super().fit(df, card)
        self.levels_ = {k: sorted(self.df_[k].unique()) for k in self.keys_}
        fps = morgan_fingerprints([card["substrate_smiles"][s] for s in self.substrates_], self.fp_bits)
        self.fp_ = dict(zip(self.substrates_, fps))
        self.models_: dict[str, Any] = {}
        return self

    def _features(self, substrate: str, conds: list[dict[str, str]]) -> np.ndarray:
        blocks = []
        for k in self.keys_:
            lv = {v: i for i, v in enumerate(self.levels_[k])}
            onehot = np.zeros((len(conds), len(lv)), dtype=np.float32)
            for r, c in enumerate(conds):
                if c.get(k) in lv:
                    onehot[r, lv[c[k]]] = 1.0
            blocks.append(onehot)
        blocks.append(np.tile(self.fp_[substrate].astype(np.float32), (len(conds), 1)))
        return np.hstack(blocks)

    def _model_without(self, substrate: str):
        if substrate not in self.models_:
            from sklearn.ensemble import HistGradientBoostingRegressor

            train = self.df_[self.df_["substrate"] != substrate]
            X = np.vstack(
                [self._features(s, g[self.keys_].to_dict("records")) for s, g in train.groupby("substrate", sort=True)]
            )
            y = np.concatenate([g["relative"].to_numpy() for _, g in train.groupby("substrate", sort=True)])
            model = HistGradientBoostingRegressor(
                max_iter=self.max_iter,
                learning_rate=self.learning_rate,
                early_stopping=False,
                random_state=self.random_state,
            )
            # One OpenMP thread: the DAG runs one job per core, and oversubscribed OpenMP on a busy
            # machine is many times slower (results do not depend on the thread count).
            from threadpoolctl import threadpool_limits

            with threadpool_limits(limits=1, user_api="openmp"):
                self.models_[substrate] = model.fit(X, y)
        return self.models_[substrate]

    def score_conditions(self, substrate, conds):
        model = self._model_without(substrate)
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="openmp"):
            pred = model.predict(self._features(substrate, conds))
        return [float(p) for p in pred]


@dataclass(frozen=True, kw_only=True)
class BaselineSpec(Spec):
    """A reaction baseline: ``factory(**params)`` -> an unfitted model. One job fits it on a
    dataset's clean table and answers every question file of that dataset."""

    inputs: tuple[str, ...] = ("table", "questions")

    @property
    def needs_other_substrates(self) -> bool:
        return self.factory.needs_other_substrates

    def build(self, **params: Any) -> _Base:
        # set_params names an unknown parameter instead of a TypeError from the constructor
        return self.factory().set_params(**params)


BASELINES: Registry[BaselineSpec] = Registry(
    "reaction baseline",
    [
        BaselineSpec(name=cls.name, factory=cls, description=(cls.__doc__ or "").strip().split("\n")[0])
        for cls in (RandomChoice, Popularity, NearestSubstrate, YieldModel, Oracle)
    ],
)
NEEDS_OTHER_SUBSTRATES = tuple(n for n, spec in BASELINES.items() if spec.needs_other_substrates)


def make_model(name: str, params: dict[str, Any] | None = None) -> _Base:
    return BASELINES[name].build(**(params or {}))
