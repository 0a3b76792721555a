"""torch_threads: a block's thread count is restored after it, on error too."""

from __future__ import annotations

import pytest
import torch

from planner.threads import torch_threads


def test_the_count_is_set_inside_and_restored_after_even_on_error() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with torch_threads(1):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with pytest.raises(RuntimeError), torch_threads(1):
            raise RuntimeError("boom")
        assert torch.get_num_threads() == 2
        with torch_threads(None):  # leaves the count alone
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)

