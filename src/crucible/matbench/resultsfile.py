"""``results/matbench/{model}/results.json.gz`` in matbench's own format, plus ``info.json``.

The file is what ``MatbenchBenchmark.to_file`` writes (matbench 0.6 on PyPI, ``matbench/bench.py``):
one gzip-compressed line of ``json.dumps`` text (default separators) of::

    {"@module": "matbench.bench", "@class": "MatbenchBenchmark", "version": "0.6",
     "tasks": {task: {"@class": "MatbenchTask", "@module": "matbench.task",
                      "benchmark_name": "matbench_v0.1", "dataset_name": task,
                      "results": {"fold_k": {"data": {mbid: value}, "parameters": {...},
                                             "scores": {metric: float}, "uncertainty": null}}}},
     "user_metadata": {...}, "benchmark_name": "matbench_v0.1",
     "datestamp": "%Y.%m.%d %H:%M.%S" (UTC), "hash": sha256}

Everything below ``tasks`` and ``user_metadata`` is "immutified" as matbench does (dict keys
sorted, lists/arrays turned into tuples, numpy scalars into Python ones), so data keys are the
sorted mbids. ``hash`` is sha256 of ``json.dumps(immutify(d))`` over the dict without ``hash``,
datestamp included; matbench's loader recomputes it.

Decisions:

* Values: regression predictions are stored as Python floats. Classification predictions are
  stored as **bool labels** by default (what every leaderboard submission stores); floats in
  [0, 1] are accepted too when a caller passes them. Either way the stored ``scores`` are
  computed by :mod:`crucible.matbench.scoring` exactly as matbench's ``record()`` would compute
  them from the stored data, so the leaderboard number is reproducible from the file alone
  (given the truth). Matbench never recomputes scores on load: only the hash guards them.
* Scores come from the truth: each fold dict must carry ``"truth": {mbid: target}`` next to
  ``"data"``; the mbid sets must agree. Only the four matbench metrics of the task type are
  stored (``rocauc_proba`` lives in our scores JSON, not here: matbench rejects extra keys).
* ``user_metadata`` must say what the inputs were under the key ``"input"`` (e.g.
  ``"composition-only (formulas from the crabnet mirror)"``); ``crucible_version`` and
  ``crucible_model`` are added when absent.
* ``datestamp``: taken from the ``SOURCE_DATE_EPOCH`` environment variable (seconds since the
  epoch, the reproducible-builds convention) when set, else the current UTC time. With it set
  two runs give byte-identical files (the gzip header's mtime is fixed to 0, no file name).
* The file is written only after it has been built, serialised, re-parsed and validated by
  :func:`validate_results_dict`; the write itself is atomic (``crucible.core.io``), so a failure at
  any point leaves a previous file untouched.

matbench 0.6 as released on PyPI reads files with ``open(filename, "r")``: its ``from_file``
cannot read the ``.gz`` it is supposed to accept (the GitHub version gunzips by suffix). Use
``from_dict(json.loads(gzip.open(path).read()))``, or gunzip first, when checking with it.
"""

from __future__ import annotations

import datetime as _dt
import gzip
import hashlib
import json
import logging
import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from crucible import __version__ as CRUCIBLE_VERSION
from crucible.core.errors import ConfigError, DataValidationError, HashMismatchError
from crucible.core.io import write_bytes, write_json
from crucible.matbench.scoring import CLF_METRICS, REG_METRICS, score_fold
from crucible.matbench.tasks import (
    BENCHMARK_NAME,
    MATBENCH_VERSION,
    N_FOLDS,
    REGRESSION,
    TASKS,
    mbid_prefix,
    task_type_of,
)

log = logging.getLogger(__name__)

DATESTAMP_FMT = "%Y.%m.%d %H:%M.%S"
DEFAULT_BIBTEX = (
    "@article{Dunn2020, author={Dunn, Alexander and Wang, Qi and Ganose, Alex and Dopp, Daniel and "
    "Jain, Anubhav}, title={Benchmarking materials property prediction methods: the Matbench test set "
    "and Automatminer reference algorithm}, journal={npj Computational Materials}, volume={6}, "
    "pages={138}, year={2020}, doi={10.1038/s41524-020-00406-3}}"
)
TOP_KEYS: tuple[str, ...] = (
    "@module",
    "@class",
    "version",
    "tasks",
    "user_metadata",
    "benchmark_name",
    "datestamp",
    "hash",
)
TASK_KEYS = frozenset({"@module", "@class", "dataset_name", "results", "benchmark_name"})
FOLD_KEYS = frozenset({"scores", "data", "parameters", "uncertainty"})
FOLD_NAMES: tuple[str, ...] = tuple(f"fold_{k}" for k in range(N_FOLDS))
INFO_REQUIRED = ("authors", "algorithm", "algorithm_long", "bibtex_refs", "requirements")


