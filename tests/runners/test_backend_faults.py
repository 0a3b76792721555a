"""The failure contract, run against every backend: crashes, dead workers, retries, timeouts.

tests/runners/test_execute_faults.py covers the full fault set on the local backend; this
file runs a reduced set against each name in ``runners.backends.BACKENDS`` (a new backend
gets the contract for free), through the real sim engine, real workers (spawned processes,
a local Ray, submitit's local executor) and the real store.

Shared by all backends (asserted here):
- an engine exception is a failed record of kind "error", retried once, both attempts kept;
- a worker killed by SIGKILL is a failed record of kind "crash" written by the driver, with
  the partial card from the last progress report; ``Backend.result`` raises ``WorkerLost``
  with a one-line message (the Backend protocol), never the scheduler's own exception;
- a run deaf to its time limit is killed through ``Backend.cancel`` and recorded "timeout";
- a transient failure is one failed attempt, then ok.

Where backends differ (so only the shared contract above is asserted):
- the wording of a lost worker's message: ``local`` sees the process exit ("worker process
  died (killed by signal 9)"), ``ray`` gets a ``WorkerCrashedError`` from ``ray.get``,
  ``slurm`` (submitit) an ``UncompletedJobError`` for a job with no result file;
- how a running task is stopped: ``local`` kills the worker, ``ray`` force-cancels the
  task, ``slurm`` with cluster=local kills the job's process group (on a cluster, scancel);
  the driver writes the "timeout" record ("stopped by the driver");
- how fast a dead job is noticed: submitit waits up to 15 s for a result file (NFS lag) and
  ``SlurmBackend.result`` blocks the driver meanwhile; shortened here (local disk, no lag).
A backend that noticed a dead worker only after its run's limit (plus grace) would fail here
too: the driver's backstop would cancel it first and the attempt would read "timeout".
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from planner.compiler import compile_plan
from planner.engine import ProgressFn
from planner.proposals import make_proposal
from planner.schema import Proposal, RunRecord, run_id_for
from runners.backends import BACKENDS, WorkerLost, driver, make_backend
from runners.engines.sim import SimEngine
from runners.execution import ExecutionResult, execute
from runners.store import PilotStore
from runners.task import ALARM_SIGNAL, Task

FAULTS = ("die", "raise", "flaky", "stuck")
PROPS = [make_proposal(compile_plan("tiny-s", "sparse", 0.70 + 0.02 * i, 1e12)) for i in range(len(FAULTS))]
BY_FAULT = dict(zip(FAULTS, PROPS, strict=True))
ENGINE = f"{__name__}:FaultySim"
# "stuck" runs in its own execute() (its own store), at the same time as the others: it needs
# a small time limit, and a small limit would make the others' timing matter too. The driver
# kills a run deaf to its limit GRACE_S past it, counted from the worker's first progress
# report, which comes *before* the engine is imported: a cold worker (a new process after
# the kill) must start inside TIMEOUT_S + GRACE_S, or it too is killed and read "timeout".
TIMEOUT_S, GRACE_S = 1.0, 5.0
# The others get a limit they never reach on a busy machine, but one that still ends the
# test (as a "timeout" where "crash" was expected) if a backend never notices a dead worker.
LAX_TIMEOUT_S = 30.0
HERE = str(Path(__file__).resolve().parent)

# What each backend needs to run here without a cluster; a backend not listed runs with {}.
OPTIONS: dict[str, dict[str, Any]] = {"slurm": {"cluster": "local", "time_min": 2}}


class FaultySim(SimEngine):
    """The sim engine, but the proposal decides how the run goes wrong."""

    def __init__(self, faults: dict[str, str], marker: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.faults, self.marker = faults, Path(marker)

    def warm_up(self) -> None:
        """Loading the world is not the run's: the small time limit counts from here, so a
        slow start on a loaded machine is not mistaken for a timeout."""

    def run(self, proposal: Proposal, seed: int, progress: ProgressFn | None = None) -> RunRecord:
        assert progress is not None
        fault, b = self.faults.get(proposal.id, "none"), proposal.budget
        if fault == "raise":
            raise ValueError("bad batch")
        if fault == "die":  # what the kernel's OOM killer does: no exception, no record
            progress("search", 5e10, b, {})
            os.kill(os.getpid(), signal.SIGKILL)
        flag = self.marker / f"{proposal.id}-{seed}"
        first = not flag.exists()
        flag.touch()
        if fault == "stuck" and first:  # deaf to the in-worker alarm: only the driver's kill stops it
            # and a process of its own, as DataLoader workers or vLLM's engine are
            child = subprocess.Popen(["sleep", "60"])
            (self.marker / "stuck-child.pid").write_text(str(child.pid))
            signal.pthread_sigmask(signal.SIG_BLOCK, {ALARM_SIGNAL or signal.SIGALRM})
            progress("learning", 1e11, b, {})
            time.sleep(60)  # a backend that cannot stop it would see it time out by itself, late
        if fault == "flaky" and first:
            raise ConnectionError("lost the node")
        return super().run(proposal, seed, progress)


def _available(name: str, mp: pytest.MonkeyPatch) -> Iterator[str]:
    """Set up what ``name`` needs on this machine (or skip); undo it afterwards."""
    # Ray workers and submitit jobs are fresh interpreters: they find this module (the
    # engine's ``module:Class``) through PYTHONPATH, as a user's own engine would.
    mp.setenv("PYTHONPATH", os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH")) if p))
    if name == "slurm":
        submitit = pytest.importorskip("submitit", reason="slurm backend needs submitit (race-planner[slurm])")
        # submitit waits up to 15 s for a finished job's result file (NFS lag on a cluster)
        # before calling it lost, and SlurmBackend.result blocks the driver meanwhile. A local
        # disk has no lag: 1 s keeps each dead job from costing 15 s here.
        mp.setattr(submitit.local.local.LocalJob, "_results_timeout_s", 1, raising=False)
    if name != "ray":
        yield name
        return
    ray = pytest.importorskip("ray", reason="ray backend needs ray (race-planner[ray])")
    # Ray renices its workers (15): next to anything busy at normal priority (the other
    # sessions on a shared CI box) a cold worker then needs many seconds to import the engine,
    # and a stuck run's retry would be killed as stuck too. Fair shares for the test.
    mp.setenv("RAY_worker_niceness", "0")
    started = not ray.is_initialized()
    if started:  # after the env is set: the raylet hands its environment to the workers
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield name
    finally:
        if started:
            ray.shutdown()


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    mp = pytest.MonkeyPatch()
    try:
        yield from _available(request.param, mp)
    finally:
        mp.undo()


@dataclass
class Faulted:
    data: Path  # the store of die, raise and flaky
    res: ExecutionResult
    stuck_data: Path  # the store of stuck alone
    stuck_res: ExecutionResult
    backend: str = ""


@pytest.fixture(scope="module")
def faulted(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Faulted:
    root = tmp_path_factory.mktemp(f"faults-{backend}")
    mp = pytest.MonkeyPatch()
    mp.setattr(driver, "HARD_KILL_GRACE_S", GRACE_S)
    opts = {"faults": {p.id: f for f, p in BY_FAULT.items()}, "marker": str(root)}

    def run(props: list[Proposal], name: str, workers: int, timeout_s: float) -> ExecutionResult:
        return execute(props, data=root / name, engine=ENGINE, engine_options=opts, backend=backend,
                       workers=workers, retries=1, timeout_s=timeout_s, show_progress=False,
                       backend_options=_options(backend, root / name))

    try:
        with ThreadPoolExecutor(1) as pool:
            stuck = pool.submit(run, [BY_FAULT["stuck"]], "stuck", 1, TIMEOUT_S)
            res = run([BY_FAULT[f] for f in ("die", "raise", "flaky")], "data", 2, LAX_TIMEOUT_S)
            stuck_res = stuck.result()
    finally:
        mp.undo()
    return Faulted(root / "data", res, root / "stuck", stuck_res, backend)


def _options(name: str, root: Path) -> dict[str, Any]:
    opts = dict(OPTIONS.get(name, {}))
    if name == "slurm":
        opts["folder"] = str(root / ".jobs")
    return opts


def failed(store: PilotStore, fault: str) -> list[RunRecord]:
    rid = run_id_for(BY_FAULT[fault].id, 0)
    return sorted((r for r in store.records(status="failed") if r.run_id == rid), key=lambda r: r.attempt)


def test_each_failure_is_recorded_with_its_kind_and_retried_once(faulted: Faulted) -> None:
    store = PilotStore(faulted.data)
    kinds = {"raise": "error", "die": "crash"}
    for fault, kind in kinds.items():
        recs = failed(store, fault)
        seen = (fault, [(r.attempt, r.error) for r in recs])
        assert [r.attempt for r in recs] == [1, 2], seen  # first try + one retry, both kept
        assert [r.provenance["failure_kind"] for r in recs] == [kind, kind], seen
        assert all(r.error and r.error.startswith(f"{kind}: ") and "\n" not in r.error for r in recs), seen
        assert all(r.run_id == run_id_for(BY_FAULT[fault].id, 0) and r.seed == 0 for r in recs), seen
    assert [r.error for r in failed(store, "raise")] == ["error: ValueError: bad batch"] * 2
    # Exactly one record per attempt: the driver writes one only for a worker that wrote none.
    ids = {f: run_id_for(p.id, 0) for f, p in BY_FAULT.items()}
    got = sorted((r.run_id, r.attempt, r.status) for r in store.records(status=None))
    assert got == sorted([(ids["raise"], 1, "failed"), (ids["raise"], 2, "failed"),
                          (ids["die"], 1, "failed"), (ids["die"], 2, "failed"),
                          (ids["flaky"], 1, "failed"), (ids["flaky"], 2, "ok")])
    assert store.corrupt() == []
    # The dead worker's records, written by the driver, name the engine's world like the
    # rest: `planner race` checks every record's source before it resumes on this store.
    world = {r.provenance.get("world") for r in store.records(status=None)}
    assert world == {"paper"}, [(r.run_id, r.attempt, r.provenance) for r in store.records(status=None)]


def test_result_lists_the_failed_the_ok_and_every_attempt(faulted: Faulted) -> None:
    res = faulted.res
    hard = {"raise": "error", "die": "crash"}
    seen = [(o.run_id, o.attempt, o.error) for o in res.failed]
    assert res.ok == [run_id_for(BY_FAULT["flaky"].id, 0)], seen
    assert {o.run_id: (o.attempt, o.kind) for o in res.failed} == {
        run_id_for(BY_FAULT[f].id, 0): (2, k) for f, k in hard.items()  # the last attempt is reported
    }
    assert len(res.failed) == len(hard) and res.skipped == []
    assert res.attempts == 6  # every run twice: failed, then failed again or ok


def test_transient_failure_is_one_failed_attempt_then_ok(faulted: Faulted) -> None:
    store = PilotStore(faulted.data)
    flaky = failed(store, "flaky")
    assert [(r.attempt, r.error) for r in flaky] == [(1, "error: ConnectionError: lost the node")]
    (ok,) = store.records(status="ok")
    assert (ok.run_id, ok.attempt, ok.engine) == (run_id_for(BY_FAULT["flaky"].id, 0), 2, "sim")
    assert store.run_ids() == {ok.run_id}  # the surrogate's view: failures never count


def test_partial_compute_card_of_a_dead_worker(faulted: Faulted) -> None:
    store = PilotStore(faulted.data)
    # Written by the driver from the last progress report: the worker died without a record.
    die = failed(store, "die")
    assert [r.card.flops.total for r in die] == [5e10, 5e10]
    assert all(r.card.model_extra and r.card.model_extra["partial"] is True for r in die)
    assert [r.provenance["phase"] for r in die] == ["search", "search"]
    assert not list((faulted.data / ".progress").glob("*.json"))  # no stale progress left behind


def test_a_run_deaf_to_its_limit_is_stopped_through_the_backend(faulted: Faulted) -> None:
    # The driver's backstop calls Backend.cancel on a *running* task.
    store, res, rid = PilotStore(faulted.stuck_data), faulted.stuck_res, run_id_for(BY_FAULT["stuck"].id, 0)
    recs = failed(store, "stuck")
    assert [(r.attempt, r.provenance["failure_kind"]) for r in recs] == [(1, "timeout")], [r.error for r in recs]
    rec = recs[0]
    assert rec.error.startswith("timeout: ") and "\n" not in rec.error
    assert rec.card.flops.total == 1e11 and rec.provenance["phase"] == "learning"  # its last progress
    # Stopped about when the driver gave up on it, not left to sleep out its 60 s.
    assert TIMEOUT_S <= rec.wall_s < TIMEOUT_S + GRACE_S + 10, rec.wall_s
    assert (res.ok, res.failed, res.attempts) == ([rid], [], 2)  # then retried, in a fresh worker
    assert [(r.run_id, r.attempt) for r in store.records()] == [(rid, 2)]
    assert not list((faulted.stuck_data / ".progress").glob("*.json"))
    if faulted.backend in ("local", "slurm"):  # the run's whole process group is killed
        pid = int((faulted.stuck_data.parent / "stuck-child.pid").read_text())
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        assert not _alive(pid), "the stuck run's own process outlived the kill"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie is dead, only not yet reaped


def test_a_dead_worker_is_worker_lost_with_one_line(backend: str, tmp_path: Path) -> None:
    """The Backend protocol itself: ``result`` raises WorkerLost for a worker that died,
    and for a task cancelled before it started."""
    die, queued = BY_FAULT["die"], BY_FAULT["raise"]
    opts = {"faults": {die.id: "die"}, "marker": str(tmp_path)}
    data = tmp_path / "data"
    tasks = [Task(p, 0, 1, ENGINE, str(data), opts, None) for p in (die, queued)]
    be = make_backend(backend, workers=1, data=data, **_options(backend, tmp_path))
    try:
        h_die, h_queued = be.submit(tasks)  # one worker: the second waits for the first
        be.cancel(h_queued)
        deadline = time.monotonic() + 30
        pending = {id(h_die): h_die, id(h_queued): h_queued}
        while pending and time.monotonic() < deadline:
            for k, h in list(pending.items()):
                if be.poll(h):
                    del pending[k]
            time.sleep(0.05)
        assert not pending, "a dead worker's task never finished"
        for h, why in ((h_die, None), (h_queued, "cancelled before it started")):
            with pytest.raises(WorkerLost) as e:
                be.result(h)
            msg = str(e.value)
            assert msg and "\n" not in msg and len(msg) < 300, msg
            if why:
                assert msg == why
    finally:
        be.close()
    # A worker that died wrote nothing (the driver, not used here, would); the cancelled never ran.
    assert PilotStore(data).records(status=None) == []


def test_a_worker_that_dies_after_recording_its_failure_is_counted_once(tmp_path: Path) -> None:
    from runners.backends import Handle
    from runners.backends.driver import Driver
    from runners.task import failed_record

    store = PilotStore(tmp_path / "data")
    task = Task(BY_FAULT["raise"], 0, 1, "sim", str(store.root), {}, None)
    store.add(failed_record(task, "RuntimeError: boom", "error"))  # the worker's own record
    drv = Driver(make_backend("local", workers=1, data=store.root), store, retries=0, timeout_s=None,
                 result=ExecutionResult(), show_progress=False)
    out = drv._lost(Handle(task), WorkerLost("worker process died (exit code 1)"))
    assert out.status == "failed" and "after recording" in (out.error or "")
    assert [(r.run_id, r.attempt) for r in store.records(status="failed")] == [(task.run_id, 1)]


def test_a_silent_worker_loss_after_its_failure_record_is_named_by_its_type(tmp_path: Path) -> None:
    """An exception without a message (EOFError() from a dead pipe) printed as nothing: the
    outcome read " (after recording the attempt as failed)", naming no cause."""
    from runners.backends import Handle
    from runners.backends.driver import Driver
    from runners.task import failed_record

    store = PilotStore(tmp_path / "data")
    task = Task(BY_FAULT["raise"], 0, 1, "sim", str(store.root), {}, None)
    store.add(failed_record(task, "RuntimeError: boom", "error"))
    drv = Driver(make_backend("local", workers=1, data=store.root), store, retries=0, timeout_s=None,
                 result=ExecutionResult(), show_progress=False)
    out = drv._lost(Handle(task), EOFError())
    assert out.error == "EOFError (after recording the attempt as failed)"


def test_a_lost_attempt_is_recorded_though_another_driver_failed_under_its_number(tmp_path: Path) -> None:
    """Two drivers on one store plan the same attempt number; the other's failure recorded
    first was taken for this one's, and this crash went unrecorded (attempts undercounted)."""
    from runners.backends import Handle
    from runners.backends.driver import Driver
    from runners.task import failed_record

    store = PilotStore(tmp_path / "data")
    theirs = Task(BY_FAULT["raise"], 0, 1, "sim", str(store.root), {}, None)
    mine = Task(BY_FAULT["raise"], 0, 1, "sim", str(store.root), {}, None)
    assert theirs.nonce != mine.nonce
    store.add(failed_record(theirs, "RuntimeError: boom", "error"))
    drv = Driver(make_backend("local", workers=1, data=store.root), store, retries=0, timeout_s=None,
                 result=ExecutionResult(), show_progress=False)
    out = drv._lost(Handle(mine), WorkerLost("worker process died (killed by signal 9)"))
    assert out.status == "failed" and out.kind == "crash" and "after recording" not in (out.error or "")
    recs = sorted(store.records(status="failed"), key=lambda r: r.attempt)
    assert [(r.attempt, r.provenance["task"]) for r in recs] == [(1, theirs.nonce), (2, mine.nonce)]
    assert out.attempt == 2  # what the progress line and summary show: the number it took


def test_a_failed_attempt_reports_the_number_its_record_took(tmp_path: Path) -> None:
    """Another driver's failure under the planned number moves this one's record to the
    next; the progress line used to show the planned number (1, 2, 1, 3 for a1-a4)."""
    from runners.task import failed_record, run_task

    store = PilotStore(tmp_path / "data")
    opts = {"faults": {BY_FAULT["raise"].id: "raise"}, "marker": str(tmp_path)}
    theirs = Task(BY_FAULT["raise"], 0, 1, ENGINE, str(store.root), opts, None)
    store.add(failed_record(theirs, "RuntimeError: boom", "error"))
    out = run_task(Task(BY_FAULT["raise"], 0, 1, ENGINE, str(store.root), opts, None))
    assert out.status == "failed" and out.attempt == 2
    assert sorted(r.attempt for r in store.records(status="failed")) == [1, 2]
