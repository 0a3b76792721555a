"""The cluster backends past one job array: the concurrency cap with retries.

Real components throughout: submitit's local executor (its jobs are fresh interpreters that
find this module's engines through PYTHONPATH) and the real store. A real SLURM is stood in
for by the local executor reporting ``cluster == "slurm"``: the backend then takes every
path it takes on a cluster, and the processes are there to be counted.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from planner.compiler import compile_plan
from planner.engine import ProgressFn
from planner.proposals import make_proposal
from planner.schema import Proposal, RunRecord, run_id_for
from runners.backends import Handle
from runners.engines.sim import SimEngine
from runners.execution import execute

HERE = Path(__file__).resolve().parent
WORKERS = 2
PROPS = [make_proposal(compile_plan("tiny-s", "sparse", 0.66 + 0.03 * i, 1e12)) for i in range(5)]


class CountingSim(SimEngine):
    """The sim engine at ~0.6 s a run, noting how many runs are live at once; the runs in
    ``flaky`` fail their first attempt (so the driver retries them)."""

    def __init__(self, marker: str, flaky: Sequence[str] = (), **kw: Any) -> None:
        super().__init__(**kw)
        self.marker, self.flaky = Path(marker), set(flaky)

    def run(self, proposal: Proposal, seed: int, progress: ProgressFn | None = None) -> RunRecord:
        live, peaks = self.marker / "live", self.marker / "peaks"
        live.mkdir(parents=True, exist_ok=True)
        peaks.mkdir(parents=True, exist_ok=True)
        me = live / uuid.uuid4().hex
        me.touch()
        try:
            peak = 0
            for _ in range(6):
                peak = max(peak, len(list(live.iterdir())))
                time.sleep(0.1)
            (peaks / me.name).write_text(str(peak))
            flag = self.marker / proposal.id
            if proposal.id in self.flaky and not flag.exists():
                flag.touch()
                raise ConnectionError("lost the node")
            return super().run(proposal, seed, progress)
        finally:
            me.unlink()


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs and Ray workers are fresh interpreters: they find this module's engines here."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p))


@pytest.fixture
def fake_slurm(monkeypatch: pytest.MonkeyPatch, on_path: None) -> None:
    """submitit's local executor, reporting itself as SLURM (as AutoExecutor does on a login node)."""
    submitit = pytest.importorskip("submitit")

    class OnSlurm(submitit.AutoExecutor):  # type: ignore[misc,name-defined]
        def __init__(self, folder: str, cluster: str | None = None, **kw: Any) -> None:
            super().__init__(folder, cluster="local", **kw)
            self.cluster = "slurm"

    monkeypatch.setattr(submitit, "AutoExecutor", OnSlurm)
    # A dead local job's result file never comes: no NFS lag to wait out on a local disk.
    monkeypatch.setattr(submitit.local.local.LocalJob, "_results_timeout_s", 1, raising=False)


def test_retries_stay_under_the_cap_on_a_slurm_cluster(fake_slurm: None, tmp_path: Path) -> None:
    from runners.backends.slurm import SlurmBackend

    live_jobs: list[Any] = []
    peak_jobs = 0

    class Counted(SlurmBackend):
        """Counts the jobs the scheduler holds (launched, not done) at every step."""

        def _launch(self, batch: list[Handle]) -> None:
            nonlocal peak_jobs
            super()._launch(batch)
            live_jobs.extend(h.ref for h in batch)
            peak_jobs = max(peak_jobs, sum(not j.done() for j in live_jobs))

        def poll(self, handle: Handle) -> bool:
            nonlocal peak_jobs
            peak_jobs = max(peak_jobs, sum(not j.done() for j in live_jobs))
            return super().poll(handle)

    be = Counted(workers=WORKERS, folder=tmp_path / ".jobs", time_min=2)
    assert be._ex.cluster == "slurm"
    marker = tmp_path / "marker"
    flaky = [PROPS[0].id, PROPS[3].id]
    try:
        res = execute(PROPS, data=tmp_path / "d", engine=f"{__name__}:CountingSim",
                      engine_options={"marker": str(marker), "flaky": flaky}, backend=be, workers=WORKERS,
                      retries=1, show_progress=False)
    finally:
        be.close()
    assert sorted(res.ok) == sorted(run_id_for(p.id, 0) for p in PROPS) and res.attempts == len(PROPS) + 2
    assert len(live_jobs) == len(PROPS) + 2  # the two retries were jobs of their own
    peaks = [int(p.read_text()) for p in (marker / "peaks").iterdir()]
    assert len(peaks) == len(PROPS) + 2
    assert max(peaks) <= WORKERS and peak_jobs <= WORKERS, (peaks, peak_jobs)
