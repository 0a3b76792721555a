"""The three backends run real sim proposals into a real store; optional extras fail cleanly."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import polars as pl
import pytest

from planner.compiler import compile_plan
from planner.errors import ConfigError
from planner.proposals import make_proposal
from planner.schema import run_id_for
from runners.backends import make_backend
from runners.execution import execute
from runners.store import PilotStore

PROPS = [
    make_proposal(compile_plan(m, r, rho, 1e12))
    for m, r, rho in [("tiny-s", "sparse", 0.7), ("tiny-s", "prm", 0.6), ("tiny-m", "dense", 0.75), ("tiny-m", "sparse", 0.8)]
]


def check(data: Path, seeds: int = 1) -> PilotStore:
    store = PilotStore(data)
    recs = store.records()
    assert sorted(r.run_id for r in recs) == sorted(run_id_for(p.id, s) for p in PROPS for s in range(seeds))
    assert all(r.status == "ok" and r.engine == "sim" and r.simulated for r in recs)
    assert store.records(status="failed") == [] and store.corrupt() == []
    assert pl.read_parquet(str(data / "runs" / "*.parquet")).height == len(PROPS) * seeds
    return store


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    # One small local Ray for the module: start-up is the slow part.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ray_backend_runs_four_sim_proposals(local_ray, tmp_path: Path) -> None:
    res = execute(PROPS, data=tmp_path, engine="sim", backend="ray", workers=2, show_progress=False)
    assert len(res.ok) == 4 and not res.failed
    check(tmp_path)
    assert local_ray.is_initialized()  # a Ray it did not start is left running


def test_ray_rerun_skips_and_adds_seed(local_ray, tmp_path: Path) -> None:
    execute(PROPS[:2], data=tmp_path, engine="sim", backend="ray", workers=2, show_progress=False)
    res = execute(PROPS, data=tmp_path, engine="sim", backend="ray", workers=2, seeds=2, show_progress=False)
    assert len(res.skipped) == 2 and len(res.ok) == 6
    check(tmp_path, seeds=2)


def test_slurm_backend_through_submitit_local_executor(tmp_path: Path) -> None:
    pytest.importorskip("submitit")
    res = execute(PROPS, data=tmp_path / "d", engine="sim", backend="slurm", workers=4,
                  backend_options={"cluster": "local", "time_min": 5, "folder": str(tmp_path / "jobs")},
                  show_progress=False)
    assert len(res.ok) == 4 and not res.failed
    check(tmp_path / "d")
    assert list((tmp_path / "jobs").rglob("*_result.pkl"))  # really went through submitit jobs


def test_local_backend_two_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runners.backends.local import LocalBackend

    spawned: list[int] = []
    real_spawn = LocalBackend._spawn

    def counting_spawn(self: LocalBackend, device: str | None):  # type: ignore[no-untyped-def]
        w = real_spawn(self, device)
        spawned.append(w.proc.pid)
        return w

    monkeypatch.setattr(LocalBackend, "_spawn", counting_spawn)
    res = execute(PROPS, data=tmp_path, engine="sim", backend="local", workers=2, show_progress=False)
    assert len(res.ok) == 4 and not res.failed
    check(tmp_path)
    assert len(set(spawned)) == 2  # two worker processes shared the four runs


def test_missing_optional_extra_is_one_clear_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "submitit", None)  # as if not installed
    with pytest.raises(ConfigError) as e:
        make_backend("slurm", data=tmp_path)
    msg = str(e.value)
    assert "\n" not in msg and "submitit" in msg and "race-planner[slurm]" in msg


@pytest.mark.parametrize(
    ("name", "opts", "field"),
    [
        ("slurm", {"time_min": 0}, "time_min"),
        ("slurm", {"cluster": "pbs"}, "cluster"),
        ("slurm", {"extra": {"account": "x"}}, "extra"),
        ("ray", {"gpus_per_run": -1}, "gpus_per_run"),
        ("local", {"nodes": 3}, "nodes"),
        ("mpi", {}, "backend"),
    ],
)
def test_bad_backend_options_name_their_field(name: str, opts: dict, field: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=field):
        make_backend(name, data=tmp_path, **opts)


def test_a_slurm_extra_key_names_both_prefixes_it_takes() -> None:
    from runners.backends.config import SlurmOptions

    # local_ keys pass (submitit's local executor reads them under cluster = "local"), so
    # the refusal must not tell a user that slurm_ is the only prefix.
    assert SlurmOptions(extra={"local_signal_delay_s": 10}).extra == {"local_signal_delay_s": 10}
    with pytest.raises(ValueError, match=r"must start with slurm_ \(or local_ for cluster"):
        SlurmOptions(extra={"account": "x"})


@pytest.mark.skipif(shutil.which("sbatch") is not None, reason="this machine has SLURM")
def test_slurm_without_slurm_is_refused_not_run_locally(tmp_path: Path) -> None:
    pytest.importorskip("submitit")
    with pytest.raises(ConfigError, match=r'no sbatch on PATH.*cluster = "local"'):
        make_backend("slurm", data=tmp_path)
    # submitit makes its folder at once: a refused backend left DIR/.submitit (and DIR).
    with pytest.raises(ConfigError, match="no sbatch on PATH"):
        make_backend("slurm", data=tmp_path / "store")
    assert not (tmp_path / "store").exists() and not (tmp_path / ".submitit").exists()


def test_cuda_without_gpus_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(ConfigError, match="device"):
        make_backend("local", engine_options={"device": "cuda"})


def test_one_worker_per_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from runners.backends.local import LocalBackend

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    be = make_backend("local", workers=4, engine_options={"device": "cuda"})
    assert isinstance(be, LocalBackend) and be._devices == ["3", "5"]  # capped, one each
    be.close()


def test_fresh_process_per_run_never_loses_a_task(tmp_path: Path) -> None:
    # GPU mode recycles each worker after one run; the driver once handed the next task to
    # a worker that was about to exit, and that run was recorded as a crash.
    from runners.backends.local import LocalBackend

    be = LocalBackend(1, max_tasks_per_worker=1)
    res = execute(PROPS, data=tmp_path, engine="sim", backend=be, retries=0, show_progress=False)
    be.close()
    assert len(res.ok) == 4 and not res.failed
    check(tmp_path)


class _EndedJob:
    """What SlurmBackend.result reads of a submitit job; ``result()`` stands for submitit's
    wait for the result file (15 s on a cluster before it gives up)."""

    def __init__(self, state: str, pickle: Path) -> None:
        self.state, self.job_id = state, "4242_3"
        self.paths = type("Paths", (), {"result_pickle": pickle})()
        self.waited = False

    def result(self) -> str:
        self.waited = True
        return "outcome"


@pytest.mark.parametrize("state", ["OUT_OF_MEMORY", "NODE_FAIL", "CANCELLED by 1234", "TIMEOUT"])
def test_slurm_job_killed_from_outside_is_lost_without_the_result_file_wait(
    tmp_path: Path, state: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("submitit")
    from runners.backends import Handle, WorkerLost, slurm

    monkeypatch.setattr(slurm, "RESULT_GRACE_S", 0.3)
    backend = slurm.SlurmBackend(folder=tmp_path / "jobs", cluster="local")
    job = _EndedJob(state, tmp_path / "none_result.pkl")
    t0 = time.monotonic()
    with pytest.raises(WorkerLost, match=f"slurm ended job 4242_3 as {state} \\(no result written\\)"):
        backend.result(Handle(task=None, ref=job))  # type: ignore[arg-type]
    assert not job.waited and time.monotonic() - t0 < 3.0


def test_slurm_killed_job_whose_result_shows_up_late_still_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NFS lag: the result file written just before the kill appears within the grace."""
    pytest.importorskip("submitit")
    import threading

    from runners.backends import Handle, slurm

    monkeypatch.setattr(slurm, "RESULT_GRACE_S", 5.0)
    backend = slurm.SlurmBackend(folder=tmp_path / "jobs", cluster="local")
    late = tmp_path / "late_result.pkl"
    job = _EndedJob("TIMEOUT", late)
    threading.Timer(0.5, late.write_bytes, args=(b"x",)).start()
    assert backend.result(Handle(task=None, ref=job)) == "outcome" and job.waited  # type: ignore[arg-type]


