"""Torch's intra-op thread count, set for a block of work and restored after it.

Several places run small tensor work on shared CPUs (GP fits of tens of points, tiny
GRPO runs, tiny-world pretraining), where spinning OpenMP threads cost several-fold and
one thread keeps results bit-identical. The count is process-wide, so a block that
lowers it must restore it: a warm worker or the race's own process runs other work
(the next run with other options, the surrogate's refit) afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["torch_threads"]


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(n)``, then restore the previous count.
    ``None`` leaves the count alone."""
    if n is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(max(1, int(n)))
    try:
        yield
    finally:
        torch.set_num_threads(before)
