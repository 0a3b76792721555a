"""The ``slurm`` backend: submitit ``AutoExecutor``; the runs launched together form a job array.

At most ``workers`` jobs are live at once, across every submission (retries included): runs
past that wait here, in order, and go out as slots free. ``cluster="local"`` runs the same
jobs as local processes through submitit's local executor (what the tests use); ``None``
picks SLURM when ``sbatch`` is found. The data directory must be on a filesystem the compute
nodes see: jobs write their records there themselves.
"""

from __future__ import annotations

import functools
import math
import os
import signal
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from planner.errors import ConfigError
from runners.backends import Handle, WorkerLost, require
from runners.backends.queue import ThrottledQueue
from runners.lease import TTL_S
from runners.task import Outcome, forget_attempt, run_task

__all__ = ["CANCEL_GRACE_S", "CLOSE_GRACE_S", "DEFAULT_TIME_MIN", "KILLED_STATES", "RESULT_GRACE_S",
           "SlurmBackend"]

DEFAULT_TIME_MIN = 240  # submitit's own default is 5 minutes, far too short for a pilot run

# Slurm states of a job stopped from outside its Python process: no result file will ever
# appear, so waiting out submitit's NFS grace (15 s per job, blocking the driver) buys nothing.
# (sacct spells some with a suffix, "CANCELLED by 123": the first word counts.)
# (PREEMPTED is not here: submitit counts it as not done, so such a job never reaches result().)
KILLED_STATES = frozenset({"BOOT_FAIL", "CANCELLED", "DEADLINE", "NODE_FAIL", "OUT_OF_MEMORY", "TIMEOUT"})
RESULT_GRACE_S = 2.0  # a job can write its result just before the kill: a short look for it
CLOSE_GRACE_S = 5.0  # how long close() waits for stopped local jobs to be gone
# How long close() waits for cancelled SLURM jobs to end: scancel only asks, and a job lives
# on for up to the cluster's KillWait (30 s by default), and may still write its record.
CANCEL_GRACE_S = 35.0
SACCT_POLL_S = 2.0  # between the sacct calls of that wait (submitit's own shortest interval)


