"""SlurmBackend.close() on a cluster: scancel only asks SLURM to stop a job, which lives on
for up to the cluster's KillWait and may still write its record. A run's lease is freed
only once its job is seen gone; a job still live past the grace keeps it.

Scripted submitit jobs stand in for SLURM's (no process, no sacct): one shared watcher, as
submitit's, whose forced refresh (one sacct call) updates every job's state and whose
unforced reads give the cached state.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from planner.compiler import compile_plan
from planner.proposals import make_proposal
from runners.backends import Handle
from runners.backends.slurm import SlurmBackend
from runners.lease import RunLease, lease_dir
from runners.task import Task, new_nonce

PROPS = [make_proposal(compile_plan("tiny-s", "sparse", 0.66 + 0.03 * i, 1e12)) for i in range(3)]


class _Sacct:
    """submitit's shared SLURM watcher: ``calls`` forced refreshes so far."""

    def __init__(self) -> None:
        self.calls = 0
        self.jobs: list[_Job] = []

    def refresh(self) -> None:
        self.calls += 1
        for job in self.jobs:
            job.seen_done = job.cancelled and job.ends_after is not None and self.calls >= job.ends_after


class _Job:
    """A running SLURM job: ends ``ends_after`` sacct calls after its cancel (never for None);
    ``unreachable``: every check fails, as submitit's does when sacct cannot be run."""

    def __init__(self, sacct: _Sacct, job_id: str, ends_after: int | None, unreachable: bool = False) -> None:
        self.sacct, self.job_id, self.ends_after, self.unreachable = sacct, job_id, ends_after, unreachable
        self.cancelled = self.seen_done = False
        sacct.jobs.append(self)

    def cancel(self, check: bool = True) -> None:
        self.cancelled = True

    def done(self, force_check: bool = False) -> bool:
        if self.unreachable and self.cancelled:
            raise RuntimeError("sacct: error: slurmdbd: connection refused")
        if force_check:
            self.sacct.refresh()
        return self.seen_done


@pytest.fixture
def backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SlurmBackend:
    pytest.importorskip("submitit")
    from runners.backends import slurm

    monkeypatch.setattr(slurm, "CANCEL_GRACE_S", 10.0)
    monkeypatch.setattr(slurm, "SACCT_POLL_S", 0.01)
    monkeypatch.setattr(slurm, "_listed", set)  # squeue lists none of them (each test says otherwise)
    be = SlurmBackend(workers=len(PROPS), folder=tmp_path / ".jobs", cluster="local")
    be._ex.cluster = "slurm"  # close() takes its cluster path; the jobs below are scripted
    return be


def _running(be: SlurmBackend, data: Path, jobs: list[_Job]) -> tuple[list[Task], list[RunLease]]:
    """``jobs`` in flight, each holding its run's lease (as its run_task would)."""
    tasks = [Task(p, 0, 1, "sim", str(data), {}, None, new_nonce()) for p in PROPS[:len(jobs)]]
    leases = [RunLease(data, t.run_id, t.nonce) for t in tasks]
    for t, lease, job in zip(tasks, leases, jobs, strict=True):
        assert lease.try_acquire() is None
        be._running.add(Handle(t, ref=job))
    return tasks, leases


def _holder(data: Path, run_id: str) -> str | None:
    try:
        return str(json.loads((lease_dir(data) / f"{run_id}.json").read_text())["task"])
    except (OSError, ValueError, KeyError):
        return None