@pytest.mark.parametrize("state", ["COMPLETED", "FAILED", "RUNNING", "UNKNOWN", "FINISHED", "INTERRUPTED"])
def test_slurm_job_that_may_still_write_its_result_is_waited_for(tmp_path: Path, state: str) -> None:
    pytest.importorskip("submitit")
    from runners.backends import Handle
    from runners.backends.slurm import SlurmBackend

    backend = SlurmBackend(folder=tmp_path / "jobs", cluster="local")
    job = _EndedJob(state, tmp_path / "none_result.pkl")
    assert backend.result(Handle(task=None, ref=job)) == "outcome" and job.waited  # type: ignore[arg-type]
    # a kill that came after the run wrote its result: the result counts
    (tmp_path / "done_result.pkl").write_bytes(b"x")
    late = _EndedJob("OUT_OF_MEMORY", tmp_path / "done_result.pkl")
    assert backend.result(Handle(task=None, ref=late)) == "outcome" and late.waited  # type: ignore[arg-type]


def test_a_worker_that_dies_before_taking_its_task_loses_nothing() -> None:
    """A worker can die between the liveness check and the send: the task goes back to the
    queue (it once raised BrokenPipeError out of the driver)."""
    from runners.backends.local import LocalBackend, _Worker

    class Proc:
        exitcode = -9

        def __init__(self) -> None:
            self.alive = True

        def is_alive(self) -> bool:
            return self.alive

        def join(self, timeout: float | None = None) -> None:
            pass

        def kill(self) -> None:
            self.alive = False

    class Conn:
        def __init__(self, proc: Proc) -> None:
            self.proc = proc

        def send(self, obj: object) -> None:
            self.proc.alive = False
            raise BrokenPipeError(32, "Broken pipe")

        def poll(self) -> bool:
            return False

        def close(self) -> None:
            pass

    be = LocalBackend(workers=1)
    spawned: list[Proc] = []

    def spawn(device: str | None) -> _Worker:
        spawned.append(Proc())
        return _Worker(spawned[-1], Conn(spawned[-1]), device)  # type: ignore[arg-type]

    be._spawn = spawn  # type: ignore[method-assign]
    (h,) = be.submit(["a task"])  # type: ignore[list-item]
    assert list(be._queue) == [h] and not be.poll(h)  # queued again, not lost, not failed
    assert len(spawned) == 2  # the dead worker was replaced on the next poll


