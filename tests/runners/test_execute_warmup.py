"""An engine's warm-up (the trl engine's imports: seconds, once per worker) is outside the
run: a run that itself fits its time limit is not failed for a slow start, and its wall
time does not include the warm-up."""

from __future__ import annotations

import io
import time
from pathlib import Path

from planner.compiler import compile_plan
from planner.engine import ProgressFn
from planner.proposals import make_proposal
from planner.schema import Proposal, RunRecord
from runners.engines.sim import SimEngine
from runners.execution import execute
from runners.store import PilotStore

WARM_S = 2.0


class SlowStartSim(SimEngine):
    """Like the trl engine: ``run`` warms up itself if nobody did (its imports)."""

    warm = False

    def warm_up(self) -> None:
        if not self.warm:
            time.sleep(WARM_S)
            self.warm = True

    def run(self, proposal: Proposal, seed: int, progress: ProgressFn | None = None) -> RunRecord:
        self.warm_up()
        return super().run(proposal, seed, progress)


def test_warm_up_is_outside_the_time_limit_and_the_wall_time(tmp_path: Path) -> None:
    from rich.console import Console

    prop = make_proposal(compile_plan("tiny-s", "sparse", 0.7, 1e12))
    res = execute([prop], data=tmp_path / "data", engine=f"{__name__}:SlowStartSim", workers=1,
                  retries=0, timeout_s=1.0, console=Console(file=io.StringIO(), width=200))
    assert res.failed == [] and len(res.ok) == 1
    (rec,) = PilotStore(tmp_path / "data").records()
    assert rec.wall_s < WARM_S
