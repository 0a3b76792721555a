"""A throttled submission queue shared by the cluster backends (Ray, SLURM).

Runs wait in submission order until fewer than ``limit`` are in flight; a subclass says
how to launch a batch (:meth:`ThrottledQueue._launch`, which sets each handle's ``ref``).
The limit is ours, not the cluster's: ``--workers`` caps concurrent runs whatever the
cluster size (and submitit's local executor ignores array parallelism altogether).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Sequence

from runners.backends import Handle
from runners.task import Task

__all__ = ["ThrottledQueue"]


class ThrottledQueue(ABC):
    """The submit/poll bookkeeping of a backend that holds at most ``limit`` runs in flight;
    the rest wait in submission order (see the module docstring)."""
    def __init__(self, limit: float = math.inf) -> None:
        self._limit = limit
        self._waiting: deque[Handle] = deque()
        self._running: set[Handle] = set()

    def submit(self, tasks: Sequence[Task]) -> list[Handle]:
        handles = [Handle(t) for t in tasks]
        self._waiting.extend(handles)
        self._fill()
        return handles

    @abstractmethod
    def _launch(self, batch: list[Handle]) -> None:
        """Start every handle of ``batch`` and set its ``ref``."""

    def _fill(self) -> None:
        batch: list[Handle] = []
        while self._waiting and len(self._running) + len(batch) < self._limit:
            batch.append(self._waiting.popleft())
        if batch:
            self._launch(batch)
            self._running.update(batch)

    def _finished(self, handle: Handle) -> None:
        """Free ``handle``'s slot and start whatever waits for one."""
        self._running.discard(handle)
        self._fill()
