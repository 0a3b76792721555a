"""The driver loop (runners.backends.driver.Driver) through an in-process backend: what it
says about each attempt where there is no terminal."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from rich.console import Console

from planner.compiler import compile_plan
from planner.engine import ProgressFn
from planner.proposals import make_proposal
from planner.schema import Proposal, RunRecord, run_id_for
from runners.backends import Handle
from runners.engines.sim import SimEngine
from runners.execution import execute
from runners.task import Outcome, Task, run_task

PROPS = [make_proposal(compile_plan("tiny-s", "sparse", rho, 1e12)) for rho in (0.7, 0.6)]
FLAKY = run_id_for(PROPS[0].id, 0)


class FlakySim(SimEngine):
    """The sim engine; the first attempt at FLAKY fails."""

    failed: ClassVar[set[str]] = set()

    def run(self, proposal: Proposal, seed: int, progress: ProgressFn | None = None) -> RunRecord:
        rid = run_id_for(proposal.id, seed)
        if rid == FLAKY and rid not in self.failed:
            self.failed.add(rid)
            raise ConnectionError("lost the node")
        return super().run(proposal, seed, progress)


class InlineBackend:
    """Runs each task in this process as it is submitted: results in submission order."""

    name = "inline"

    def __init__(self) -> None:
        self.out: dict[int, Outcome] = {}

    def submit(self, tasks: Sequence[Task]) -> list[Handle]:
        handles = [Handle(t) for t in tasks]
        for h in handles:
            self.out[id(h)] = run_task(h.task)
        return handles

    def poll(self, handle: Handle) -> bool:
        return True

    def result(self, handle: Handle) -> Outcome:
        return self.out.pop(id(handle))

    def cancel(self, handle: Handle) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_log_line_never_counts_an_attempt_about_to_be_retried_as_finished(tmp_path: Path) -> None:
    """Not on a terminal, each finished attempt is a line "[k/N] RUN try T: ...". A failed
    attempt the driver was about to retry counted its run among the k finished, and said
    nothing of the retry: "[1/2] A try 1: failed", then "[1/2] B" (k went back), then
    "[2/2] A try 2: ok"; a log read at the first line showed a run done and failed."""
    FlakySim.failed.clear()
    buf = io.StringIO()
    res = execute(PROPS, data=tmp_path, engine=f"{__name__}:FlakySim", backend=InlineBackend(), retries=1,
                  console=Console(file=buf, width=300), show_progress=True)
    assert sorted(res.ok) == sorted(run_id_for(p.id, 0) for p in PROPS) and res.attempts == 3
    lines = [ln for ln in buf.getvalue().splitlines() if ln.startswith("[")]
    assert len(lines) == 3, buf.getvalue()
    counts = [int(re.match(r"\[(\d+)/2\]", ln)[1]) for ln in lines]  # type: ignore[index]
    assert counts == [0, 1, 2], lines
    assert lines[0].startswith(f"[0/2] {FLAKY} try 1: failed (error: ConnectionError: lost the node); retrying as try 2")
    assert lines[2].startswith(f"[2/2] {FLAKY} try 2: ok")
