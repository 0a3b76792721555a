"""Live progress of the planner benchmark: one rich bar per world, with an ETA.

A full benchmark is 15-35 minutes of races in worker processes (one per world with
``--jobs``). The workers do not draw anything: they put events on a queue (``Log``) and
the parent drains it into its bars and prints each finished race's line above them, so
lines from several processes never tear the display. Without a terminal (CI, a log file)
rich draws no bars and the race lines print as before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Log", "bench_progress"]


@dataclass(frozen=True)
class Log:
    """What a worker reports: a line per finished race, an event per finished repetition.

    A class, not a closure: worker processes get a pickled copy. ``events`` is a queue
    (a ``multiprocessing.Manager`` proxy across processes); ``None`` prints directly.
    """

    t0: float
    events: Any = None

    def __call__(self, o: Any) -> None:
        line = (f"[{time.perf_counter() - self.t0:7.0f}s] {o.world} rep {o.rep} {o.strategy:10s} "
                f"same {np.mean(o.same):.2f} regret {np.median(o.regret):.4f} flops {o.flops:.1f} "
                f"stop {o.stop}")
        if self.events is None:
            print(line, flush=True)
        else:
            self.events.put(("race", o.world, line))

    def rep_done(self, world: str) -> None:
        """Every strategy has finished one repetition of ``world``."""
        if self.events is not None:
            self.events.put(("rep", world, ""))


@contextmanager
def bench_progress(worlds: Sequence[str], reps: int, t0: float, events: Any) -> Iterator[Log]:
    """Bars for ``worlds`` x ``reps`` repetitions, fed from ``events`` by a drain thread.

    Yields the :class:`Log` to hand to the workers. On exit every event already queued
    is shown before the bars close.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    cols = (TextColumn("{task.description:>10}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("reps"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
    with Progress(*cols) as bars:
        tasks = {w: bars.add_task(w, total=reps) for w in worlds}

        def drain() -> None:
            while (ev := events.get()) is not None:
                kind, world, line = ev
                if kind == "race":
                    bars.console.print(line, highlight=False, soft_wrap=True)
                elif kind == "rep" and world in tasks:
                    bars.advance(tasks[world])

        thread = threading.Thread(target=drain, daemon=True)
        thread.start()
        try:
            yield Log(t0, events)
        finally:
            events.put(None)
            thread.join()