def test_cuda_n_pins_a_local_worker_to_gpu_n_which_it_runs_as_cuda(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker sees its one GPU as device 0: the engine got "cuda:1" there (an invalid
    ordinal), and the pool pinned workers to any visible GPU but the one asked for."""
    import threading
    from multiprocessing import Pipe

    import runners.task as task_mod
    from runners.backends.local import _worker_main
    from runners.task import Task

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # GPU 1 is one this process may use
    be = make_backend("local", workers=2, data=tmp_path, engine_options={"device": "cuda:1"})
    assert be._devices == ["1"]  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="device: cuda:1 names a GPU of this machine, but the ray scheduler"):
        make_backend("ray", workers=2, data=tmp_path, engine_options={"device": "cuda:1"})
    with pytest.raises(ConfigError, match=r"device: cuda:1 and \[local\].devices \['0'\] disagree"):
        make_backend("local", workers=2, data=tmp_path, engine_options={"device": "cuda:1"}, devices=["0"])

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the worker sets it; restored after the test
    seen: list[str] = []
    monkeypatch.setattr(task_mod, "run_task", lambda t: seen.append(t.engine_options["device"]) or "done")
    parent, child = Pipe()
    worker = threading.Thread(target=_worker_main, args=(child, "1", 1))
    worker.start()
    parent.send(Task(make_proposal(compile_plan("tiny-s", "sparse", 0.5, 1e11)), 0, 1, "sim", str(tmp_path),
                     {"device": "cuda:1"}))
    assert parent.recv() == "done"
    worker.join(timeout=10)
    assert seen == ["cuda"]


def test_a_misspelt_slurm_extra_key_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("submitit")
    with pytest.raises(ConfigError, match=r"^extra: submitit refused the slurm parameters \(Unknown argument "
                                          r"'acount'") as info:
        make_backend("slurm", workers=1, data=tmp_path, extra={"slurm_acount": "rl"}, cluster="local")
    assert "\n" not in str(info.value)


def test_a_backend_that_cannot_start_is_refused_before_the_engine_is_prepared(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The trl engine's preparation pretrains for minutes: a missing sbatch was found after it."""
    import runners.execution as ex

    prepared: list[object] = []
    monkeypatch.setattr(ex, "prepare_engine", lambda eng, settings: prepared.append(settings))
    monkeypatch.setattr(shutil, "which", lambda name: None)  # no sbatch on PATH
    with pytest.raises(ConfigError, match="no SLURM here"):
        execute(PROPS, data=tmp_path / "d", engine="sim", backend="slurm", show_progress=False)
    assert prepared == []


class _SlowExit:
    """A sim engine whose run leaves a thread that holds its worker's exit for 3 s (as CUDA
    or vLLM teardown can)."""

    name = "slow-exit"
    simulated = True

    def __init__(self) -> None:
        from runners.engines.sim import SimEngine

        self._sim = SimEngine()

    def run(self, proposal, seed, progress=None):  # type: ignore[no-untyped-def]
        import threading

        threading.Thread(target=time.sleep, args=(3.0,), daemon=False).start()
        return self._sim.run(proposal, seed, progress)


def test_a_worker_slow_to_retire_does_not_stall_the_driver_loop(tmp_path: Path) -> None:
    # A worker recycled after its run once got a 30 s join inside poll(): meanwhile no other
    # slot's result was collected and no time limit enforced.
    from runners.backends.local import LocalBackend
    from runners.task import Task

    be = LocalBackend(2, max_tasks_per_worker=1)
    try:
        tasks = [Task(p, 0, 1, "test_backends:_SlowExit", str(tmp_path)) for p in PROPS[:3]]
        handles = be.submit(tasks)
        slowest = 0.0
        deadline = time.monotonic() + 60
        while not all(id(h) in be._done for h in handles) and time.monotonic() < deadline:
            t0 = time.monotonic()
            for h in handles:
                be.poll(h)
            slowest = max(slowest, time.monotonic() - t0)
            time.sleep(0.05)
        outs = [be.result(h) for h in handles]
    finally:
        be.close()
    assert [o.status for o in outs] == ["ok"] * 3
    assert slowest < 1.5, slowest  # each poll returns at once; the retiring workers exit meanwhile


def test_a_named_gpu_this_process_cannot_see_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """cuda:N (or [local].devices) pins a worker to GPU N: one that is not visible would
    fail every run, and with none visible at all the runs failed as "not compiled with CUDA"."""
    from planner.errors import ConfigError
    from runners.backends import make_backend

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with pytest.raises(ConfigError, match=r"GPU 3 is not visible here \(visible: 0, 1\)"):
        make_backend("local", engine_options={"device": "cuda:3"})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(ConfigError, match="no GPU is visible; use --device cpu"):
        make_backend("local", engine_options={"device": "cuda:0"})


def test_gpu_devices_for_runs_on_the_cpu_are_refused() -> None:
    """[local].devices without --device cuda used to be ignored without a word: runs meant
    for GPUs trained on the CPU."""
    from runners.backends import make_backend

    with pytest.raises(ConfigError, match=r"^devices: \[local\]\.devices \['0', '1'\] pins GPUs, but the runs "
                                          r"are on the cpu; pass --device cuda"):
        make_backend("local", devices=["0", "1"], engine_options={"device": "cpu"})
    with pytest.raises(ConfigError, match=r"^devices: "):
        make_backend("local", devices=["0"])


def test_gpu_devices_are_ignored_for_a_simulated_engine(tmp_path: Path) -> None:
    """A backend config's [local].devices does not concern the sim engine, which ignores the
    device and runs on no GPU: the refusal of devices on the cpu refused every sim run under
    a shared backend.toml, and its fix (--device cuda) the sim refuses in turn."""
    res = execute(PROPS[:2], data=tmp_path, engine="sim", backend="local", workers=2, show_progress=False,
                  backend_options={"devices": ["0", "1"]})
    assert len(res.ok) == 2


def test_ray_on_this_machine_without_a_gpu_refuses_cuda(local_ray, tmp_path: Path) -> None:
    """A task asking Ray for a GPU the local Ray does not have waits forever, silently."""
    if local_ray.cluster_resources().get("GPU", 0):
        pytest.skip("this machine's Ray has a GPU")
    with pytest.raises(ConfigError, match="each run asks Ray for 1 GPU but this machine's Ray has 0"):
        make_backend("ray", data=tmp_path, engine_options={"device": "cuda"})
    assert local_ray.is_initialized()  # a Ray it did not start is left running


def test_ray_on_this_machine_refuses_more_cpus_per_run_than_it_has(local_ray, tmp_path: Path) -> None:
    """As for GPUs: a task asking the local Ray (2 CPUs here) for 3 would wait forever."""
    with pytest.raises(ConfigError, match=r"^cpus-per-run: each run asks Ray for 3 CPUs but this machine's Ray has 2;"):
        make_backend("ray", data=tmp_path, cpus_per_run=3)
    assert local_ray.is_initialized()
    make_backend("ray", data=tmp_path, cpus_per_run=2).close()  # all it has is allowed


def _fake_slurm_commands(bin_dir: Path, sbatch_body: str) -> None:
    """``srun`` and ``sbatch`` scripts, so that submitit takes this machine for a SLURM login node."""
    bin_dir.mkdir()
    for name, body in (("srun", "exit 0"), ("sbatch", sbatch_body)):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)