# --- matbench's canonical form and hash ------------------------------------------------------


def immutify(d: Mapping[str, Any]) -> dict[str, Any]:
    """matbench's ``immutify_dictionary``: sort dict keys recursively, lists/arrays/Series to
    tuples (their elements are not recursed into), numpy scalars to Python scalars."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        if isinstance(value, (np.ndarray, pd.Series)):
            out[key] = tuple(value.tolist())
        elif isinstance(value, list):
            out[key] = tuple(value)
        elif isinstance(value, dict):
            out[key] = immutify(value)
        elif hasattr(value, "dtype"):
            out[key] = value.item()
        else:
            out[key] = value
    return dict(sorted(out.items(), key=lambda item: item[0]))


def hash_dictionary(d: Mapping[str, Any]) -> str:
    """sha256 hex of ``json.dumps(immutify(d))`` with json's default settings."""
    return hashlib.sha256(json.dumps(immutify(d)).encode("utf-8")).hexdigest()


def datestamp(now: _dt.datetime | None = None) -> str:
    """UTC datestamp in matbench's format; ``SOURCE_DATE_EPOCH`` wins when set."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is not None and epoch.strip() != "":
        try:
            seconds = int(epoch)
        except ValueError:
            raise ConfigError(f"SOURCE_DATE_EPOCH must be an integer number of seconds, got {epoch!r}") from None
        now = _dt.datetime.fromtimestamp(seconds, tz=_dt.timezone.utc)
    elif now is None:
        now = _dt.datetime.now(tz=_dt.timezone.utc)
    return now.strftime(DATESTAMP_FMT)


# --- building ---------------------------------------------------------------------------------


def _where(task: str, fold: int | str) -> str:
    return f"task {task}, fold {fold}"


def _regression_value(where: str, mbid: str, v: Any) -> float:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise DataValidationError(f"{where}: prediction for {mbid} must be a float, got {type(v).__name__} {v!r}")
    f = float(v)
    if not math.isfinite(f):
        raise DataValidationError(f"{where}: prediction for {mbid} is not finite ({f})")
    return f


def _classification_value(where: str, mbid: str, v: Any) -> bool | float:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (float, np.floating)) and 0.0 <= float(v) <= 1.0:
        return float(v)
    raise DataValidationError(
        f"{where}: prediction for {mbid} must be a bool label (or a probability in [0, 1]), got {v!r}"
    )


def _build_fold(task: str, k: int, fold: Mapping[str, Any], task_type: str) -> dict[str, Any]:
    where = _where(task, k)
    if not isinstance(fold, Mapping) or "data" not in fold:
        raise DataValidationError(f"{where}: a fold must be a dict with 'data' (and 'truth', 'parameters')")
    unknown = set(fold) - {"data", "truth", "parameters"}
    if unknown:
        raise DataValidationError(f"{where}: unknown fold key(s) {sorted(unknown)}")
    if "truth" not in fold:
        raise DataValidationError(f"{where}: 'truth' ({{mbid: target}}) is needed to compute the stored scores")
    data, truth = dict(fold["data"]), dict(fold["truth"])
    if not data:
        raise DataValidationError(f"{where}: no predictions")
    missing = sorted(set(truth) - set(data))
    extra = sorted(set(data) - set(truth))
    if missing or extra:
        raise DataValidationError(
            f"{where}: prediction ids differ from the fold's test ids: {len(missing)} missing "
            f"{missing[:5]}, {len(extra)} extra {extra[:5]}"
        )
    # Score in the truth's order (the official test order, as matbench's record() does: the
    # summation order decides the last bits); store sorted by mbid (matbench's immutify).
    ids = list(truth)
    if task_type == REGRESSION:
        values: list[Any] = [_regression_value(where, m, data[m]) for m in ids]
        y_pred: Any = np.asarray(values, dtype=np.float64)
        y_true: Any = np.asarray([float(truth[m]) for m in ids], dtype=np.float64)
    else:
        values = [_classification_value(where, m, data[m]) for m in ids]
        kinds = {type(v) for v in values}
        if len(kinds) > 1:
            raise DataValidationError(f"{where}: mixes bool labels and float probabilities")
        y_pred = np.asarray(values, dtype=bool if bool in kinds else np.float64)
        y_true = np.asarray([bool(truth[m]) for m in ids], dtype=bool)
    try:
        scores = score_fold(task_type, y_true, y_pred)
    except DataValidationError as exc:
        raise DataValidationError(f"{where}: {exc}") from None
    metrics = REG_METRICS if task_type == REGRESSION else CLF_METRICS
    params = fold.get("parameters") or {}
    if not isinstance(params, Mapping):
        raise DataValidationError(f"{where}: parameters must be a dict, got {type(params).__name__}")
    return {
        "data": dict(sorted(zip(ids, values))),
        "parameters": immutify(params) if params else {},
        "scores": {m: float(scores[m]) for m in sorted(metrics)},
        "uncertainty": None,
    }


def build_results_dict(
    model_name: str,
    tasks: Mapping[str, Sequence[Mapping[str, Any]]],
    user_metadata: Mapping[str, Any],
    stamp: str | None = None,
) -> dict[str, Any]:
    """The complete matbench dict, ``hash`` included (see the module docstring)."""
    if not tasks:
        raise DataValidationError("no tasks to write")
    if not isinstance(user_metadata, Mapping) or not user_metadata.get("input"):
        raise DataValidationError(
            "user_metadata must say what the inputs were under 'input' "
            "(e.g. 'composition-only (formulas from the crabnet mirror)' or 'structure')"
        )
    task_dicts: dict[str, Any] = {}
    for task in sorted(tasks):
        if task not in TASKS:
            raise DataValidationError(f"unknown Matbench task {task!r}")
        folds = list(tasks[task])
        if len(folds) != N_FOLDS:
            raise DataValidationError(f"task {task}: matbench needs all {N_FOLDS} folds, got {len(folds)}")
        task_type = task_type_of(task)
        results = {f"fold_{k}": _build_fold(task, k, fold, task_type) for k, fold in enumerate(folds)}
        task_dicts[task] = immutify(
            {
                "@module": "matbench.task",
                "@class": "MatbenchTask",
                "benchmark_name": BENCHMARK_NAME,
                "dataset_name": task,
                "results": results,
            }
        )
    meta = dict(user_metadata)
    meta.setdefault("crucible_version", CRUCIBLE_VERSION)
    meta.setdefault("crucible_model", model_name)
    d: dict[str, Any] = {
        "@module": "matbench.bench",
        "@class": "MatbenchBenchmark",
        "version": MATBENCH_VERSION,
        "tasks": task_dicts,
        "user_metadata": immutify(meta),
        "benchmark_name": BENCHMARK_NAME,
        "datestamp": stamp if stamp is not None else datestamp(),
    }
    try:
        d["hash"] = hash_dictionary(d)
    except (TypeError, ValueError) as exc:
        raise DataValidationError(f"parameters or user_metadata hold a value JSON cannot encode: {exc}") from None
    return d


def write_results_file(
    path: str | os.PathLike,
    model_name: str,
    tasks: Mapping[str, Sequence[Mapping[str, Any]]],
    user_metadata: Mapping[str, Any],
) -> str:
    """Build, check and atomically write the gzip results file; return its hash.

    ``tasks[task]`` is the list of the 5 fold dicts ``{"data": {mbid: prediction},
    "truth": {mbid: target}, "parameters": {...}}`` in fold order; ``truth`` in the fold's
    official test order (the scores are summed in that order, as matbench's ``record()`` does).
    """
    d = build_results_dict(model_name, tasks, user_metadata)
    text = json.dumps(d)
    # Re-parse what is about to be written: the reader's rules and the hash must hold on it.
    validate_results_dict(json.loads(text), source=str(path))
    write_bytes(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0), path)
    log.info("wrote %s (%d task(s), hash %s)", path, len(d["tasks"]), d["hash"])
    return d["hash"]


# --- reading and validation -------------------------------------------------------------------


def _is_float(x: Any) -> bool:
    return isinstance(x, float)


def validate_results_dict(
    d: Mapping[str, Any],
    source: str = "results file",
    expected_test_ids: Mapping[str, Sequence[Sequence[str]]] | None = None,
) -> None:
    """matbench's ``from_dict`` + ``validate`` rules (matbench 0.6, ``MatbenchBenchmark.from_dict`` and ``validate``), not mutating ``d``.

    Adds our own: fold test sets disjoint, mbids carry the task's prefix, and (when
    ``expected_test_ids[task]`` is given) each fold's ids equal the official test ids.
    """
    keys = set(d)
    missing, extra = sorted(set(TOP_KEYS) - keys), sorted(keys - set(TOP_KEYS))
    if missing or extra:
        raise DataValidationError(f"{source}: top-level keys wrong: missing {missing}, extra {extra}")
    bench = d["benchmark_name"]
    if bench != BENCHMARK_NAME:
        raise DataValidationError(f"{source}: benchmark_name {bench!r} is not {BENCHMARK_NAME!r}")
    if not isinstance(d["tasks"], Mapping) or not d["tasks"]:
        raise DataValidationError(f"{source}: 'tasks' must be a non-empty dict")
    for task, td in d["tasks"].items():
        if not isinstance(td, Mapping) or td.get("benchmark_name") != bench:
            raise DataValidationError(f"{source}: task {task}: benchmark_name does not match {bench!r}")
    body = {k: v for k, v in d.items() if k != "hash"}
    computed = hash_dictionary(body)
    if computed != d["hash"]:
        raise HashMismatchError(
            f"{source}: hash {d['hash']} does not match the content ({computed}); was it modified after writing?"
        )
    if d["version"] != MATBENCH_VERSION:
        log.warning("%s: written by matbench %s, this reader follows %s", source, d["version"], MATBENCH_VERSION)
    for task, td in d["tasks"].items():
        if td.get("dataset_name") != task:
            raise DataValidationError(f"{source}: task key {task!r} != its dataset_name {td.get('dataset_name')!r}")
        if task not in TASKS:
            raise DataValidationError(f"{source}: unknown Matbench task {task!r}")
        tkeys = set(td)
        if tkeys != TASK_KEYS:
            raise DataValidationError(
                f"{source}: task {task}: keys must be {sorted(TASK_KEYS)}; missing "
                f"{sorted(TASK_KEYS - tkeys)}, extra {sorted(tkeys - TASK_KEYS)}"
            )
        _validate_task(source, task, td["results"], expected_test_ids.get(task) if expected_test_ids else None)


def _validate_task(source: str, task: str, results: Any, expected: Sequence[Sequence[str]] | None) -> None:
    if not isinstance(results, Mapping):
        raise DataValidationError(f"{source}: task {task}: 'results' must be a dict")
    extra_folds = sorted(set(results) - set(FOLD_NAMES))
    if extra_folds:
        raise DataValidationError(f"{source}: task {task}: extra fold keys {extra_folds}")
    unrecorded = [f for f in FOLD_NAMES if not (isinstance(results.get(f), Mapping) and results[f].get("data"))]
    if unrecorded:
        raise DataValidationError(f"{source}: task {task}: fold(s) {unrecorded} not recorded (matbench needs all 5)")
    task_type = task_type_of(task)
    metrics = REG_METRICS if task_type == REGRESSION else CLF_METRICS
    prefix = mbid_prefix(task) + "-"
    seen: dict[str, str] = {}
    for k, fname in enumerate(FOLD_NAMES):
        fold = results[fname]
        where = f"{source}: task {task}, {fname}"
        fkeys = set(fold)
        if fkeys - FOLD_KEYS:
            raise DataValidationError(f"{where}: extra key(s) {sorted(fkeys - FOLD_KEYS)}")
        for req in ("scores", "data", "parameters"):
            if req not in fold:
                raise DataValidationError(f"{where}: required key {req!r} missing")
        scores = fold["scores"]
        if not isinstance(scores, Mapping) or set(scores) != set(metrics):
            got = sorted(scores) if isinstance(scores, Mapping) else scores
            raise DataValidationError(f"{where}: scores must hold exactly {sorted(metrics)}, got {got}")
        not_float = [m for m in metrics if not _is_float(scores[m])]
        if not_float:
            raise DataValidationError(f"{where}: score(s) {not_float} are not floats")
        data = fold["data"]
        if not isinstance(data, Mapping):
            raise DataValidationError(f"{where}: 'data' must be a dict of mbid -> prediction")
        for mbid, v in data.items():
            if task_type == REGRESSION:
                ok = _is_float(v)
            else:
                ok = isinstance(v, bool) or (_is_float(v) and 0.0 <= v <= 1.0)
            if not ok:
                want = "a float" if task_type == REGRESSION else "a bool or a float in [0, 1]"
                raise DataValidationError(f"{where}: data[{mbid!r}] = {v!r} is not {want}")
        bad_prefix = [m for m in data if not m.startswith(prefix)]
        if bad_prefix:
            raise DataValidationError(
                f"{where}: {len(bad_prefix)} mbid(s) lack the prefix {prefix!r}: {bad_prefix[:5]}"
            )
        again = [m for m in data if m in seen]
        if again:
            raise DataValidationError(f"{where}: {len(again)} mbid(s) already in {seen[again[0]]}: {again[:5]}")
        seen.update(dict.fromkeys(data, fname))
        if expected is not None:
            want_ids = set(expected[k])
            miss, extra = sorted(want_ids - set(data)), sorted(set(data) - want_ids)
            if miss or extra:
                raise DataValidationError(
                    f"{where}: ids differ from the official test set: {len(miss)} missing {miss[:5]}, "
                    f"{len(extra)} extra {extra[:5]}"
                )
        unc = fold.get("uncertainty")
        if unc is not None and not isinstance(unc, Mapping):
            raise DataValidationError(f"{where}: 'uncertainty' must be null or a dict")


def read_results_file(
    path: str | os.PathLike, expected_test_ids: Mapping[str, Sequence[Sequence[str]]] | None = None
) -> dict[str, Any]:
    """Load a matbench results file (gzip detected by its magic bytes) and validate it.

    Raises :class:`HashMismatchError` when the stored hash does not match the content and
    :class:`DataValidationError` for any other rule of matbench 0.6's ``validate``.
    """
    if not Path(path).is_file():
        raise DataValidationError(f"{path}: results file not found")
    from crucible.core.strict_json import read_json

    d = read_json(path)  # gunzipped by its magic bytes, bounded, strict (a key given twice is refused)
    if not isinstance(d, dict):
        raise DataValidationError(f"{path}: top level must be a JSON object")
    validate_results_dict(d, source=str(path), expected_test_ids=expected_test_ids)
    return d


# --- provenance and info.json ----------------------------------------------------------------


def user_metadata(model: str, input_text: str, store_probabilities: bool = False) -> dict[str, Any]:
    """The results file's ``user_metadata``: what the model was given, and by which crucible."""
    return {
        "input": input_text,
        "crucible_version": CRUCIBLE_VERSION,
        "crucible_model": model,
        "classification_values": "probabilities" if store_probabilities else "labels (bool)",
    }


