"""crucible.torch_setup: a torch job asks for deterministic kernels and the threads it is given."""

from __future__ import annotations

import pytest


def test_configure_torch_asks_for_deterministic_kernels():
    torch = pytest.importorskip("torch", reason="absent on the Python 3.12 CI leg")
    from crucible.torch_setup import configure_torch

    before = (torch.are_deterministic_algorithms_enabled(), torch.get_num_threads())
    try:
        configure_torch(1)
        assert torch.are_deterministic_algorithms_enabled() and torch.get_num_threads() == 1
    finally:
        torch.use_deterministic_algorithms(before[0])
        torch.set_num_threads(before[1])
