"""Score response texts against reference crystals the way OpenCompass MP-20 does.

Per item: parse (``crucible.crystal.parsing``), build the predicted ``Structure`` from the
parsed lattice, the *reference's* species in reference order and the predicted fractional
coordinates, then ``StructureMatcher(ltol=0.3, stol=0.5, angle_tol=10).get_rms_dist(pred, ref)``
(all else pymatgen's defaults: primitive cells, volumes scaled). A number means matched; its
first element is the RMS displacement normalised by (V/n)^(1/3).

Two matcher conventions are in use in the field (:data:`CONVENTIONS`): ``cdvae`` (ltol 0.3,
stol 0.5, angle_tol 10: CDVAE's and DiffCSP's ``compute_metrics.py``, OpenCompass' MP-20; the
default, so that the headline number stays OpenCompass-compatible) and ``pymatgen-default``
(0.2, 0.3, 5: ``StructureMatcher()``'s own defaults). Numbers under the two are not comparable;
every score is computed under both, each call with its own time limit, so that adding the second
never changes the first.

A sample is either an answer text (parsed as above) or a structure (a CIF text or a pymatgen
dict, e.g. from a generative model's samples file): a structure keeps its own species, and a
composition other than the reference's is simply no match.

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
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable

from crucible.core.errors import ConfigError
from crucible.crystal import parsing

log = logging.getLogger(__name__)

CONVENTIONS: dict[str, dict[str, float]] = {
    "cdvae": {"ltol": 0.3, "stol": 0.5, "angle_tol": 10},
    "pymatgen-default": {"ltol": 0.2, "stol": 0.3, "angle_tol": 5},
}
DEFAULT_CONVENTION = "cdvae"
CONVENTION_NAMES = tuple(CONVENTIONS)
MATCHER_PARAMS = CONVENTIONS[DEFAULT_CONVENTION]
TIMEOUT_S = 10.0
# The audit's matcher calls per formula group and pass (crucible.crystal.audit): past it, unchecked
DEFAULT_MAX_COMPARISONS = 2000

# What a sample is: answer text (parsed as OpenCompass does), CIF text, or a pymatgen Structure dict.
TEXT, CIF, STRUCTURE = "text", "cif", "structure"
SAMPLE_KINDS = (TEXT, CIF, STRUCTURE)


def convention_params(name: str) -> dict[str, float]:
    if name not in CONVENTIONS:
        raise ConfigError(f"unknown matcher convention {name!r}; known: {', '.join(CONVENTIONS)}")
    return CONVENTIONS[name]


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


def _matcher(params: dict[str, float] | None = None):
    from pymatgen.analysis.structure_matcher import StructureMatcher

    return StructureMatcher(**(params or MATCHER_PARAMS))


def _rms(pred, ref, params: dict[str, float] | None) -> tuple[float | None, str | None, str]:
    rms = _matcher(params).get_rms_dist(pred, ref)
    if rms is None:
        return None, parsing.NO_MATCH, "StructureMatcher found no match"
    value = float(rms[0])
    if not math.isfinite(value):
        return None, parsing.NO_MATCH, f"non-finite RMS {value}"
    return value, None, ""


class SampleProblem(ValueError):
    """A structure sample that is no single crystal, with its reason of :data:`parsing.REASONS`."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


def _failure(exc: Exception) -> tuple[None, str, str]:
    if isinstance(exc, SampleProblem):
        return None, exc.reason, str(exc)[:300]
    return None, parsing.BAD_STRUCTURE, f"{type(exc).__name__}: {exc}"[:300]


_CIF_CELL = (
    "_cell_length_a",
    "_cell_length_b",
    "_cell_length_c",
    "_cell_angle_alpha",
    "_cell_angle_beta",
    "_cell_angle_gamma",
)


def _cif_cell_as_written(text: str) -> tuple[float, ...] | None:
    """The six cell numbers of a one-block CIF as its text gives them (pymatgen's lattice keeps
    no sign of a negative length), or None where one is missing or no number."""
    from pymatgen.io.cif import CifFile, str2float

    blocks = list(CifFile.from_str(text).data.values())
    if len(blocks) != 1:
        return None
    try:
        return tuple(str2float(blocks[0].data[key]) for key in _CIF_CELL)
    except (KeyError, ValueError, TypeError):
        return None