def requirements() -> dict[str, list[str]]:
    """info.json ``requirements``: crucible, the matbench release followed, and the installed
    versions of the libraries that compute the numbers."""
    import importlib.metadata

    pins = [f"crucible=={CRUCIBLE_VERSION}", f"matbench=={MATBENCH_VERSION}"]
    for dist in ("scikit-learn", "numpy", "pandas", "pyarrow"):
        try:
            pins.append(f"{dist}=={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return {"python": pins}


def write_info_json(
    path: str | os.PathLike,
    algorithm: str,
    algorithm_long: str,
    authors: str,
    bibtex_refs: str | list[str],
    notes: str | None,
    requirements: Mapping[str, Any] | str,
) -> None:
    """Write the leaderboard's ``info.json`` (the matbench repository's leaderboard submission guide) atomically.

    ``authors``, ``algorithm``, ``algorithm_long``, ``bibtex_refs`` and ``requirements`` must be
    non-empty (the leaderboard CI refuses nulls); ``notes`` is always written, None allowed.
    """
    info = {
        "authors": authors,
        "algorithm": algorithm,
        "algorithm_long": algorithm_long,
        "bibtex_refs": bibtex_refs,
        "notes": notes,
        "requirements": requirements,
    }
    empty = [k for k in INFO_REQUIRED if info[k] is None or (hasattr(info[k], "__len__") and len(info[k]) == 0)]
    if empty:
        raise DataValidationError(f"{path}: info.json field(s) {empty} must not be empty")
    if not 5 <= len(algorithm) <= 15:
        log.warning(
            "%s: matbench asks for an algorithm name of 5-15 characters, %r has %d", path, algorithm, len(algorithm)
        )
    if "matbench" not in json.dumps(requirements):
        log.warning("%s: matbench asks for the matbench version in 'requirements'", path)
    write_json(info, path)
