"""One run, one runner: the run lease, alone and as run_task and the driver use it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from planner.compiler import compile_plan
from planner.engine import ProgressFn
from planner.proposals import make_proposal
from planner.schema import Proposal, RunRecord, run_id_for
from runners import lease as lease_mod
from runners import task as task_mod
from runners.engines.sim import SimEngine
from runners.lease import RunLease, lease_dir, sweep_leases
from runners.store import PilotStore
from runners.task import Task, run_task

PROP = make_proposal(compile_plan("tiny-s", "sparse", 0.7, 1e12))
RUN = run_id_for(PROP.id, 0)


def _plant(data: Path, *, host: str, pid: int, task: str, age_s: float = 0.0, machine: str | None = None,
           limit_s: float | None = None, since: float = 1.0) -> Path:
    """A lease file as another holder would have left it (on this machine by default)."""
    path = lease_dir(data) / f"{RUN}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"host": host, "pid": pid, "task": task, "limit_s": limit_s, "since": since,
                                "machine": lease_mod.machine_id() if machine is None else machine}))
    if age_s:
        _age(path, age_s)
    return path


def _age(path: Path, age_s: float) -> None:
    t = time.time() - age_s
    os.utime(path, (t, t))


def _task_in(path: Path) -> str:
    return str(json.loads(path.read_text())["task"])


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_one_holder_at_a_time_and_release_frees_the_run(tmp_path: Path) -> None:
    a, b = RunLease(tmp_path, RUN, "a"), RunLease(tmp_path, RUN, "b")
    assert a.try_acquire() is None and a.held
    holder = b.try_acquire()
    assert holder is not None and (holder.host, holder.pid, holder.task) == (socket.gethostname(), os.getpid(), "a")
    assert a.try_acquire() is None  # held already: no second file, no error
    b.release()  # b holds nothing: a's lease stays
    assert b.try_acquire() is not None
    a.release()
    assert b.try_acquire() is None
    b.release()
    assert list(lease_dir(tmp_path).iterdir()) == []  # no temporaries left either


def test_the_limit_restarts_in_the_holders_own_lease(tmp_path: Path) -> None:
    lease = RunLease(tmp_path, RUN, "mine", limit_s=60.0)
    assert lease.try_acquire() is None
    path = lease_dir(tmp_path) / f"{RUN}.json"
    before = json.loads(path.read_text())["since"]
    time.sleep(0.01)
    lease.limit_starts()  # after warm-up
    body = json.loads(path.read_text())
    assert body["since"] > before and body["limit_s"] == 60.0 and body["task"] == "mine"
    lease.release()
    assert not path.exists()


def test_a_limit_restart_never_writes_over_a_lease_taken_in_the_gap(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    lease = RunLease(tmp_path, RUN, "mine", limit_s=60.0)
    assert lease.try_acquire() is None
    path = lease_dir(tmp_path) / f"{RUN}.json"
    real = lease_mod._move_aside

    def broken_then_taken(p: Path, expected: Any) -> bool:
        moved = real(p, expected)
        _plant(tmp_path, host="node-17", pid=1, task="newcomer")  # links its own in the gap
        return moved

    monkeypatch.setattr(lease_mod, "_move_aside", broken_then_taken)
    lease.limit_starts()
    monkeypatch.undo()
    assert _task_in(path) == "newcomer" and not lease.held
    lease.release()  # holds nothing now: the newcomer's lease stays
    assert _task_in(path) == "newcomer"


def test_without_proc_a_pid_proves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Elsewhere than Linux (no boot id or pid namespace to compare), the same host name and
    # a dead pid must not free a run that a holder in another container still runs.
    monkeypatch.setattr(lease_mod, "machine_id", lambda: "/")
    _plant(tmp_path, host=socket.gethostname(), pid=_dead_pid(), task="elsewhere", machine="/")
    assert RunLease(tmp_path, RUN, "mine").try_acquire() is not None


def test_a_waiter_whose_driver_died_stops_waiting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A local worker's parent is its driver: gone, nobody wants the run from this worker.
    monkeypatch.setattr(task_mod, "LEASE_POLL_S", 0.05)
    data = tmp_path / "data"
    held = RunLease(data, RUN, "the-other-driver")
    assert held.try_acquire() is None
    parents = iter([4242, 4242, 1])
    monkeypatch.setattr(task_mod.os, "getppid", lambda: next(parents, 1))
    log = tmp_path / "runs.log"
    out = run_task(Task(PROP, 0, 1, "test_lease:CountingSim", str(data), {"log": str(log), "pause": 0.0}))
    assert out.status == "skipped" and not log.exists()
    held.release()


def test_a_dead_holder_on_this_machine_frees_the_run_at_once(tmp_path: Path) -> None:
    path = _plant(tmp_path, host=socket.gethostname(), pid=_dead_pid(), task="killed")
    lease = RunLease(tmp_path, RUN, "mine")
    assert lease.try_acquire() is None and _task_in(path) == "mine"
    lease.release()


def test_a_dead_pid_on_another_machine_of_the_same_name_is_not_taken_for_dead(tmp_path: Path) -> None:
    # Containers (or a rebooted node) sharing the host name: their pids mean nothing here.
    _plant(tmp_path, host=socket.gethostname(), pid=_dead_pid(), task="container", machine="other-boot/pid:[1]")
    holder = RunLease(tmp_path, RUN, "mine").try_acquire()
    assert holder is not None and holder.task == "container"


def test_a_remote_holder_is_dead_once_its_heartbeat_stops_for_the_ttl_on_the_waiters_clock(tmp_path: Path) -> None:
    # Its mtime is 1000 s behind this clock (skew between nodes): what counts is whether it
    # moves while this waiter watches.
    path = _plant(tmp_path, host="node-17", pid=1, task="remote", age_s=1000)
    lease = RunLease(tmp_path, RUN, "mine", ttl_s=0.3)
    holder = lease.try_acquire()
    assert holder is not None and (holder.host, holder.task) == ("node-17", "remote")
    for i in range(3):  # heartbeats keep it live past the TTL
        time.sleep(0.2)
        _age(path, 1000 - i - 1)
        assert lease.try_acquire() is not None
    time.sleep(0.4)  # no heartbeat for longer than the TTL
    assert lease.try_acquire() is None and _task_in(path) == "mine"
    lease.release()


def test_an_hour_old_lease_is_dead_at_first_sight(tmp_path: Path) -> None:
    _plant(tmp_path, host="node-17", pid=1, task="remote", age_s=7200)
    lease = RunLease(tmp_path, RUN, "mine")
    assert lease.try_acquire() is None
    lease.release()


def test_a_requeued_attempt_retakes_its_own_lease_under_its_new_pid(tmp_path: Path) -> None:
    # A preempted SLURM job comes back with the same nonce: its lease must name the new
    # process, or a waiter would find the old pid dead and run the run beside it.
    path = _plant(tmp_path, host="node-17", pid=4242, task="requeued")
    lease = RunLease(tmp_path, RUN, "requeued")
    assert lease.try_acquire() is None
    assert json.loads(path.read_text())["pid"] == os.getpid()
    assert RunLease(tmp_path, RUN, "other").try_acquire() is not None
    lease.release()
    assert not path.exists()


def test_an_overdue_holder_is_run_beside_and_not_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A holder past its time limit whose driver may be dead (a hung CUDA kernel deaf to its
    # own alarm) would otherwise keep every rerun waiting for ever. It is not the waiter's
    # to kill: the run goes ahead beside it, as it would have without leases.
    monkeypatch.setattr(lease_mod, "overdue_after_s", lambda limit_s: 0.3)
    hung = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        path = _plant(tmp_path, host=socket.gethostname(), pid=hung.pid, task="hung", limit_s=1.0)
        lease = RunLease(tmp_path, RUN, "mine")
        assert lease.try_acquire() is not None  # within its limit: live
        time.sleep(0.4)
        assert lease.try_acquire() is None and _task_in(path) == "mine"
        assert hung.poll() is None
        lease.release()
    finally:
        hung.kill()


def test_the_overdue_clock_starts_with_the_holders_limit_and_a_holder_without_one_is_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its limit starts after warm-up (or anew for a requeued job): the waiter's clock
    # restarts with it. A holder without a limit may legitimately run for days.
    monkeypatch.setattr(lease_mod, "overdue_after_s", lambda limit_s: 0.5)
    path = _plant(tmp_path, host="node-17", pid=1, task="warming", limit_s=1.0, since=1.0)
    unlimited = _plant(tmp_path / "b", host="node-17", pid=1, task="no-limit")
    lease, patient = RunLease(tmp_path, RUN, "mine"), RunLease(tmp_path / "b", RUN, "mine")
    assert lease.try_acquire() is not None and patient.try_acquire() is not None
    time.sleep(0.35)
    _plant(tmp_path, host="node-17", pid=1, task="warming", limit_s=1.0, since=2.0)  # its limit starts now
    for _ in range(3):  # 0.8 s after the holder was first seen, 0.45 s after its limit started
        time.sleep(0.15)
        _age(path, 0)
        _age(unlimited, 0)
        assert lease.try_acquire() is not None and patient.try_acquire() is not None
    time.sleep(0.35)
    _age(path, 0)
    _age(unlimited, 0)
    assert lease.try_acquire() is None  # past 0.5 s since its limit started
    assert patient.try_acquire() is not None
    lease.release()


def test_a_waiter_never_removes_a_lease_that_replaced_the_one_it_looked_at(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # The holder releases between the waiter's failed link and its read, and a second waiter
    # takes the run in that gap: the first must wait for the second, not delete its lease.
    path = _plant(tmp_path, host="node-17", pid=1, task="holder")
    real_read, raced = lease_mod._read, []

    def racing_read(p: Path) -> Any:
        if p == path and not raced:
            raced.append(1)
            path.unlink()  # released...
            _plant(tmp_path, host="node-18", pid=2, task="second")  # ...and taken
            return None
        return real_read(p)

    monkeypatch.setattr(lease_mod, "_read", racing_read)
    holder = RunLease(tmp_path, RUN, "first").try_acquire()
    assert holder is not None and _task_in(path) == "second"


def test_a_breaker_puts_back_a_lease_that_is_not_exactly_the_one_it_judged(tmp_path: Path) -> None:
    # Two breakers saw the same dead lease; the first broke it and took the run. The second
    # then moves the first one's lease aside, or a requeued incarnation's (same nonce,
    # another pid): it must restore it, not take the run too.
    path = _plant(tmp_path, host="node-17", pid=1, task="winner")
    assert lease_mod._move_aside(path, lease_mod.Holder("node-17", 1, "stale-one", 1.0)) is False
    assert lease_mod._move_aside(path, lease_mod.Holder("node-17", 2, "winner", 1.0)) is False
    assert _task_in(path) == "winner"
    assert [p.name for p in lease_dir(tmp_path).iterdir()] == [path.name]


def test_the_heartbeat_survives_a_missed_beat_and_never_touches_anothers_lease(tmp_path: Path) -> None:
    lease = RunLease(tmp_path, RUN, "mine", heartbeat_s=0.05)
    assert lease.try_acquire() is None
    path = lease_dir(tmp_path) / f"{RUN}.json"
    aside = path.with_name("aside")
    os.rename(path, aside)  # a racing breaker's check of it: beats meanwhile fail
    time.sleep(0.15)
    os.rename(aside, path)
    _age(path, 1000)
    time.sleep(0.3)
    assert time.time() - path.stat().st_mtime < 1.0
    path.unlink()  # broken (it stalled past the TTL) and taken by another
    other = _plant(tmp_path, host="node-17", pid=1, task="other", age_s=1000)
    time.sleep(0.3)
    assert time.time() - other.stat().st_mtime > 900  # its own heartbeat, not ours, keeps it
    lease.release()
    assert _task_in(other) == "other"


def test_a_foreign_file_in_the_lease_slot_waits_while_young_and_goes_when_old(tmp_path: Path) -> None:
    path = lease_dir(tmp_path) / f"{RUN}.json"
    path.parent.mkdir(parents=True)
    path.write_text("not json")
    lease = RunLease(tmp_path, RUN, "mine", ttl_s=60)
    assert lease.try_acquire() is not None
    _age(path, 120)
    assert lease.try_acquire() is None
    lease.release()


def test_no_lease_written_still_waits_for_a_live_one_and_otherwise_runs_unguarded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: Any, tmp: Path) -> Any:
        raise PermissionError(13, "Permission denied", str(tmp))

    monkeypatch.setattr(RunLease, "_write", refuse)
    lease = RunLease(tmp_path, RUN, "mine")
    assert lease.try_acquire() is None and not lease.held  # nobody holds it: unguarded
    _plant(tmp_path, host="node-17", pid=1, task="theirs")
    holder = lease.try_acquire()
    assert holder is not None and holder.task == "theirs"


def test_racing_takers_get_exactly_one_lease(tmp_path: Path) -> None:
    leases = [RunLease(tmp_path, RUN, f"t{i}") for i in range(16)]
    results: list[Any] = [None] * len(leases)
    start = threading.Barrier(len(leases))

    def take(i: int) -> None:
        start.wait()
        results[i] = leases[i].try_acquire()

    threads = [threading.Thread(target=take, args=(i,)) for i in range(len(leases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, r in enumerate(results) if r is None]
    assert len(winners) == 1
    assert {r.task for r in results if r is not None} == {f"t{winners[0]}"}
    leases[winners[0]].release()


def test_sweep_removes_only_idle_leases_and_leftovers(tmp_path: Path) -> None:
    _plant(tmp_path, host="node-17", pid=1, task="old", age_s=7200)
    fresh = lease_dir(tmp_path) / "other-run.json"
    fresh.write_text("{}")
    leftover = lease_dir(tmp_path) / ".x.json.0123.tmp"
    leftover.write_text("{}")
    _age(leftover, 7200)
    assert sweep_leases(tmp_path) == 2
    assert [p.name for p in lease_dir(tmp_path).iterdir()] == ["other-run.json"]


class CountingSim(SimEngine):
    """The sim engine, logging each run it starts; the first run logged takes ``pause``
    seconds, later ones 0.1 s (long enough to be caught running, no longer)."""

    def __init__(self, log: str, pause: float = 1.0, **kw: Any) -> None:
        super().__init__(**kw)
        self.log, self.pause = Path(log), float(pause)

    def run(self, proposal: Proposal, seed: int, progress: ProgressFn | None = None) -> RunRecord:
        pause = self.pause if not self.log.exists() else 0.1
        with self.log.open("a") as f:
            f.write(f"{run_id_for(proposal.id, seed)} {os.getpid()}\n")
        for i in range(10):
            time.sleep(pause / 10)
            if progress is not None:
                progress("search", proposal.budget * i / 10, proposal.budget, {})
        return super().run(proposal, seed, progress)


def test_two_attempts_at_one_run_run_it_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two drivers' attempts at the same run: the second waits for the first's lease, then
    # finds its record and skips. Without the lease both ran it (the store kept one record).
    monkeypatch.setattr(task_mod, "LEASE_POLL_S", 0.05)
    log = tmp_path / "runs.log"
    opts = {"log": str(log), "pause": 0.6}
    tasks = [Task(PROP, 0, 1, "test_lease:CountingSim", str(tmp_path / "data"), opts) for _ in range(2)]
    outs: list[Any] = [None, None]

    def go(i: int) -> None:
        outs[i] = run_task(tasks[i])

    first = threading.Thread(target=go, args=(0,))
    first.start()
    while not log.exists():
        time.sleep(0.01)
    go(1)
    first.join()
    assert sorted(o.status for o in outs) == ["ok", "skipped"]
    assert len(log.read_text().splitlines()) == 1
    assert PilotStore(tmp_path / "data").run_ids() == {RUN}
    assert not any(lease_dir(tmp_path / "data").iterdir())
    assert not any((tmp_path / "data" / ".progress").iterdir())


def test_an_attempt_whose_holder_failed_runs_the_run_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(task_mod, "LEASE_POLL_S", 0.05)
    data = tmp_path / "data"
    held = RunLease(data, RUN, "the-other-driver")
    assert held.try_acquire() is None
    log = tmp_path / "runs.log"
    t = Task(PROP, 0, 1, "test_lease:CountingSim", str(data), {"log": str(log), "pause": 0.0})
    threading.Timer(0.4, held.release).start()  # it failed: no record, lease given up
    t0 = time.monotonic()
    out = run_task(t)
    assert out.status == "ok" and time.monotonic() - t0 >= 0.35
    assert len(log.read_text().splitlines()) == 1


HERE = Path(__file__).parent


def test_a_rerun_after_sigkill_waits_for_the_orphan_instead_of_running_its_run_again(tmp_path: Path) -> None:
    # SIGKILL the driver while its worker is inside a run; rerun at once. The orphaned
    # worker finishes that run (6 s: longer than the rerun takes to start its worker, even
    # on a loaded box); the rerun's worker waits on its lease and skips it.
    from planner.proposals import write_proposals

    props = [make_proposal(compile_plan("tiny-s", "sparse", 0.66 + 0.03 * i, 1e12)) for i in range(2)]
    path = write_proposals(tmp_path / "proposals.json", props)
    data, log = tmp_path / "data", tmp_path / "runs.log"
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    args = [sys.executable, "-c", "from runners.cli import main; main()", "execute", str(path), "--data", str(data),
            "--engine", "test_lease:CountingSim", "-o", f"log={log}", "-o", "pause=6",
            "--workers", "1", "--json"]
    first = subprocess.Popen(args, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not log.exists():
        time.sleep(0.02)
    assert log.exists(), first.communicate()
    first.kill()
    first.wait()
    assert PilotStore(data).run_ids() == set()  # the orphan's run is still in flight
    second = subprocess.run(args, env=env, text=True, capture_output=True, timeout=120)
    assert second.returncode == 0, second.stderr
    summary = json.loads(second.stdout)
    assert (summary["ok"], summary["skipped"]) == (1, 1), summary
    assert summary["attempts"] == 1  # the run only waited for is no attempt of this call
    started = [line.split()[0] for line in log.read_text().splitlines()]
    assert sorted(started) == sorted(run_id_for(p.id, 0) for p in props)  # each run ran once
    assert PilotStore(data).scan(status=None).corrupt == []
    assert not any(lease_dir(data).iterdir())


class _Backend:
    """What the driver's per-handle steps use of a backend: a cancel log and one result."""

    name = "fake"

    def __init__(self, result: BaseException | None = None) -> None:
        self.cancelled: list[Any] = []
        self._result = result

    def cancel(self, handle: Any) -> None:
        self.cancelled.append(handle)

    def result(self, handle: Any) -> Any:
        assert self._result is not None
        raise self._result


