"""The leakage audit's test-in-train check against the naive all-pairs loop, on real crystals.

    .venv/bin/python benchmarks/bench_crystal_audit.py [--csv PEROV_5_TEST_CSV] [--naive-items 40] [--workers 2]
        [--out result.json]

Data: the perov-5 test CSV of the CDVAE sets (3,785 crystals; default
``../shared/data/cdvae/perov_5_test.csv``), split as the benchmark splits a set without its own
split (``crucible.crystal.data.split_ids``, test fraction 0.5, seed 0).

The peer (``naive``): what one writes without the audit: for each test crystal, pymatgen's
``StructureMatcher(ltol=0.3, stol=0.5, angle_tol=10).get_rms_dist`` against every train crystal
in id order, stopping at its first match. It is run on a seeded subsample of ``--naive-items``
test crystals (the whole loop is millions of calls) and its calls and wall time per test crystal
are scaled to the whole test split.

crucible (``audit``): :func:`crucible.crystal.audit.audit_splits`, whose pre-filters cannot change
a verdict (a match needs the same reduced formula and, with ``attempt_supercell`` off, the same
primitive site count), with ``--workers`` matcher processes. Its verdicts must equal the naive
loop's on every test crystal of the subsample.

Printed: matcher calls and CPU time (wall time is not comparable on a loaded machine) of each, the ratios, whether the verdicts agree, and an
extrapolation to MP-20 (about 27k train, 9k test) on a 64-core node: naive calls are
n_test x n_train (nearly every test crystal matches nothing); the audit's are the sum over formula
groups of n_test x n_train, unknown without the data, so the line gives it under the stated
assumption that MP-20's groups are as small per crystal as perov-5's (they are larger for common
formulas; the audit's cap bounds them).

Printed first: the primitive reductions alone (every crystal that shares its formula), in this
process one after another (how the audit made them before issue 34) and on the matcher processes
(how it makes them now, :func:`crucible.crystal.audit.primitive_counts`), which must agree.

Measured at commit 7118465 on a shared 2-core machine (load average 2-3), ``--naive-items 12
--workers 2``, 1,893 train and 1,892 test crystals:

    primitive reductions: 752 crystals; in this process 1.0 s wall (1.0 CPU s), on 2 matcher
        processes 1.3 s wall (1.3 CPU s); identical
    audit: 466 matcher calls, 13.9 CPU s (13.4 s wall), 13 test crystals in train
    naive: 22,716 calls, 58.1 CPU s on 12 test crystals -> about 3,581,556 calls, 2.5 CPU h for all
    ratio naive/audit: 7,686x calls, 661x CPU time; verdicts identical on the 12 sampled and 12 in-train
    MP-20 on 64 cores, 2.6 ms per call: naive about 2.7 h; the audit's matcher work seconds under the
    perov-5 group-size assumption (0.12 calls per crystal), plus at most 1 s of primitive reductions
    (1.3 CPU ms each, 36k crystals at most, spread over the processes; 47 CPU s serially in the parent)

Main before issue 34's pool for the reductions (b2de25a), the same command just after: 466 calls,
10.5 CPU s (11.3 s wall), 13 in train. Repeated audits of both scatter by about 30 % here (main
9.5-13.4 CPU s, this 10.7-14.0), so on two loaded cores the pool neither wins nor loses measurably:
the reductions are 1 s of the audit's 11-14 s. The pool pays on many cores and bigger sets.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def cpu_s() -> float:
    """CPU seconds of this process and its finished children (the audit's matcher workers)."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def naive_first_match(test, train, matcher):
    """(verdicts {test id: in train}, matcher calls, CPU seconds) of the all-pairs loop."""
    verdicts, calls = {}, 0
    t0 = cpu_s()
    for i, x in test:
        verdicts[i] = False
        for _, y in train:
            calls += 1
            if matcher.get_rms_dist(x, y) is not None:
                verdicts[i] = True
                break
    return verdicts, calls, cpu_s() - t0


def main(argv=None) -> int:
    from pymatgen.analysis.structure_matcher import StructureMatcher

    from crucible.crystal import audit, data
    from crucible.crystal.scoring import CONVENTIONS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", default=str(REPO.parent / "shared" / "data" / "cdvae" / "perov_5_test.csv"))
    parser.add_argument("--naive-items", type=int, default=40, help="test crystals the naive loop runs on")
    parser.add_argument("--workers", type=int, default=2, help="the audit's matcher processes")
    parser.add_argument("--out", help="JSON of the measurements")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")

    t0 = time.perf_counter()
    rows = data.load_cif_table(args.csv)
    load_s = time.perf_counter() - t0
    test_ids = data.split_ids([i for i, _, _ in rows], 0.5, 0)
    train = sorted(((i, s) for i, s, _ in rows if i not in test_ids), key=lambda r: r[0])
    test = sorted(((i, s) for i, s, _ in rows if i in test_ids), key=lambda r: r[0])
    print(f"{args.csv}: {len(rows)} crystals read in {load_s:.1f} s; {len(train)} train, {len(test)} test")

    # the primitive reductions alone: in this process one after another (how the audit did them
    # before), then on the matcher processes (how it does them now); the counts must be equal
    from collections import Counter

    from crucible.crystal.scoring import primitive_sites

    per_formula = Counter(s.composition.reduced_formula for _, s in train + test)
    shared = [s for _, s in train + test if per_formula[s.composition.reduced_formula] > 1]
    t0, c0 = time.perf_counter(), cpu_s()
    serial = [primitive_sites(s) for s in shared]
    serial_wall, serial_s = time.perf_counter() - t0, cpu_s() - c0
    t0, c0 = time.perf_counter(), cpu_s()
    pooled, _ = audit.primitive_counts(shared, workers=args.workers)
    pool_wall, pool_s = time.perf_counter() - t0, cpu_s() - c0
    print(
        f"primitive reductions: {len(shared)} crystals share a formula; in this process {serial_wall:.1f} s wall "
        f"({serial_s:.1f} CPU s), on {args.workers} matcher processes {pool_wall:.1f} s wall ({pool_s:.1f} CPU s); "
        f"identical: {serial == pooled}"
    )

    t0, c0 = time.perf_counter(), cpu_s()
    table, counts = audit.audit_splits({"train": train, "test": test}, max_comparisons=10**9, workers=args.workers)
    audit_wall, audit_s = time.perf_counter() - t0, cpu_s() - c0
    ours = dict(table.loc[table["split"] == "test", ["id", "duplicate_in_train"]].itertuples(index=False))

    sample = data.subsample(test, args.naive_items, 0)
    verdicts, naive_calls, naive_s = naive_first_match(sample, train, StructureMatcher(**CONVENTIONS["cdvae"]))
    # the crystals the audit found in train too (the random subsample rarely holds one): the naive
    # loop must find each, and its early stops are left out of the scaling
    found = [(i, s) for i, s in test if ours[i] and i not in verdicts][: args.naive_items]
    found_verdicts, _, _ = naive_first_match(found, train, StructureMatcher(**CONVENTIONS["cdvae"]))
    agree = all(v == bool(ours[i]) for i, v in {**verdicts, **found_verdicts}.items()) and serial == pooled
    scale = len(test) / len(sample)
    full_calls, full_s = naive_calls * scale, naive_s * scale

    result = {
        "train": len(train),
        "test": len(test),
        "audit": {
            "matcher_calls": counts["matcher_calls"],
            "cpu_s": round(audit_s, 1),
            "wall_s": round(audit_wall, 1),
            "workers": args.workers,
            "test_in_train": counts["test_duplicate_in_train"],
            "groups_compared": counts["groups_compared"],
            "primitive_reductions": counts["primitive_reductions"],
        },
        "primitive_reductions": {
            "crystals": len(shared),
            "serial_wall_s": round(serial_wall, 2),
            "serial_cpu_s": round(serial_s, 2),
            "pool_wall_s": round(pool_wall, 2),
            "pool_cpu_s": round(pool_s, 2),
            "identical": serial == pooled,
        },
        "naive": {
            "items_run": len(sample),
            "matcher_calls_run": naive_calls,
            "cpu_s_run": round(naive_s, 1),
            "matcher_calls_full_estimate": round(full_calls),
            "cpu_s_full_estimate": round(full_s),
            "in_train_of_run": int(sum(verdicts.values())),
        },
        "audit_in_train_rechecked": len(found_verdicts),
        "verdicts_identical": agree,
    }
    print(
        f"audit: {counts['matcher_calls']} matcher calls, {audit_s:.1f} CPU s ({audit_wall:.1f} s wall, "
        f"{args.workers} workers; every crystal's primitive reduction included), "
        f"{counts['test_duplicate_in_train']} test crystals in train"
    )
    print(
        f"naive: {naive_calls} calls, {naive_s:.1f} CPU s on {len(sample)} test crystals -> about "
        f"{full_calls:,.0f} calls, {full_s / 3600:.1f} CPU h for all {len(test)}"
    )
    print(
        f"ratio naive/audit: {full_calls / max(counts['matcher_calls'], 1):,.0f}x calls, "
        f"{full_s / audit_s:,.0f}x CPU time; verdicts identical on the {len(sample)} sampled and the "
        f"{len(found_verdicts)} in-train test crystals: {agree}"
    )
    per_call = naive_s / max(naive_calls, 1)
    mp_naive = 9_000 * 27_000 * per_call / 64
    per_item_calls = counts["matcher_calls"] / (len(train) + len(test))
    mp_audit = per_item_calls * 36_000 * per_call / 64
    per_reduction = serial_s / max(len(shared), 1)
    mp_reduce = 36_000 * per_reduction / 64  # at most every crystal shares its formula
    print(
        f"MP-20 on 64 cores, {per_call * 1e3:.1f} ms per call as measured here: naive about {mp_naive / 3600:,.1f} h; "
        f"the audit's matcher work about {mp_audit:,.0f} s if its groups are as small per crystal as perov-5's "
        f"({per_item_calls:.2f} calls per crystal; an assumption, not a measurement), plus at most "
        f"{mp_reduce:,.0f} s of primitive reductions ({per_reduction * 1e3:.1f} CPU ms each, at most one per crystal, "
        "now spread over the processes)"
    )
    result["mp20_64_cores_estimate_s"] = {
        "naive": round(mp_naive),
        "audit_matcher": round(mp_audit),
        "audit_reductions_at_most": round(mp_reduce),
    }
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
