"""Score response texts against reference crystals the way OpenCompass MP-20 does.

Per item: parse (``crucible.crystal.parsing``), build the predicted ``Structure`` from the
parsed lattice, the *reference's* species in reference order and the predicted fractional
coordinates, then ``StructureMatcher(ltol=0.3, stol=0.5, angle_tol=10).get_rms_dist(pred, ref)``
(all else pymatgen's defaults: primitive cells, volumes scaled). A number means matched; its
first element is the RMS displacement normalised by (V/n)^(1/3).

The whole item runs in one persistent worker process and the parent waits at most
``timeout`` seconds (10, as OpenCompass): on timeout the worker is killed, a fresh one starts for
the next item, and the item counts as unmatched with reason ``timeout``. Parsing runs in the
worker too, so that an adversarial text cannot stall the parent either (OpenCompass parses in
the parent; for any text that parses within the limit the result is the same).

:class:`MatchRateMetric` accumulates results torchmetrics-style (``update``/``compute``).
"""

from __future__ import annotations

import logging
import math
import multiprocessing as mp
import os
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from crucible.crystal import parsing
from crucible.errors import DataValidationError

log = logging.getLogger(__name__)

MATCHER_PARAMS = {"ltol": 0.3, "stol": 0.5, "angle_tol": 10}
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ItemScore:
    id: str
    matched: bool
    rms_dist: float | None
    reason: str | None  # None when matched, else one of parsing.REASONS
    detail: str = ""


def reference_structure(ground_truth: dict[str, Any]):
    """pymatgen Structure of an OpenCompass ``ground_truth`` record (lattice rows, sites)."""
    from pymatgen.core import Lattice, Structure

    sites = ground_truth["sites"]
    return Structure(
        Lattice(ground_truth["lattice"]), [s["element"] for s in sites], [s["fractional_coordinates"] for s in sites]
    )


def predicted_structure(parsed: parsing.ParsedCrystal, ground_truth: dict[str, Any]):
    from pymatgen.core import Lattice, Structure

    species = [s["element"] for s in ground_truth["sites"]]
    return Structure(Lattice(parsing.lattice_matrix(*parsed.lattice_parameters)), species, parsed.coordinates)


def _matcher():
    from pymatgen.analysis.structure_matcher import StructureMatcher

    return StructureMatcher(**MATCHER_PARAMS)


def score_text(response: str | None, ground_truth: dict[str, Any]) -> tuple[float | None, str | None, str]:
    """(rms, reason, detail) for one item, in this process. Never raises."""
    try:
        parsed = parsing.parse_crystal_response(response)
        if isinstance(parsed, parsing.ParseFailure):
            return None, parsed.reason, parsed.detail
        n_ref = len(ground_truth["sites"])
        if len(parsed.coordinates) != n_ref:
            return None, parsing.WRONG_SITE_COUNT, f"{len(parsed.coordinates)} sites predicted, reference has {n_ref}"
        try:
            pred = predicted_structure(parsed, ground_truth)
            ref = reference_structure(ground_truth)
        except Exception as exc:  # noqa: BLE001 - any construction error means unmatched (as OpenCompass)
            return None, parsing.BAD_STRUCTURE, f"{type(exc).__name__}: {exc}"[:300]
        rms = _matcher().get_rms_dist(pred, ref)
        if rms is None:
            return None, parsing.NO_MATCH, "StructureMatcher found no match"
        value = float(rms[0])
        if not math.isfinite(value):
            return None, parsing.NO_MATCH, f"non-finite RMS {value}"
        return value, None, ""
    except Exception as exc:  # noqa: BLE001 - an exception inside the matcher counts as unmatched
        return None, parsing.BAD_STRUCTURE, f"{type(exc).__name__}: {exc}"[:300]


def _worker(conn) -> None:
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        conn.send(score_text(*job))


class MatcherWorker:
    """One persistent scoring process; replaced after a timeout or a crash."""

    def __init__(self, timeout: float = TIMEOUT_S):
        self.timeout = timeout
        self._proc = None
        self._conn = None
        self.restarts = 0

    def _start(self) -> None:
        ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_worker, args=(child,), daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join()
            self._conn.close()
        self._proc = self._conn = None

    def score(self, response: str | None, ground_truth: dict[str, Any]) -> tuple[float | None, str | None, str]:
        if self._proc is None or not self._proc.is_alive():
            if self._proc is not None:
                self._kill()
                self.restarts += 1
            self._start()
        try:
            self._conn.send((response, ground_truth))
            if self._conn.poll(self.timeout):
                return self._conn.recv()
            detail = f"no result within {self.timeout:g} s; worker replaced"
            reason = parsing.TIMEOUT
        except (EOFError, OSError, BrokenPipeError) as exc:
            detail, reason = f"worker died: {type(exc).__name__}", parsing.BAD_STRUCTURE
        self._kill()
        self.restarts += 1
        return None, reason, detail

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(5)
            except (OSError, BrokenPipeError):
                pass
        self._kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def item_responses(
    responses_path: str | os.PathLike, items: Iterable[dict[str, Any]], prompts_path: str | os.PathLike = "the prompts"
) -> dict[str, str | None]:
    """``{id: response text}`` of a response file (read through :mod:`crucible.llm.files`).

    An id that is not an item of the prompt set is refused naming the file and line, one given
    twice naming both lines; an item without a line is scored ``no_response``.
    """
    from crucible.llm.files import iter_responses, once_per_id

    known = {it["id"] for it in items}
    responses: dict[str, str | None] = {}
    for lineno, rec in once_per_id(iter_responses(responses_path), responses_path):
        if rec["id"] not in known:
            raise DataValidationError(
                f"{responses_path}: line {lineno}: id {rec['id']!r} is not an item of {prompts_path}"
            )
        responses[rec["id"]] = rec["response"]
    return responses


def score_items(
    responses: dict[str, str | None],
    items: Iterable[dict[str, Any]],
    timeout: float = TIMEOUT_S,
    progress: bool = False,
) -> list[ItemScore]:
    """Score every item (a prompts.jsonl record); an item without a response is ``no_response``."""
    from tqdm import tqdm

    items = list(items)
    out = []
    with MatcherWorker(timeout) as worker:
        for item in tqdm(items, desc="score", disable=not progress):
            rms, reason, detail = worker.score(responses.get(item["id"]), item["ground_truth"])
            out.append(ItemScore(item["id"], rms is not None, rms, reason, detail))
    return out


@dataclass
class MatchRateMetric:
    """OpenCompass's summary (match_rate %, mean_rms_dist, matched, total) plus failure counts."""

    rms: list[float] = field(default_factory=list)
    total: int = 0
    failures: dict[str, int] = field(default_factory=lambda: {r: 0 for r in parsing.REASONS})

    def update(self, scores: Iterable[ItemScore]) -> None:
        for s in scores:
            self.total += 1
            if s.matched:
                self.rms.append(float(s.rms_dist))
            else:
                self.failures[s.reason] = self.failures.get(s.reason, 0) + 1

    def compute(self) -> dict[str, Any]:
        matched = len(self.rms)
        return {
            "match_rate": round(100.0 * matched / self.total, 4) if self.total else 0.0,
            "mean_rms_dist": round(float(np.mean(self.rms)), 4) if matched else None,
            "matched": matched,
            "total": self.total,
            "failures": dict(self.failures),
        }