class SlurmBackend(ThrottledQueue):
    """Runs tasks as SLURM jobs through submitit (job arrays), at most ``workers`` live at once;
    ``cluster="local"`` runs the same jobs as local processes."""
    name = "slurm"

    def __init__(
        self,
        workers: int = 1,
        *,
        folder: str | Path,
        cuda: bool = False,
        timeout_s: float | None = None,
        partition: str | None = None,
        time_min: int | None = None,
        gpus_per_run: int | None = None,
        cpus_per_run: int = 1,
        mem_gb: float | None = None,
        cluster: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        submitit = require("submitit", "slurm")
        if time_min is not None and timeout_s is not None and time_min * 60 <= timeout_s:
            # The scheduler would kill each run first: no timeout record with its partial
            # card, but a lost worker, recorded a crash and retried, to be killed again.
            raise ConfigError(f"time-min: a job limit of {time_min} min ends each run before its own limit of "
                              f"{timeout_s / 60:g} min (--timeout-min); leave --time-min out (the run limit + 10% "
                              "+ 5 min) or give more")
        # submitit makes its folder (DIR/.submitit, and DIR) at once: a refusal below must
        # leave no empty store behind.
        new = [d for d in (Path(folder).parent, Path(folder)) if not d.exists()]
        self._ex = submitit.AutoExecutor(folder=str(Path(folder) / "%j"), cluster=cluster)
        if cluster is None and self._ex.cluster != "slurm":
            for d in reversed(new):
                try:
                    d.rmdir()
                except OSError:
                    pass
            # submitit falls back to local processes without a word; a user who asked for
            # SLURM would find a cluster's worth of runs on the login node.
            raise ConfigError(
                "backend: slurm found no SLURM here (no sbatch on PATH); run from a login node, "
                'or set cluster = "local" under [slurm] in --backend-config to run the jobs locally'
            )
        if time_min is None:
            # Leave the scheduler a margin over the run's own limit, so that our in-worker
            # timeout fires first and records a partial card instead of a silent kill.
            time_min = DEFAULT_TIME_MIN if timeout_s is None else math.ceil(timeout_s * 1.1 / 60) + 5
        params: dict[str, Any] = {
            "name": "race-run",
            "timeout_min": int(time_min),
            "cpus_per_task": int(cpus_per_run),
            "gpus_per_node": int(gpus_per_run if gpus_per_run is not None else (1 if cuda else 0)),
            "slurm_array_parallelism": int(workers),
        }
        if mem_gb is not None:
            params["mem_gb"] = float(mem_gb)
        if partition:
            params["slurm_partition"] = partition
        params.update(extra or {})
        try:
            self._ex.update_parameters(**params)
        except Exception as exc:  # submitit names a misspelt slurm_* key in a multi-line NameError
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"extra: submitit refused the slurm parameters ({first}); check the [slurm].extra "
                              "keys against submitit's slurm_* parameters") from None
        # ``workers`` live jobs across every submission, on SLURM too: a job array's ``%N``
        # caps only that array, and a retry (or a race's next round) is a job of its own.
        # (submitit's local executor ignores array parallelism altogether.)
        super().__init__(limit=workers)

    def _launch(self, batch: list[Handle]) -> None:
        try:
            with _own_sessions(self._ex.cluster == "local"), self._ex.batch():  # one job array for the lot
                jobs = [self._ex.submit(run_task, h.task) for h in batch]
        except Exception as exc:
            # sbatch refuses what only the cluster can check (an unknown partition or account,
            # a time limit past the partition's, a QOS's job cap): its words in one line, not
            # submitit's FailedJobError traceback.
            why = " ".join(str(exc).split())[:300] or type(exc).__name__
            what = "submitit could not start the local jobs" if self._ex.cluster == "local" else "sbatch refused the jobs"
            raise ConfigError(f"backend: {what} ({why}); check --partition, --time-min, --gpus-per-run, "
                              "--cpus-per-run, --mem-gb and [slurm].extra in --backend-config") from None
        for h, job in zip(batch, jobs, strict=True):
            h.ref = job

    def poll(self, handle: Handle) -> bool:
        if handle.ref is None:
            self._fill()
            return False
        if isinstance(handle.ref, WorkerLost) or handle.ref.done():
            self._finished(handle)
            return True
        return False

    def result(self, handle: Handle) -> Outcome:
        if isinstance(handle.ref, WorkerLost):
            raise handle.ref
        job = handle.ref
        state = str(getattr(job, "state", "") or "")
        if state.split(" ")[0].upper() in KILLED_STATES and not _appears(job.paths, RESULT_GRACE_S):
            raise WorkerLost(f"slurm ended job {job.job_id} as {state} (no result written)")
        try:
            return job.result()
        except Exception as exc:  # FailedJobError, UncompletedJobError (time limit, preempted)
            lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
            raise WorkerLost(f"{type(exc).__name__}: {lines[0] if lines else 'job failed'}") from None

    def cancel(self, handle: Handle) -> None:
        if handle.ref is None:
            self._waiting.remove(handle)
            handle.ref = WorkerLost("cancelled before it started")
            return
        if isinstance(handle.ref, WorkerLost):
            return
        if self._ex.cluster == "local":
            # The driver's backstop for a run deaf to its limit: the whole group goes (the run's
            # own children too), and the driver writes the "timeout" record, as on the local
            # backend. submitit's cancel only sends SIGINT, which a stuck run may never see.
            _kill_group(handle.ref)
        else:
            handle.ref.cancel(check=False)

    def close(self) -> None:
        stopped = [h for h in self._running if _live(h.ref)]
        local = self._ex.cluster == "local"
        for h in stopped:
            if local:
                _kill_group(h.ref)
            else:
                h.ref.cancel(check=False)
        grace, every = (CLOSE_GRACE_S, 0.05) if local else (CANCEL_GRACE_S, SACCT_POLL_S)
        live = _still_live([h.ref for h in stopped], grace, every, queue=not local)
        for h, on in zip(stopped, live, strict=True):
            # Its lease would keep the run from a resumed race or another driver for the
            # lease's TTL; only this attempt's lease (by its nonce) goes. A job not seen gone
            # may still run it, and write its record: its lease stays, to go stale once the
            # job is dead.
            if not on:
                forget_attempt(h.task)
        kept = [h for h, on in zip(stopped, live, strict=True) if on]
        if kept:
            jobs = ", ".join(f"{h.task.run_id} (job {h.ref.job_id})" for h in kept)
            print(f"slurm: {len(kept)} stopped job(s) not seen to end within {grace:g} s (still running, or sacct "
                  f"or squeue did not answer): {jobs}; their runs stay leased, so a rerun waits until each job ends or its "
                  f"lease goes stale ({TTL_S:g} s without a heartbeat)", file=sys.stderr)
        self._running.clear()
        self._waiting.clear()