def test_a_job_sbatch_refuses_is_one_line_and_records_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sbatch refuses what only the cluster can check (a partition or account it does not
    know, a time limit past the partition's): that was submitit's FailedJobError, a
    traceback and exit 1, after the engine's preparation. Now one line with sbatch's own
    words (submitit echoes them above it), exit 2, no record."""
    pytest.importorskip("submitit")
    from typer.testing import CliRunner

    from planner.proposals import write_proposals
    from runners.cli import app

    _fake_slurm_commands(tmp_path / "bin", 'echo "sbatch: error: invalid partition specified: gpuu" >&2\n'
                         'echo "sbatch: error: Batch job submission failed: Invalid partition name specified" >&2\n'
                         "exit 1")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(ConfigError, match=r"^backend: sbatch refused the jobs \(sbatch: error: invalid partition "
                                          r"specified: gpuu sbatch: error: Batch job submission failed") as info:
        execute(PROPS, data=tmp_path / "d", engine="sim", backend="slurm", workers=2,
                backend_options={"partition": "gpuu"}, show_progress=False)
    assert "\n" not in str(info.value) and "--partition" in str(info.value)
    assert PilotStore(tmp_path / "d").records(status=None) == []
    write_proposals(tmp_path / "p.json", PROPS)
    res = CliRunner().invoke(app, ["execute", str(tmp_path / "p.json"), "--data", str(tmp_path / "d"), "--engine",
                                   "sim", "--backend", "slurm", "--partition", "gpuu", "--no-progress"])
    assert res.exit_code == 2, res.output
    assert res.stderr.strip().splitlines()[-1].startswith("error: backend: sbatch refused the jobs (sbatch: error")
    assert "Traceback" not in res.stderr


def test_list_valued_slurm_parameters_reach_the_job_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/execution.md: `extra` takes "any submitit slurm_* parameter". slurm_setup (the
    lines that load modules or a venv before the run), slurm_srun_args and
    slurm_additional_parameters are lists and tables: each was refused as "Input should be
    a valid string (+3 more)". A bare string where submitit wants a list of lines is one
    line that says so."""
    pytest.importorskip("submitit")
    from runners.backends.config import load_backend_config
    from runners.task import Task

    _fake_slurm_commands(tmp_path / "bin", f'cp "$1" {tmp_path / "job.sh"}\necho "Submitted batch job 4242"')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "b.toml").write_text('[slurm]\nextra = { slurm_setup = ["module load cuda/12.4", "source ~/venv/bin/activate"], '
                                     'slurm_srun_args = ["--cpu-bind=none"], '
                                     'slurm_additional_parameters = { reservation = "rl-week" } }\n')
    extra = load_backend_config(tmp_path / "b.toml").slurm.extra
    be = make_backend("slurm", data=tmp_path / "d", extra=extra)
    be.submit([Task(PROPS[0], 0, 1, "sim", str(tmp_path / "d"))])
    script = (tmp_path / "job.sh").read_text()
    assert "module load cuda/12.4\nsource ~/venv/bin/activate\n" in script
    assert "--cpu-bind=none" in script and "#SBATCH --reservation=rl-week" in script
    for key in ("slurm_setup", "local_setup", "slurm_srun_args"):
        with pytest.raises(ConfigError, match=rf"^backend slurm: field 'extra': {key} must be a list of strings") as info:
            make_backend("slurm", data=tmp_path / "d", extra={key: "module load cuda"}, cluster="local")
        assert "\n" not in str(info.value)


