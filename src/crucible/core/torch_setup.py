"""Torch settings shared by every job that runs a network: its CPU threads, and deterministic
kernels, so that two runs give byte-identical outputs."""

from __future__ import annotations


def configure_torch(threads: int | None = None) -> None:
    """Set torch's CPU threads (when given) and ask for deterministic algorithms.

    With two or more CPU threads some reductions (the scatter/index-add of a message-passing
    potential's force backward pass) sum in a different order on every run: SevenNet's s2ef
    forces moved by up to 5e-7 eV/Å between two runs of the default DAG. ``warn_only``: an op
    without a deterministic kernel (some CUDA ones) warns instead of stopping the job. Does
    nothing without torch (EMT and the other ASE calculators do not need it).
    """
    try:
        import torch
    except ImportError:
        return
    if threads:
        torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