def _live(job: Any) -> bool:
    try:
        return not job.done()
    except Exception:  # sacct unreachable: assume the worst, as a cancel is cheap
        return True


def _still_live(jobs: list[Any], within_s: float, every_s: float, *, queue: bool = False) -> list[bool]:
    """Whether each of ``jobs`` is still live after waiting up to ``within_s`` for them all to
    end, looking every ``every_s``. One forced sacct call a round: submitit's watcher re-reads
    sacct only every few minutes for a job started long ago, and one call answers for all.
    With ``queue`` (a real cluster), a job squeue still lists, or any job when squeue does not
    answer, counts as live too."""
    live = [True] * len(jobs)
    deadline = time.monotonic() + within_s
    while True:
        asked = False
        for i, job in enumerate(jobs):
            if not live[i]:
                continue
            try:
                live[i] = not job.done(force_check=not asked)
                asked = True
            except Exception:  # as in _live: a job not known to be gone counts as live
                pass
        if queue and not all(live):
            # sacct says CANCELLED as soon as the cancel lands, while the job's processes may
            # still be dying (COMPLETING) for up to KillWait; squeue lists a job until they are.
            listed = _listed()
            live = [on or listed is None or str(job.job_id) in listed for on, job in zip(live, jobs, strict=True)]
        left = deadline - time.monotonic()
        if not any(live) or left <= 0:
            return live
        time.sleep(min(every_s, left))


def _listed() -> set[str] | None:
    """The ids of this user's jobs squeue lists (pending, running or completing: a cancelled
    job until its processes are gone); None when squeue does not answer."""
    import getpass

    try:
        out = subprocess.run(["squeue", "-h", "-u", getpass.getuser(), "-o", "%i"], capture_output=True,
                             text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError, KeyError):  # KeyError: getuser with no user name
        return None
    return {line.strip() for line in out.splitlines() if line.strip()}


def _kill_group(job: Any) -> None:
    """Kill a local job's controller and its task (a process group of their own) at once:
    submitit's own cancel sends SIGINT, and the controller prints a traceback on it."""
    try:
        os.killpg(int(job.job_id), signal.SIGKILL)
    except (ValueError, OSError):  # gone already, or not a group leader (started elsewhere)
        job.cancel(check=False)


@contextmanager
def _own_sessions(enabled: bool) -> Iterator[None]:
    """Within: submitit's local executor starts each job's controller in a session of its
    own. In the driver's process group, Ctrl-C would reach every controller and its task,
    and each would print a KeyboardInterrupt traceback on the terminal; this way only the
    driver gets it, and close() stops the jobs (as the local backend does its workers)."""
    if not enabled:
        yield
        return
    from submitit.local import local

    shim = types.ModuleType("subprocess")
    shim.__dict__.update(vars(subprocess))
    shim.Popen = functools.partial(subprocess.Popen, start_new_session=True)  # type: ignore[attr-defined]
    real, local.subprocess = local.subprocess, shim
    try:
        yield
    finally:
        local.subprocess = real


def _appears(paths: Any, within_s: float) -> bool:
    """Whether the job's result file exists or shows up within ``within_s`` seconds.

    Touching the folder's mode refreshes an NFS client's attribute cache (what submitit
    does before its own, longer wait)."""
    import time

    deadline = time.monotonic() + within_s
    while True:
        try:
            folder = Path(paths.result_pickle).parent
            folder.chmod(folder.stat().st_mode)
        except OSError:
            pass
        if Path(paths.result_pickle).exists():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.25)
