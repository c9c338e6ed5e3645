"""Sine Coulomb matrices and eigenvalues against matminer under each OpenBLAS x86-64 kernel set.

    .venv/bin/python tests/blas/check_scm_kernels.py

matminer's own numbers depend on the BLAS kernel its machine selects (per-pair dgemv and ddot
round differently on Haswell/Zen, SkylakeX, Sandybridge and the SSE kernels, the last also by
the operands' alignment), so bit-identity on one machine says little about the next. This runs
the comparison of ``tests/test_features_structures.py`` (the 71 Delta crystals and 47 Materials
Project Li-O structures) once per kernel set, forcing it with ``OPENBLAS_CORETYPE`` in a child
process, and only for kernels whose instructions this CPU has (a kernel it lacks would crash).

Kept out of the test suite on purpose: the workplace's machines set ``OPENBLAS_CORETYPE`` on some
processors for a reason, and the suite must not override it. The suite's own test checks the
kernel of whatever machine runs it. Exit 0: every kernel tried agrees bit for bit; 1: one differs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# OPENBLAS_CORETYPE -> (the kernel set OpenBLAS reports, the CPU flags its code needs). AMD Zen
# (EPYC) gets the Haswell kernels; Core2 is reported as Katmai.
KERNELS = {
    "SkylakeX": ("SkylakeX", {"avx512f", "avx512dq", "avx512bw", "avx512vl"}),
    "Haswell": ("Haswell", {"avx2", "fma"}),
    "Zen": ("Haswell", {"avx2", "fma"}),
    "Sandybridge": ("Sandybridge", {"avx"}),
    "Core2": ("Katmai", {"ssse3"}),
    "Prescott": ("Katmai", {"pni"}),
}

CHILD = """
import json, warnings
import numpy as np
import threadpoolctl
from matminer.featurizers.structure import SineCoulombMatrix
from crucible.features.sine_coulomb import sine_coulomb_eigenvalues, sine_coulomb_matrices
from crucible.features.structures import parse_structure
from helpers import delta_structures, li_o_structures

structures = [s for _, s in delta_structures()] + [s for _, s, _, _ in li_o_structures()]
differ = []
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for s in structures:
        parsed = parse_structure(s.to_json())
        matrix = SineCoulombMatrix(flatten=False).fit([s]).featurize(s)[0]
        eigenvalues = SineCoulombMatrix().fit([s]).featurize(s)
        if not (
            np.array_equal(sine_coulomb_matrices([parsed])[0], matrix)
            and np.array_equal(sine_coulomb_eigenvalues([parsed])[0], eigenvalues)
        ):
            differ.append(s.formula)
kernels = sorted({i["architecture"] for i in threadpoolctl.threadpool_info() if i["internal_api"] == "openblas"})
print(json.dumps({"kernels": kernels, "n": len(structures), "differ": differ}))
"""


def cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def main() -> int:
    flags = cpu_flags()
    tests_dir = Path(__file__).resolve().parents[1]
    failed = False
    for coretype, (reported, needs) in KERNELS.items():
        if not needs <= flags:
            print(f"{coretype:12s} skipped: this CPU lacks {sorted(needs - flags)}")
            continue
        env = {**os.environ, "OPENBLAS_CORETYPE": coretype, "PYTHONPATH": str(tests_dir)}
        env.pop("OPENBLAS_L2_SIZE", None)
        out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
        report = json.loads(out.stdout.strip().splitlines()[-1])
        ok = report["kernels"] == [reported] and not report["differ"]
        failed |= not ok
        print(
            f"{coretype:12s} kernels {report['kernels']}: {report['n'] - len(report['differ'])}/{report['n']}"
            f" bit-identical{'' if ok else '  DIFFER: ' + ', '.join(report['differ']) or '  wrong kernel'}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