@pytest.mark.parametrize("unreachable", [False, True], ids=["still-running", "sacct-unreachable"])
def test_a_cancelled_job_not_seen_gone_keeps_its_lease(backend: SlurmBackend, tmp_path: Path, unreachable: bool,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from runners.backends import slurm

    monkeypatch.setattr(slurm, "CANCEL_GRACE_S", 0.3)
    sacct, data = _Sacct(), tmp_path / "d"
    stays, ends = _Job(sacct, "77_0", None, unreachable), _Job(sacct, "77_1", 2)
    (kept, freed), leases = _running(backend, data, [stays, ends])
    try:
        backend.close()
        assert stays.cancelled and ends.cancelled
        assert _holder(data, kept.run_id) == kept.nonce  # a rerun waits for the job, not runs beside it
        assert _holder(data, freed.run_id) is None
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{kept.run_id} (job 77_0)" in err[0] and freed.run_id not in err[0], err
        assert "stay leased" in err[0] and "0.3 s" in err[0]
    finally:
        for lease in leases:
            lease.release()


def test_cancelled_jobs_seen_gone_within_the_grace_free_their_leases(
    backend: SlurmBackend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sacct, data = _Sacct(), tmp_path / "d"
    jobs = [_Job(sacct, "78_0", 3), _Job(sacct, "78_1", 5)]
    tasks, leases = _running(backend, data, jobs)
    seen: list[str | None] = []
    real_refresh = sacct.refresh

    def refresh() -> None:  # what another driver would find while the jobs still run
        seen.append(_holder(data, tasks[1].run_id))
        real_refresh()

    sacct.refresh = refresh  # type: ignore[method-assign]
    try:
        t0 = time.monotonic()
        backend.close()
        assert time.monotonic() - t0 < 5.0  # back as soon as both ended, not after the grace
        assert all(_holder(data, t.run_id) is None for t in tasks)
        assert sacct.calls == 5 and seen == [tasks[1].nonce] * 5  # leased until seen gone
        assert capsys.readouterr().err == ""
    finally:
        for lease in leases:
            lease.release()


def test_the_wait_for_cancelled_jobs_is_bounded(backend: SlurmBackend, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from runners.backends import slurm

    monkeypatch.setattr(slurm, "CANCEL_GRACE_S", 0.3)
    monkeypatch.setattr(slurm, "SACCT_POLL_S", 0.05)
    sacct, data = _Sacct(), tmp_path / "d"
    jobs = [_Job(sacct, f"79_{i}", None) for i in range(3)]
    tasks, leases = _running(backend, data, jobs)
    try:
        t0 = time.monotonic()
        backend.close()
        assert time.monotonic() - t0 < 2.0
        assert all(_holder(data, t.run_id) == t.nonce for t in tasks)
        # One sacct call a round for all three jobs (about 0.3 / 0.05 rounds), not one per job.
        assert 2 <= sacct.calls <= 9, sacct.calls
    finally:
        for lease in leases:
            lease.release()


@pytest.mark.parametrize("squeue", ["completing", "no-answer"])
def test_a_job_squeue_still_lists_keeps_its_lease_though_sacct_says_cancelled(
    backend: SlurmBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, squeue: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """sacct reads CANCELLED once the cancel lands; the job's processes may run on
    (COMPLETING) for up to KillWait, and squeue lists it until they are gone."""
    from runners.backends import slurm

    sacct, data = _Sacct(), tmp_path / "d"
    job = _Job(sacct, "80_0", 1)
    (task,), leases = _running(backend, data, [job])
    held: list[str | None] = []

    def listed() -> set[str] | None:
        held.append(_holder(data, task.run_id))
        if squeue == "no-answer":
            return None
        return {"80_0", "99_1"} if len(held) <= 3 else {"99_1"}

    monkeypatch.setattr(slurm, "_listed", listed)
    if squeue == "no-answer":
        monkeypatch.setattr(slurm, "CANCEL_GRACE_S", 0.2)
    try:
        backend.close()
        if squeue == "completing":
            assert held == [task.nonce] * 4 and _holder(data, task.run_id) is None
            assert capsys.readouterr().err == ""
        else:
            assert len(held) >= 2 and _holder(data, task.run_id) == task.nonce
            assert "squeue did not answer" in capsys.readouterr().err
    finally:
        for lease in leases:
            lease.release()


def test_squeue_lists_this_users_job_ids(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """_listed reads squeue's ids (a fake squeue on PATH), and None where there is none."""
    from runners.backends import slurm

    fake = tmp_path / "squeue"
    fake.write_text('#!/bin/sh\nprintf "81_0\\n81_[1-3]\\n  \\n82\\n"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert slurm._listed() == {"81_0", "81_[1-3]", "82"}
    fake.unlink()
    assert slurm._listed() is None