def _driver(data: Path, backend: _Backend, timeout_s: float | None = None) -> Any:
    from runners.backends.driver import Driver
    from runners.backends.progress import RunView
    from runners.execution import ExecutionResult

    d = Driver(backend, PilotStore(data), retries=0, timeout_s=timeout_s,  # type: ignore[arg-type]
               result=ExecutionResult(), show_progress=False)
    d.views[RUN], d.tries[RUN] = RunView(RUN, 1, budget=PROP.budget), 0
    return d


def test_the_driver_shows_a_waiting_attempt_and_does_not_time_it_out(tmp_path: Path) -> None:
    from runners.backends import Handle
    from runners.backends.progress import ProgressFile, render

    t = Task(PROP, 0, 1, "sim", str(tmp_path))
    prog = ProgressFile(tmp_path, RUN, 1, t.nonce, started=time.time() - 3600)
    prog.update("waiting", 0.0, PROP.budget, {"holder": "node-17 pid 4242"})
    backend = _Backend()
    d = _driver(tmp_path, backend, timeout_s=1.0)
    h = Handle(t)
    d._watch(h)
    assert not backend.cancelled and not h.timed_out
    assert (d.views[RUN].state, d.views[RUN].phase) == ("waiting", "on node-17 pid 4242")
    prog.update("search", 1e11, PROP.budget, {}, force=True)  # its own run, started an hour ago
    d.timeout_s = 7200.0
    d._watch(h)
    assert d.views[RUN].state == "running" and not backend.cancelled
    prog.clear()  # swept by another driver's execute (an hour without a report)
    d.timeout_s = 1.0
    d._watch(h)  # the backstop still counts from the start it saw
    assert backend.cancelled == [h] and h.timed_out
    from rich.console import Console

    console = Console(width=160, record=True)
    console.print(render([d.views[RUN]], {"waiting": 1}, 1))
    assert "1 waiting on another driver" in console.export_text()