def _check_cell(lattice, written: tuple[float, ...] | None = None) -> None:
    problem = parsing.cell_problem(*(written or ())) if written else None
    problem = problem or parsing.cell_problem(*lattice.parameters)
    if problem is None and abs(float(lattice.volume)) < parsing.MIN_VOLUME:
        problem = f"degenerate cell: volume {float(lattice.volume):.3g} Å^3"
    if problem is not None:
        raise SampleProblem(parsing.BAD_CELL, problem)


def score_text(
    response: str | None, ground_truth: dict[str, Any], params: dict[str, float] | None = None
) -> tuple[float | None, str | None, str]:
    """(rms, reason, detail) for one item, in this process, under ``params`` (default: the
    ``cdvae`` convention). Never raises."""
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
            return _failure(exc)
        return _rms(pred, ref, params)
    except Exception as exc:  # noqa: BLE001 - an exception inside the matcher counts as unmatched
        return _failure(exc)


def sample_structure(kind: str, payload: Any):
    """The pymatgen Structure of a structure sample (CIF text or Structure dict); raises on a bad one."""
    import warnings

    from pymatgen.core import Structure

    written = None
    if kind == CIF:
        if not isinstance(payload, str) or not payload.strip():
            raise ValueError("empty CIF")
        n_blocks = parsing.cif_blocks(payload)
        if n_blocks > 1:
            raise SampleProblem(parsing.SEVERAL_BLOCKS, f"{n_blocks} data_ blocks in one answer; give one crystal")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            written = _cif_cell_as_written(payload)
            structure = Structure.from_str(payload, fmt="cif")
    else:
        structure = Structure.from_dict(payload)
    _check_cell(structure.lattice, written)
    if not structure.is_ordered:
        raise ValueError("disordered sites (partial occupancy)")
    if len(structure) == 0:
        raise ValueError("no sites")
    return structure


def sample_as_structure(kind: str, payload: Any, ground_truth: dict[str, Any]):
    """The Structure the matcher gets for a sample of the item ``ground_truth``: an answer text
    parsed and given that reference's species (its site count must be the reference's), a
    structure sample as it is. Raises ValueError where there is none."""
    if kind != TEXT:
        return sample_structure(kind, payload)
    parsed = parsing.parse_crystal_response(payload)
    if isinstance(parsed, parsing.ParseFailure):
        raise ValueError(f"{parsed.reason}: {parsed.detail}")
    if len(parsed.coordinates) != len(ground_truth["sites"]):
        raise ValueError(f"{parsing.WRONG_SITE_COUNT}: {len(parsed.coordinates)} sites")
    return predicted_structure(parsed, ground_truth)


def score_structure(
    kind: str, payload: Any, ground_truth: dict[str, Any], params: dict[str, float] | None = None
) -> tuple[float | None, str | None, str]:
    """(rms, reason, detail) of a structure sample against the reference. Never raises."""
    if payload is None:
        return None, parsing.NO_RESPONSE, ""
    try:
        try:
            pred = sample_structure(kind, payload)
            ref = reference_structure(ground_truth)
        except Exception as exc:  # noqa: BLE001 - an unreadable sample is unmatched, with the reason
            return _failure(exc)
        if pred.composition.reduced_formula != ref.composition.reduced_formula:
            detail = f"composition {pred.composition.reduced_formula}, reference {ref.composition.reduced_formula}"
            return None, parsing.NO_MATCH, detail
        return _rms(pred, ref, params)
    except Exception as exc:  # noqa: BLE001 - an exception inside the matcher counts as unmatched
        return _failure(exc)


def score_sample(
    kind: str, payload: Any, ground_truth: dict[str, Any], convention: str = DEFAULT_CONVENTION
) -> tuple[float | None, str | None, str]:
    """(rms, reason, detail) of one sample of any kind under one convention, in this process."""
    params = convention_params(convention)
    if kind == TEXT:
        return score_text(payload, ground_truth, params)
    return score_structure(kind, payload, ground_truth, params)


SPACEGROUP_SYMPREC = 0.1  # spglib tolerance (Å) of the space-group agreement column


