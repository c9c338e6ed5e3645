"""Sine Coulomb matrix eigenvalues, equal to matminer's ``SineCoulombMatrix`` (flatten=True).

matminer 0.10.1 fills the n x n matrix of one structure in a Python double loop (diagonal
``0.5 Z_i^2.4``; off-diagonal ``Z_i Z_j / (|sin^2(pi (f_i - f_j)) L| * ANG_TO_BOHR)`` with the
fractional coordinate difference ``f_i - f_j`` for i < j, mirrored below the diagonal), then
returns the unsorted eigenvalues of ``np.linalg.eig``, zero-padded to the largest site count
seen in ``fit``. That loop costs O(n^2) Python operations per structure.

Here all structures with the same site count are stacked and every pair is computed with numpy
at once; ``np.linalg.eig`` then runs on the stack (LAPACK's geev one matrix at a time, the same
routine matminer calls). Each pair's 1x3 by 3x3 product and its norm go through the same BLAS
calls as matminer's ``np.matrix`` product (dgemv) and ``np.linalg.norm`` (ddot), on operands laid
out as matminer's are, so the matrices agree bit for bit with matminer run on the same machine,
whichever OpenBLAS kernel that machine selects, and the eigenvalues come out in the same order
(tested on the 71 Delta crystals and 47 Materials Project Li-O structures under every x86-64
``OPENBLAS_CORETYPE``).

Padding is not done here: the cache stores each structure's own n eigenvalues, and the model
pads to the width of its training rows (what ``fit`` on the training structures gives).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from crucible.features.structures import ParsedStructure

# matminer.featurizers.structure.matrix.ANG_TO_BOHR in 0.10.1 (1 / 0.529177 Å, not CODATA's
# 1.8897261...). Checked against the installed matminer by the tests.
ANG_TO_BOHR = 1.8897543773133647


def sine_coulomb_matrices(structures: Sequence[ParsedStructure]) -> np.ndarray:
    """(G, n, n) matrices of structures that all have n sites."""
    n = len(structures[0].numbers)
    if any(len(s.numbers) != n for s in structures):
        raise ValueError("sine_coulomb_matrices needs structures of equal site count")
    frac = np.stack([s.frac_coords for s in structures])  # (G, n, 3)
    lattice = np.stack([s.lattice for s in structures])  # (G, 3, 3)
    z = np.stack([s.numbers for s in structures])  # (G, n)
    iu, ju = np.triu_indices(n, k=1)
    trig = np.sin(np.pi * (frac[:, iu, :] - frac[:, ju, :])) ** 2  # (G, P, 3)
    # matminer computes ``np.matrix(v) * lattice`` (one dgemv per pair) and ``np.linalg.norm`` (one
    # ddot on a freshly allocated 3-vector). Plain numpy sums, einsum, or one stacked (P, 3) x
    # (3, 3) product (dgemm) differ in the last bit on some pairs with some OpenBLAS kernels
    # (Haswell and Zen: 15 of the 118 test crystals), which can reorder the eigenvalues. So each
    # pair is its own 1x3 product (matmul with m = 1 calls dgemv), and each 3-vector of the norm
    # starts on a 16-byte boundary: the SSE kernels (Core2, Penryn, Opteron, ...) round ddot
    # differently for unaligned operands.
    cart = _aligned_rows(trig.shape[:-1])  # (G, P, 3) view, each row 32-byte aligned
    cart[...] = np.matmul(trig[..., None, :], lattice[:, None, :, :])[..., 0, :]
    dist = np.sqrt(np.matmul(cart[..., None, :], cart[..., :, None])[..., 0, 0])
    dist = dist * ANG_TO_BOHR
    out = np.zeros((len(structures), n, n))
    out[:, iu, ju] = (z[:, iu] * z[:, ju]) / dist
    out[:, ju, iu] = out[:, iu, ju]
    d = np.arange(n)
    out[:, d, d] = 0.5 * z.astype(np.int64) ** 2.4
    return out


def _aligned_rows(shape: tuple[int, ...]) -> np.ndarray:
    """A zeroed float64 array of ``shape + (3,)`` whose rows start on 32-byte boundaries."""
    count = int(np.prod(shape))
    buffer = np.zeros(count * 4 + 4)
    start = (-buffer.ctypes.data % 32) // 8
    return buffer[start : start + count * 4].reshape(*shape, 4)[..., :3]


def sine_coulomb_eigenvalues(structures: Sequence[ParsedStructure]) -> list[np.ndarray]:
    """Each structure's n eigenvalues (float64, matminer's order), in input order."""
    result: list[np.ndarray | None] = [None] * len(structures)
    by_size: dict[int, list[int]] = {}
    for i, s in enumerate(structures):
        by_size.setdefault(len(s.numbers), []).append(i)
    for n, idx in sorted(by_size.items()):
        # Chunks bound the memory of the (G, n, n) stack on the 100k-structure tasks.
        chunk = max(1, 2_000_000 // (n * n))
        for start in range(0, len(idx), chunk):
            part = idx[start : start + chunk]
            eigs = np.linalg.eig(sine_coulomb_matrices([structures[i] for i in part]))[0]
            # A real symmetric matrix has real eigenvalues; matminer keeps the real part too
            # (assigning into a float array).
            eigs = np.real(eigs).astype(np.float64)
            for row, i in enumerate(part):
                result[i] = eigs[row]
    return result  # type: ignore[return-value]