def test_a_lost_worker_gives_up_its_lease_for_the_retry(tmp_path: Path) -> None:
    # On another node a dead worker's lease would hold the run for the lease's TTL; the
    # driver, which knows it is dead, releases it (by the attempt's nonce).
    from runners.backends import Handle, WorkerLost

    t = Task(PROP, 0, 1, "sim", str(tmp_path))
    _plant(tmp_path, host="node-17", pid=4242, task=t.nonce)
    d = _driver(tmp_path, _Backend(WorkerLost("slurm ended job 7 as NODE_FAIL")))
    assert d._finish(Handle(t)) is None
    assert not (lease_dir(tmp_path) / f"{RUN}.json").exists()
    [failed] = PilotStore(tmp_path).records(status="failed")
    assert failed.provenance["task"] == t.nonce


def test_a_log_line_prints_an_error_with_brackets_as_it_is(tmp_path: Path) -> None:
    # Rich read "[/scratch/...]" in an error as closing markup and crashed the driver loop.
    import io

    from rich.console import Console

    from runners.task import Outcome

    d = _driver(tmp_path, _Backend())
    buf = io.StringIO()
    d._log = Console(file=buf, width=200)
    err = "error: RuntimeError: cannot read [/scratch/ckpt/m.safetensors] [enforce fail]"
    d.views[RUN].state = "failed"
    d._say(d.views[RUN], Outcome(RUN, "failed", 1, err, "error"))
    assert "[/scratch/ckpt/m.safetensors] [enforce fail]" in buf.getvalue()
