"""Torch's intra-op thread count, set for a block of work and restored after it.

Several places run small tensor work on shared CPUs (GP fits of tens of points, tiny
GRPO runs, tiny-world pretraining), where spinning OpenMP threads cost several-fold and
one thread keeps results bit-identical. The count is process-wide, so a block that
lowers it must restore it: a warm worker or the race's own process runs other work
(the next run with other options, the surrogate's refit) afterwards.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["one_thread_when", "torch_threads"]

F = TypeVar("F", bound=Callable[..., Any])


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


def one_thread_when(needed: Callable[..., bool]) -> Callable[[F], F]:
    """Run the call under ``torch_threads(1)`` where ``needed(*args, **kwargs)`` says
    tensors will be touched (the surrogate's fits, calls and acquisition); otherwise as is,
    without importing torch (2-4 s of a cold process: an empty-store ``planner suggest``
    proposes its initial design without it).

    Their matrices are tens of rows, where spare threads only spin (a report's fit: 12 s
    against 1.2 s on a shared 2-core machine), and one thread makes a fit the same whatever
    the core count: the race's calls and ``planner report``'s refit of the same runs agree
    (with the process's two threads they differed: rho* 0.71 against 0.76 on 24 runs).
    """
    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not needed(*args, **kwargs):
                return fn(*args, **kwargs)
            with torch_threads(1):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return wrap
