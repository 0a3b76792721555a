"""Crashes become failed records with partial cards; retries; reruns continue, never duplicate.

The engine is the real sim engine with one fault injected per proposal, run in real
worker processes of the local backend.
"""

from __future__ import annotations

import io
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from planner.compiler import compile_plan
from planner.engine import ProgressFn
from planner.proposals import make_proposal
from planner.schema import ComputeCard, FlopsSplit, Proposal, RunRecord, run_id_for
from runners.backends import driver
from runners.engines.sim import SimEngine
from runners.execution import execute
from runners.store import PilotStore
from runners.task import ALARM_SIGNAL, RunFailed

FAULTS = ("raise", "partial", "nan", "oom", "hang", "stuck", "die", "flaky")
PROPS = [make_proposal(compile_plan("tiny-s", "sparse", 0.68 + 0.02 * i, 1e12)) for i in range(len(FAULTS))]
BY_FAULT = dict(zip(FAULTS, PROPS, strict=True))


class OutOfMemoryError(RuntimeError):
    """Named like torch.cuda.OutOfMemoryError, which the executor recognises by name."""


class FaultySim(SimEngine):
    """The sim engine, but the proposal decides how the run goes wrong."""

    def __init__(self, faults: dict[str, str], marker: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.faults, self.marker = faults, Path(marker)

    def run(self, proposal: Proposal, seed: int, progress: ProgressFn | None = None) -> RunRecord:
        assert progress is not None
        fault, b = self.faults.get(proposal.id, "none"), proposal.budget
        if fault == "raise":
            raise ValueError("bad batch")
        if fault == "partial":
            card = ComputeCard(flops=FlopsSplit(search=2e11, learning=1e11, reward=0, total=3e11), rho=1 / 3)
            raise RunFailed("loss diverged", card=card, kind="nan")
        if fault == "nan":
            split = {"flops_search": 2e11, "flops_learning": 0.0, "flops_reward": 0.0, "reward": 0.4}
            progress("search", 2e11, b, split)
            progress("learning", 4e11, b, split | {"flops_learning": 2e11, "loss": float("nan")})
        if fault == "oom":
            raise OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        if fault == "hang":  # Python keeps running: the in-worker alarm stops it
            progress("learning", 1e11, b, {})
            while True:
                time.sleep(0.05)
        if fault == "stuck":  # deaf to the alarm: only the driver's kill stops it
            signal.pthread_sigmask(signal.SIG_BLOCK, {ALARM_SIGNAL or signal.SIGALRM})
            progress("learning", 1e11, b, {})
            time.sleep(600)
        if fault == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        if fault == "flaky":
            flag = self.marker / f"{proposal.id}-{seed}"
            if not flag.exists():
                flag.touch()
                raise ConnectionError("lost the node")
        return super().run(proposal, seed, progress)


@pytest.fixture(scope="module")
def faulted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, str]:
    root = tmp_path_factory.mktemp("faults")
    mp = pytest.MonkeyPatch()
    mp.setattr(driver, "HARD_KILL_GRACE_S", 1.0)  # the "stuck" run is killed 1 s past its limit
    from rich.console import Console

    buf = io.StringIO()
    opts = {"faults": {p.id: f for f, p in BY_FAULT.items()}, "marker": str(root)}
    res = execute(PROPS, data=root / "data", engine=f"{__name__}:FaultySim", engine_options=opts,
                  workers=2, retries=1, timeout_s=1.5, console=Console(file=buf, width=200))
    mp.undo()
    return root / "data", res, buf.getvalue()


def failed(store: PilotStore, fault: str) -> list[RunRecord]:
    rid = run_id_for(BY_FAULT[fault].id, 0)
    return sorted((r for r in store.records(status="failed") if r.run_id == rid), key=lambda r: r.attempt)


def test_each_crash_is_recorded_with_its_kind_and_retried(faulted: tuple[Path, Any, str]) -> None:
    data, res, _ = faulted
    store = PilotStore(data)
    kinds = {"raise": "error", "partial": "nan", "nan": "nan", "oom": "oom",
             "hang": "timeout", "stuck": "timeout", "die": "crash"}
    for fault, kind in kinds.items():
        recs = failed(store, fault)
        assert [r.attempt for r in recs] == [1, 2], fault  # first try + one retry, both kept
        assert {r.provenance["failure_kind"] for r in recs} == {kind}, fault
        assert all(r.error and r.error.startswith(kind) and "\n" not in r.error for r in recs)
    assert "ValueError: bad batch" in failed(store, "raise")[0].error
    assert sorted(o.run_id for o in res.failed) == sorted(run_id_for(BY_FAULT[f].id, 0) for f in kinds)
    assert res.ok == [run_id_for(BY_FAULT["flaky"].id, 0)]
    assert [r.attempt for r in failed(store, "flaky")] == [1]
    assert res.attempts == 2 * len(FAULTS)  # flaky: failed once, then ok
    assert store.run_ids() == {run_id_for(BY_FAULT["flaky"].id, 0)}  # the surrogate's view


def test_partial_compute_cards(faulted: tuple[Path, Any, str]) -> None:
    store = PilotStore(faulted[0])
    assert failed(store, "partial")[0].card.flops.total == 3e11  # the engine's own card
    nan = failed(store, "nan")[0].card  # rebuilt from the last progress report
    assert (nan.flops.search, nan.flops.learning, nan.flops.total) == (2e11, 2e11, 4e11)
    assert nan.model_extra and nan.model_extra["partial"] is True
    assert failed(store, "hang")[0].card.flops.total == 1e11
    assert failed(store, "stuck")[0].card.flops.total == 1e11  # written by the driver
    assert failed(store, "hang")[0].wall_s >= 1.4


def test_progress_display_and_cleanup(faulted: tuple[Path, Any, str]) -> None:
    data, _, shown = faulted
    assert "1 ok, 7 failed" in shown
    assert BY_FAULT["flaky"].id[:30] in shown
    assert not list((data / ".progress").glob("*.json"))  # no stale progress left behind


def test_rerun_retries_only_what_failed_and_numbers_attempts_on(faulted: tuple[Path, Any, str]) -> None:
    data, _, _ = faulted
    store = PilotStore(data)
    ok_files = store.fingerprint(["runs"])
    res = execute([BY_FAULT["raise"], BY_FAULT["flaky"]], data=data,
                  engine=f"{__name__}:FaultySim",
                  engine_options={"faults": {BY_FAULT["raise"].id: "raise"}, "marker": str(data)},
                  retries=0, show_progress=False)
    assert res.skipped == [run_id_for(BY_FAULT["flaky"].id, 0)]
    assert [o.attempt for o in res.failed] == [3]
    assert [r.attempt for r in failed(store, "raise")] == [1, 2, 3]
    assert store.fingerprint(["runs"]) == ok_files