def test_a_job_limit_inside_the_run_limit_is_refused(tmp_path: Path) -> None:
    """--time-min 30 with --timeout-min 60: SLURM (or submitit's local executor) killed every
    run at 30 min, before its own limit could record a timeout with its partial card; the
    driver read a lost worker, recorded a crash and retried it, to be killed again."""
    pytest.importorskip("submitit")
    with pytest.raises(ConfigError, match=r"^time-min: a job limit of 30 min ends each run before its own "
                                          r"limit of 60 min \(--timeout-min\)") as info:
        make_backend("slurm", data=tmp_path / "d", time_min=30, timeout_s=3600.0, cluster="local")
    assert "\n" not in str(info.value) and not (tmp_path / "d").exists()
    make_backend("slurm", data=tmp_path / "d", time_min=61, timeout_s=3600.0, cluster="local").close()


@pytest.mark.parametrize("name", ["local", "ray", "slurm"])
def test_every_backend_class_satisfies_the_backend_protocol(name: str) -> None:
    """The contract the driver uses (``runners.backends.Backend``): each class's ``name``
    is the one it is built by, and submit/poll/result/cancel/close take the Protocol's
    parameters (isinstance on the runtime-checkable Protocol checks only that they exist)."""
    import importlib
    import inspect

    from runners.backends import BACKENDS, Backend

    assert name in BACKENDS
    cls = getattr(importlib.import_module(f"runners.backends.{name}"), f"{name.capitalize()}Backend")
    assert cls.name == name
    for method in ("submit", "poll", "result", "cancel", "close"):
        mine = [(p.name, p.kind, p.default) for p in inspect.signature(getattr(cls, method)).parameters.values()]
        theirs = [(p.name, p.kind, p.default) for p in inspect.signature(getattr(Backend, method)).parameters.values()]
        assert mine == theirs, method


