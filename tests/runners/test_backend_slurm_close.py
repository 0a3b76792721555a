"""The cluster backends past one job array: the concurrency cap with retries, what close()
leaves behind, and Ctrl-C.

Real components throughout: submitit's local executor (its jobs are fresh interpreters that
find this module's engines through PYTHONPATH), a local Ray, real lease files. A real SLURM
is stood in for by the local executor reporting ``cluster == "slurm"``: the backend then
takes every path it takes on a cluster, and the processes are there to be counted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from planner.compiler import compile_plan
from planner.engine import ProgressFn
from planner.proposals import make_proposal, write_proposals
from planner.schema import Proposal, RunRecord, run_id_for
from runners.backends import Handle
from runners.engines.sim import SimEngine
from runners.execution import execute
from runners.lease import RunLease, lease_dir
from runners.store import PilotStore
from runners.task import Task, new_nonce

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


class SlowSim(SimEngine):
    """10 s a run, reporting progress: still running when the test closes the backend."""

    def run(self, proposal: Proposal, seed: int, progress: ProgressFn | None = None) -> RunRecord:
        for i in range(100):
            time.sleep(0.1)
            if progress is not None:
                progress("search", proposal.budget * i / 100, proposal.budget, {})
        return super().run(proposal, seed, progress)


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
    # No squeue here: a local job has no COMPLETING phase after its process ends, so once
    # done() says so squeue would list it no longer.
    from runners.backends import slurm

    monkeypatch.setattr(slurm, "_listed", set)


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


# -- close(): the leases of the attempts it stops -------------------------------------------


def _task(data: Path, prop: Proposal) -> Task:
    return Task(prop, 0, 1, f"{__name__}:SlowSim", str(data), {}, None, new_nonce())


def _wait(cond: Any, what: str, within_s: float = 60.0) -> None:
    deadline = time.monotonic() + within_s
    while not cond():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def _holder_task(data: Path, run_id: str) -> str | None:
    import json

    try:
        return str(json.loads((lease_dir(data) / f"{run_id}.json").read_text())["task"])
    except (OSError, ValueError, KeyError):
        return None


def _close_leaves_only_foreign_leases(be: Any, data: Path) -> None:
    """One run in flight (holding its lease) and one waiting on another driver's lease:
    close() frees the first at once and leaves the other driver's lease as it was."""
    foreign = RunLease(data, run_id_for(PROPS[1].id, 0), "another-drivers-nonce")
    assert foreign.try_acquire() is None  # held (kept fresh) by "another driver": this process
    mine, blocked = _task(data, PROPS[0]), _task(data, PROPS[1])
    try:
        handles = be.submit([mine, blocked])
        _wait(lambda: _holder_task(data, mine.run_id) == mine.nonce, "the run to take its lease")
        _wait(lambda: any((data / ".progress").glob(f"*{blocked.nonce}*")), "the other run to wait")
        t0 = time.monotonic()
        be.close()
        assert time.monotonic() - t0 < 15
        assert _holder_task(data, mine.run_id) is None  # another driver can take the run at once
        assert RunLease(data, mine.run_id, new_nonce()).try_acquire() is None
        assert _holder_task(data, blocked.run_id) == "another-drivers-nonce"
        assert not list((data / ".progress").glob("*.json"))
        assert PilotStore(data).scan(status=None).records == []  # stopped runs record nothing
        assert all(h.task in (mine, blocked) for h in handles)
    finally:
        foreign.release()


@pytest.mark.parametrize("cluster", ["local", "slurm"])
def test_slurm_close_releases_the_stopped_attempts_leases(cluster: str, tmp_path: Path,
                                                          request: pytest.FixtureRequest) -> None:
    request.getfixturevalue("fake_slurm" if cluster == "slurm" else "on_path")
    pytest.importorskip("submitit")
    from runners.backends.slurm import SlurmBackend

    be = SlurmBackend(workers=WORKERS, folder=tmp_path / ".jobs", cluster="local", time_min=2)
    assert be._ex.cluster == cluster
    _close_leaves_only_foreign_leases(be, tmp_path / "d")


def test_ray_close_releases_the_stopped_attempts_leases(on_path: None, tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    from runners.backends.ray import RayBackend

    if ray.is_initialized():
        ray.shutdown()
    # Ray is started here (not by the backend): a Ray the backend did not start stays up, as
    # a cluster does, so only the cancel and the leases' release stop the runs.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        _close_leaves_only_foreign_leases(RayBackend(workers=WORKERS), tmp_path / "d")
    finally:
        ray.shutdown()


# -- Ctrl-C --------------------------------------------------------------------------------


def test_ctrl_c_under_slurm_local_is_one_line_and_no_traceback(on_path: None, tmp_path: Path) -> None:
    """A terminal's Ctrl-C goes to the whole foreground process group: the driver and, unless
    they have sessions of their own, every submitit controller and job."""
    pytest.importorskip("submitit")
    path = write_proposals(tmp_path / "proposals.json", PROPS)
    data = tmp_path / "data"
    (tmp_path / "backend.toml").write_text('[slurm]\ncluster = "local"\ntime_min = 2\n')
    cmd = [sys.executable, "-c", "from runners.cli import main; main()", "execute", str(path), "--data", str(data),
           "--engine", f"{__name__}:SlowSim", "--backend", "slurm", "--backend-config",
           str(tmp_path / "backend.toml"), "--workers", str(WORKERS), "--json"]
    proc = subprocess.Popen(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _wait(lambda: proc.poll() is not None or len(list(lease_dir(data).glob("*.json"))) == WORKERS,
              "both runs to hold their leases")
        assert proc.poll() is None, proc.communicate()
        assert _processes_naming(str(data / ".submitit"))  # the jobs (their folder), as seen below
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines()[-1].startswith(f"interrupted: the finished runs are kept in {data}")
    # The stopped runs leave no lease, progress file or record (a resumed driver starts them at once).
    assert list(lease_dir(data).glob("*.json")) == [] and list((data / ".progress").glob("*.json")) == []
    assert PilotStore(data).scan(status=None).corrupt == []
    assert _processes_naming(str(data / ".submitit")) == []  # no job lives on to record its run after the command ended
    assert PilotStore(data).scan(status=None).records == []


def _processes_naming(text: str) -> list[int]:
    """Pids of the processes whose command line names ``text`` (a job's controller names its folder)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and text in (proc / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found
