"""The throttled queue the Ray and SLURM backends share: order, limit and freed slots."""

from __future__ import annotations

from typing import Any

from runners.backends import Handle
from runners.backends.queue import ThrottledQueue


class Recorder(ThrottledQueue):
    def __init__(self, limit: float) -> None:
        super().__init__(limit)
        self.batches: list[list[Any]] = []

    def _launch(self, batch: list[Handle]) -> None:
        self.batches.append([h.task for h in batch])
        for h in batch:
            h.ref = f"ref-{h.task}"


def test_at_most_limit_in_flight_and_slots_refill_in_order() -> None:
    q = Recorder(limit=2)
    hs = q.submit(["a", "b", "c", "d", "e"])  # type: ignore[list-item]
    assert q.batches == [["a", "b"]]
    assert [h.ref for h in hs] == ["ref-a", "ref-b", None, None, None]
    q._finished(hs[1])
    assert q.batches[-1] == ["c"] and hs[2].ref == "ref-c"
    q._finished(hs[0])
    q._finished(hs[2])
    assert q.batches[-1] == ["e"] and all(h.ref for h in hs)
    assert len(q._running) == 2


def test_unlimited_queue_launches_one_batch() -> None:
    q = Recorder(limit=float("inf"))
    q.submit(["a", "b", "c"])  # type: ignore[list-item]
    assert q.batches == [["a", "b", "c"]]