def space_groups(
    kind: str, payload: Any, ground_truth: dict[str, Any], symprec: float = SPACEGROUP_SYMPREC
) -> tuple[int | None, int | None]:
    """(sample's, reference's) international space-group numbers (pymatgen's
    ``SpacegroupAnalyzer``, ``symprec``), the sample built as the matcher gets it (an answer text
    with the reference's species). None where a structure cannot be built or analysed. The
    matcher can match crystals of different space groups (pymatgen issue #3796), so agreement is
    reported beside a match, not folded into it. Never raises."""
    from crucible.crystal.items import spacegroup_analyzer

    def number(structure) -> int | None:
        try:
            return int(spacegroup_analyzer(structure, symprec=symprec).get_space_group_number())
        except Exception:  # noqa: BLE001 - spglib refuses some cells: no space group, not a crash
            return None

    try:
        ref = reference_structure(ground_truth)
        if kind == TEXT:
            parsed = parsing.parse_crystal_response(payload)
            if isinstance(parsed, parsing.ParseFailure):
                return None, number(ref)
            pred = predicted_structure(parsed, ground_truth)
        else:
            pred = sample_structure(kind, payload)
    except Exception:  # noqa: BLE001 - a sample that cannot be built has no space group
        return None, None
    return number(pred), number(ref)


SPACE_GROUPS = "space_groups"  # a worker job: space_groups(...) instead of score_sample(...)


def primitive_sites(structure) -> int:
    """Sites of the cell the matcher reduces to (its own niggli + primitive reduction); -1 where
    the reduction fails (then the matcher fails on that structure too: no match)."""
    from pymatgen.analysis.structure_matcher import StructureMatcher

    try:
        return len(StructureMatcher._get_reduced_structure(structure, True, True))
    except Exception:  # noqa: BLE001 - an unreducible cell matches nothing
        return -1


def _call_each(function, arg_list: list[tuple], limit: float) -> list[tuple[Any, bool]]:
    """In the worker: ``function(*args)`` for each of ``arg_list``, each with whether it took
    longer than ``limit`` seconds (then it counts as timed out, as if called alone)."""
    import time

    out = []
    for args in arg_list:
        start = time.monotonic()
        result = function(*args)
        out.append((result, time.monotonic() - start > limit))
    return out


def _worker(conn) -> None:
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        if callable(job[0]):  # MatcherWorker.call: any module-level function (pickled by name)
            conn.send(job[0](*job[1:]))
        elif job[0] == SPACE_GROUPS:
            conn.send(space_groups(*job[1:]))
        else:
            conn.send(score_sample(*job))


_FORK_LOCK = threading.Lock()


