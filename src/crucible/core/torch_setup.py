"""Torch settings shared by every job that runs a network: its CPU threads, and deterministic
kernels, so that two runs give byte-identical outputs."""

from __future__ import annotations

# Set by the `crucible` command run from the command line (crucible.cli.main, a job's own process):
# only there does ``flush_denormal`` take effect. The setting holds for the whole process, and, once
# torch's worker threads exist, for the calling thread alone; a library caller (a notebook, the test
# suite) keeps its own floating-point behaviour.
_FLUSH_ALLOWED = False


def allow_flush_denormal() -> None:
    """Let :func:`configure_torch` flush subnormals in this process (a ``crucible`` command's)."""
    global _FLUSH_ALLOWED
    _FLUSH_ALLOWED = True


def configure_torch(threads: int | None = None, *, flush_denormal: bool = False) -> None:
    """Set torch's CPU threads (when given) and ask for deterministic algorithms; with
    ``flush_denormal``, subnormal floats are flushed to zero on the CPU.

    With two or more CPU threads some reductions (the scatter/index-add of a message-passing
    potential's force backward pass) sum in a different order on every run: SevenNet's s2ef
    forces moved by up to 5e-7 eV/Å between two runs of the default DAG. ``warn_only``: an op
    without a deterministic kernel (some CUDA ones) warns instead of stopping the job. Does
    nothing without torch (EMT and the other ASE calculators do not need it).

    ``flush_denormal`` is for the registered neural potentials
    (:func:`crucible.potentials.registry.load_potential`): CHGNet's backward pass on a phonon
    supercell meets subnormal float32s, which the CPU handles in microcode; flushed, a 64-atom MgO
    cell's forces cost a third less CPU and are equal to the last bit
    (benchmarks/batched_forces.py). It takes effect only in a ``crucible`` command's process
    (:func:`allow_flush_denormal`), before the thread count, so that torch's worker threads start
    with it; it is process-wide, so a user's own potential is not run under it.
    """
    try:
        import torch
    except ImportError:
        return
    if flush_denormal and _FLUSH_ALLOWED:
        torch.set_flush_denormal(True)
    if threads:
        torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