def test_a_local_backend_is_a_backend(tmp_path: Path) -> None:
    from runners.backends import Backend

    be = make_backend("local", workers=1, data=tmp_path)
    try:
        assert isinstance(be, Backend) and be.name == "local"
    finally:
        be.close()


def _signals(pid: int) -> dict[str, int]:
    """Bit sets of ``/proc/PID/status`` (SigBlk: blocked, SigCgt: caught) and its pgrp."""
    out = {k: int(v, 16) for k, _, v in (line.partition(":\t") for line in
                                       Path(f"/proc/{pid}/status").read_text().splitlines())
           if k in ("SigBlk", "SigCgt")}
    return out | {"pgrp": int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])}


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the worker's signal state in /proc")
def test_a_ctrl_c_that_reaches_a_starting_worker_is_left_to_the_driver() -> None:
    # Before it has its own process group, a worker is in the terminal's: a Ctrl-C there
    # killed it mid-import with a KeyboardInterrupt traceback. It must instead drop that one
    # and, once started, take SIGINT as any Python process does (a cancel may send one).
    from runners.backends.local import LocalBackend

    be = LocalBackend(1)
    w = be._spawn(None)
    try:
        os.kill(w.proc.pid, signal.SIGINT)  # just exec'd: the imports are all ahead
        deadline = time.monotonic() + 60
        while w.proc.is_alive() and time.monotonic() < deadline:
            state = _signals(w.proc.pid)
            # Its handler too: the worker ignores SIGINT for a moment while it unblocks it.
            if (state["pgrp"] == w.proc.pid and not state["SigBlk"] & (1 << (signal.SIGINT - 1))
                    and state["SigCgt"] & (1 << (signal.SIGINT - 1))):
                break
            time.sleep(0.01)
        assert w.proc.is_alive(), f"the worker died: exit code {w.proc.exitcode}"
        assert state["pgrp"] == w.proc.pid and not state["SigBlk"] & (1 << (signal.SIGINT - 1)), state
        assert state["SigCgt"] & (1 << (signal.SIGINT - 1))  # KeyboardInterrupt, as before
        w.conn.send(None)
        w.proc.join(timeout=30)
        assert w.proc.exitcode == 0
    finally:
        be._kill(w)
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, ())  # the driver's, as it was


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signal masks")
def test_a_ctrl_c_to_the_driver_while_a_worker_starts_is_raised_after_not_lost() -> None:
    from runners.backends.local import _sigint_held

    for send in ("this thread", "the process"):
        # A terminal's Ctrl-C is the process's: the kernel gives it to a thread that does not
        # block it (another one here), whose handler then ran in this thread mid-spawn.
        stop = threading.Event()
        other = threading.Thread(target=stop.wait)
        other.start()
        reached_the_end = False
        try:
            with pytest.raises(KeyboardInterrupt):
                with _sigint_held() as held:
                    if send == "this thread":
                        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
                    else:
                        os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(0.05)  # a handler would raise here if the signal got through
                    reached_the_end = True
        finally:
            stop.set()
            other.join()
        assert held and reached_the_end, send
        assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, ())
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