class MatcherWorker:
    """One persistent scoring process; replaced after a timeout or a crash."""

    def __init__(self, timeout: float = TIMEOUT_S):
        if not 0 < timeout < float("inf"):  # --timeout -1 timed every answer out: a match rate of 0, no error
            raise ConfigError(
                f"the matcher's time limit (--timeout) must be a positive number of seconds, got {timeout}"
            )
        self.timeout = timeout
        self._proc = None
        self._conn = None
        self.restarts = 0

    def _start(self) -> None:
        ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
        # one fork at a time: a worker forked while another's start is under way (the pool's
        # threads) keeps that one's pipe ends open, and its close() then waited 5 s on its exit
        with _FORK_LOCK:
            parent, child = ctx.Pipe()
            self._proc = ctx.Process(target=_worker, args=(child,), daemon=True)
            self._proc.start()
            child.close()
        self._conn = parent

    def _live_worker(self) -> None:
        """Start the worker, or a new one where the last has died (counted as a restart)."""
        if self._proc is None or not self._proc.is_alive():
            if self._proc is not None:
                self._kill()
                self.restarts += 1
            self._start()

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join()
            self._conn.close()
        self._proc = self._conn = None

    def score(
        self, response: str | None, ground_truth: dict[str, Any], convention: str = DEFAULT_CONVENTION
    ) -> tuple[float | None, str | None, str]:
        """An answer text, as OpenCompass scores it (under ``convention``)."""
        return self.score_sample(TEXT, response, ground_truth, convention)

    def _ask(self, job: tuple) -> tuple[bool, Any, str, str]:
        """(answered, result, failure reason, detail) of one job, within the time limit; past it
        (or when the worker dies) the worker is replaced and the job counts as failed."""
        self._live_worker()
        try:
            self._conn.send(job)
            if self._conn.poll(self.timeout):
                return True, self._conn.recv(), "", ""
            detail = f"no result within {self.timeout:g} s; worker replaced"
            reason = parsing.TIMEOUT
        except (EOFError, OSError, BrokenPipeError) as exc:
            detail, reason = f"worker died: {type(exc).__name__}", parsing.BAD_STRUCTURE
        self._kill()
        self.restarts += 1
        return False, None, reason, detail

    def score_sample(
        self, kind: str, payload: Any, ground_truth: dict[str, Any], convention: str = DEFAULT_CONVENTION
    ) -> tuple[float | None, str | None, str]:
        if kind != TEXT and payload is None:  # (a missing text goes through the parser, as before)
            return None, parsing.NO_RESPONSE, ""
        answered, result, reason, detail = self._ask((kind, payload, ground_truth, convention))
        return result if answered else (None, reason, detail)

    def space_groups(self, kind: str, payload: Any, ground_truth: dict[str, Any]) -> tuple[int | None, int | None]:
        """:func:`space_groups` in the worker, with the same time limit (past it: none)."""
        if payload is None:
            return None, None
        answered, result, _, _ = self._ask((SPACE_GROUPS, kind, payload, ground_truth))
        return result if answered else (None, None)

    def call(self, function, *args, failed: Any = None) -> tuple[Any, str | None]:
        """(``function(*args)`` run in the worker, None), or (``failed``, the reason: timeout or a
        dead worker). ``function`` is a module-level function (sent by name)."""
        answered, result, reason, _ = self._ask((function, *args))
        return (result, None) if answered else (failed, reason)

    def call_each(self, function, arg_list: list[tuple], failed: Any = None) -> list[tuple[Any, str | None]]:
        """:meth:`call` for each of ``arg_list``, in one round trip: each call past the time limit
        counts as timed out, as alone; where the whole batch runs past its summed limit (a call
        that hangs) every call is made again alone, so the results are those of single calls."""
        limit = self.timeout
        self.timeout = limit * len(arg_list)
        try:
            answered, result, _, _ = self._ask((_call_each, function, arg_list, limit))
        finally:
            self.timeout = limit
        if not answered:
            return [self.call(function, *args, failed=failed) for args in arg_list]
        return [(failed, parsing.TIMEOUT) if late else (value, None) for value, late in result]

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


def score_items(
    responses: dict[str, str | None],
    items: Iterable[dict[str, Any]],
    timeout: float = TIMEOUT_S,
    progress: bool = False,
) -> list[ItemScore]:
    """Score every item (a prompts.jsonl record) under the default convention; an item without a
    response is ``no_response``."""
    return score_items_by_convention(responses, items, (DEFAULT_CONVENTION,), timeout, progress)[DEFAULT_CONVENTION]


def score_items_by_convention(
    responses: dict[str, str | None],
    items: Iterable[dict[str, Any]],
    conventions: Iterable[str] = CONVENTION_NAMES,
    timeout: float = TIMEOUT_S,
    progress: bool = False,
) -> dict[str, list[ItemScore]]:
    """``{convention: [ItemScore per item]}``: each (item, convention) is one matcher call with its
    own time limit."""
    from tqdm import tqdm

    items, conventions = list(items), list(conventions)
    for name in conventions:
        convention_params(name)
    out: dict[str, list[ItemScore]] = {name: [] for name in conventions}
    with MatcherWorker(timeout) as worker:
        for item in tqdm(items, desc="score", disable=not progress):
            for name in conventions:
                rms, reason, detail = worker.score(responses.get(item["id"]), item["ground_truth"], name)
                out[name].append(ItemScore(item["id"], rms is not None, rms, reason, detail))
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
        import numpy as np  # here: the crystal commands import this module for its names

        matched = len(self.rms)
        return {
            "match_rate": round(100.0 * matched / self.total, 4) if self.total else 0.0,
            "mean_rms_dist": round(float(np.mean(self.rms)), 4) if matched else None,
            "matched": matched,
            "total": self.total,
            "failures": dict(self.failures),
        }
