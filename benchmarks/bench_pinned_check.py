"""Wall time of the read-time pin check (crucible.sources.pinned_files.pinned) over every pinned
Matbench file, the check every job that reads one pays (the largest is 5 MB). Was a test's bound
("well under a second", tests/test_sources_pinned.py) until issue 52: a timing belongs here, where a
loaded machine makes it a number to read, not a failure.

    python benchmarks/bench_pinned_check.py              # the test cache's files (fetched once from PyPI)
    python benchmarks/bench_pinned_check.py --repeats 5

Goal: the whole set in well under a second on an idle core.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="the least of this many passes is reported")
    args = parser.parse_args()
    from crucible.sources import pinned_files

    from helpers import matbench_members

    members = matbench_members()
    best = float("inf")
    for _ in range(args.repeats):
        start = time.perf_counter()
        for role, path in members.items():
            pinned_files.pinned(role, path)
        best = min(best, time.perf_counter() - start)
    size = sum(Path(p).stat().st_size for p in members.values())
    print(f"{len(members)} pinned files, {size / 2**20:.1f} MB: {best:.3f} s per pass (least of {args.repeats})")


if __name__ == "__main__":
    main()
