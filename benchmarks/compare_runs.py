"""Compare the results of two runs of the workflow byte for byte (issue 20's comparison).

    python benchmarks/compare_runs.py BEFORE/results AFTER/results

Every file under both folders is compared byte for byte. Where bytes differ, a JSON file is
compared again without the fields that record the run rather than the result (timings), and
matbench's ``results.json.gz`` without its datestamp and the hash over it. Left out and counted
by why: identity records (``.identity/``: they hash inputs whose sidecars carry timings and they
name the code digest) and the workbook (its zip stamps the time). Exit status 1 when a compared file differs or exists on one side only.
"""

from __future__ import annotations

import argparse
import filecmp
import gzip
import json
import sys
from collections import Counter
from pathlib import Path

# Fields of JSON sidecars that describe the run, not the result: left out before comparing.
RUN_FIELDS = {
    "elapsed_s",
    "fit_seconds",
    "predict_seconds",
    "seconds",
    "wall_s",
    "timings",
    "created",
    "host",
    # crystal generators' sidecars: how long setting up and generating took
    "setup_s",
    "generate_s",
    "seconds_per_item",
}
# matbench's results.json.gz carries the time it was written, and its hash covers that time
# (README: SOURCE_DATE_EPOCH makes the file byte-identical)
GZIP_RUN_FIELDS = {"datestamp", "hash"}
SKIPPED_PARTS = {".identity": "identity records (hash inputs whose sidecars carry timings)"}
SKIPPED_SUFFIXES = {".xlsx": "the workbook: its zip container stamps the time"}


def _files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file()}


def _skip_reason(name: str) -> str | None:
    parts = name.split("/")
    for part, why in SKIPPED_PARTS.items():
        if part in parts:
            return why
    for suffix, why in SKIPPED_SUFFIXES.items():
        if name.endswith(suffix):
            return why
    return None


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in RUN_FIELDS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def same(a: Path, b: Path) -> tuple[bool, str]:
    """Whether two files hold the same result: bytes, or for a JSON file the same document once
    the run's own fields (timings) are left out."""
    if filecmp.cmp(a, b, shallow=False):
        return True, "bytes"
    if a.suffix == ".json":
        try:
            da, db = json.loads(a.read_text()), json.loads(b.read_text())
        except ValueError:
            return False, "bytes"
        if _strip(da) == _strip(db):
            return True, "json without run fields"
    if a.name.endswith(".json.gz"):
        try:
            da, db = (json.loads(gzip.decompress(p.read_bytes())) for p in (a, b))
        except (OSError, ValueError):
            return False, "bytes"
        if isinstance(da, dict) and isinstance(db, dict):
            drop = GZIP_RUN_FIELDS
            if {k: v for k, v in da.items() if k not in drop} == {k: v for k, v in db.items() if k not in drop}:
                return True, "json.gz without datestamp and its hash"
    return False, "bytes"


def compare(before: Path, after: Path) -> dict:
    a, b = _files(before), _files(after)
    skipped: Counter = Counter()
    how: Counter = Counter()
    differ, only_before, only_after = [], [], []
    for name in sorted(set(a) | set(b)):
        why = _skip_reason(name)
        if why:
            skipped[why] += 1
            continue
        if name not in b:
            only_before.append(name)
        elif name not in a:
            only_after.append(name)
        else:
            ok, kind = same(a[name], b[name])
            if ok:
                how[kind] += 1
            else:
                differ.append(name)
    return {
        "identical": dict(how),
        "differ": differ,
        "only_before": only_before,
        "only_after": only_after,
        "skipped": dict(skipped),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    result = compare(args.before, args.after)
    print(json.dumps(result, indent=1))
    return 1 if result["differ"] or result["only_before"] or result["only_after"] else 0


if __name__ == "__main__":
    sys.exit(main())
