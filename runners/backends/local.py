"""The ``local`` backend: a pool of worker processes on this machine.

Not ``concurrent.futures.ProcessPoolExecutor``: when one of its workers dies (the kernel's
OOM killer, a segfault in a CUDA kernel) the whole pool breaks and every pending task fails
with it, and a hung run cannot be stopped. Here each worker has its own pipe, so the driver
knows exactly which run a dead worker was on, records only that one, and starts a
replacement; a run past its time limit is stopped by killing just its worker.

Workers are spawned (not forked: polars and torch keep threads that fork would copy in a
locked state). With ``cuda`` each worker owns one GPU through ``CUDA_VISIBLE_DEVICES``, set
before anything imports torch, so runs never share a device.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any

from planner.errors import ConfigError
from runners.backends import Handle, WorkerLost
from runners.task import Outcome, Task, forget_attempt

__all__ = ["LocalBackend", "visible_gpus"]

# How long a worker past its last run may take to exit by itself before it is killed.
RETIRE_GRACE_S = 30.0


def visible_gpus() -> list[str]:
    """GPU ids this process may use, without importing torch."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


@contextmanager
def _sigint_held() -> Iterator[bool]:
    """Within: SIGINT blocked in the calling thread, so a process started here starts with it
    blocked; yields whether this blocked it (False: it already was, or no process groups here).

    A spawned worker leaves the terminal's process group only once it runs
    :func:`_worker_main`, after a second or more of imports (more with torch); a Ctrl-C in that
    time hit it too, and it died printing a KeyboardInterrupt traceback. Blocked, not ignored:
    the worker drops a pending one once it leads its group (:func:`_release_sigint`).

    The mask is per thread, and the kernel hands a process-wide Ctrl-C to any thread that
    does not block it (polars' and Python's own threads here), whose handler then raised
    KeyboardInterrupt in the main thread mid-``proc.start()``: the worker, its start-up data
    unsent, printed an EOFError traceback. In the main thread the handler is therefore also
    swapped for one that only notes the signal, and the interrupt is raised once the block
    is left (elsewhere only the mask applies: handlers are the main thread's to set)."""
    if not (hasattr(signal, "pthread_sigmask") and hasattr(os, "setpgrp")):
        yield False
        return
    # A spawn starts multiprocessing's resource tracker if it is not running, and unblocks
    # SIGINT once it has (not back to what it was): the first worker then started unblocked.
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    noted: list[Any] = []
    swap = threading.current_thread() is threading.main_thread()
    old_handler = signal.signal(signal.SIGINT, lambda signum, frame: noted.append(frame)) if swap else None
    old = signal.pthread_sigmask(signal.SIG_BLOCK, ())
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        yield signal.SIGINT not in old
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        if swap:
            signal.signal(signal.SIGINT, old_handler)
    if noted:  # the driver's own Ctrl-C, not lost: handled now, as it would have been
        if callable(old_handler):
            old_handler(signal.SIGINT, noted[-1])
        elif old_handler == signal.SIG_DFL:
            raise KeyboardInterrupt


def _release_sigint() -> None:
    """Unblock SIGINT in a worker started under :func:`_sigint_held`, once it has its own
    process group: a Ctrl-C that reached it before then was the driver's to handle, so it is
    dropped (ignoring a signal discards a pending one), not raised here."""
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, handler if handler is not None else signal.SIG_DFL)


def _worker_main(conn: Connection, device: str | None, max_tasks: int | None, sigint_held: bool = False) -> None:
    # Its own process group, so that killing a run (time limit, Ctrl-C) also ends what the
    # run started (DataLoader workers, vLLM's engine): they would hold the GPU otherwise.
    # Ctrl-C then reaches only the driver, which stops the workers itself (close).
    if hasattr(os, "setpgrp"):
        os.setpgrp()
    if sigint_held:
        _release_sigint()
    if device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = device
    from runners.task import run_task

    done = 0
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            # The driver is gone, or Ctrl-C reached the process group while this worker was
            # idle: nothing more will come, and the driver says what happened.
            return
        if task is None:
            return
        if device is not None and str(task.engine_options.get("device", "")).startswith("cuda:"):
            # Pinned to one GPU, which this process sees as its only one: "cuda:N" would
            # name a device it cannot see.
            task = replace(task, engine_options={**task.engine_options, "device": "cuda"})
        out: Any
        try:
            out = run_task(task)
        except BaseException as exc:  # run_task records run failures; this is a bug or Ctrl-C
            out = WorkerLost(f"{type(exc).__name__}: {exc}")
        try:
            conn.send(out)
        except (BrokenPipeError, OSError):
            return
        done += 1
        if max_tasks is not None and done >= max_tasks:
            return


@dataclass(eq=False)
class _Worker:
    proc: Any
    conn: Connection
    device: str | None
    handle: Handle | None = None
    runs: int = 0
    # When a worker that exits by itself after its last run must be gone by; past it, killed.
    retire_by: float | None = None


class LocalBackend:
    """``workers`` processes (capped at one per GPU with ``cuda``)."""

    name = "local"

    def __init__(
        self,
        workers: int = 1,
        *,
        cuda: bool = False,
        devices: Sequence[str] | None = None,
        max_tasks_per_worker: int | None = None,
    ) -> None:
        self._devices: list[str | None]
        if cuda:
            visible = visible_gpus()
            if not visible:
                raise ConfigError("device: cuda was asked for but no GPU is visible; use --device cpu")
            # cuda:N or [local].devices: a GPU id this process cannot see would fail every run.
            if unseen := [d for d in (devices or ()) if str(d) not in visible]:
                raise ConfigError(f"device: GPU {unseen[0]} is not visible here (visible: {', '.join(visible)}); "
                                  "name one of those, or pass --device cuda")
            gpus = [str(d) for d in devices] if devices else visible
            self._devices = list(gpus[:workers]) if workers < len(gpus) else list(gpus)
        else:
            self._devices = [None] * workers
        # A fresh process per run on GPUs by default: all device memory goes back between runs.
        self._max_tasks = max_tasks_per_worker or (1 if cuda else None)
        self._ctx = mp.get_context("spawn")
        self._slots: list[_Worker | None] = [None] * len(self._devices)
        self._queue: deque[Handle] = deque()
        self._done: dict[int, Any] = {}

    def submit(self, tasks: Sequence[Task]) -> list[Handle]:
        handles = [Handle(t) for t in tasks]
        self._queue.extend(handles)
        self._pump()
        return handles

    def poll(self, handle: Handle) -> bool:
        self._pump()
        return id(handle) in self._done

    def result(self, handle: Handle) -> Outcome:
        out = self._done.pop(id(handle))
        if isinstance(out, BaseException):
            raise out
        return out

    def cancel(self, handle: Handle) -> None:
        if handle in self._queue:
            self._queue.remove(handle)
            self._done[id(handle)] = WorkerLost("cancelled before it started")
            return
        for i, w in enumerate(self._slots):
            if w is not None and w.handle is handle:
                self._kill(w)
                self._slots[i] = None
                self._done[id(handle)] = WorkerLost("stopped by the driver (time limit)")

    def close(self) -> None:
        # Idle workers are told to stop all at once and then given 5 s together, not 5 s
        # each in turn (GPU workers are slow to exit).
        for w in self._slots:
            if w is not None and w.handle is None:
                try:
                    w.conn.send(None)
                except OSError:
                    pass
        deadline = time.monotonic() + 5.0
        for i, w in enumerate(self._slots):
            if w is None:
                continue
            if w.handle is None:
                w.proc.join(timeout=max(0.0, deadline - time.monotonic()))
            self._kill(w)  # still busy: the driver is stopping (Ctrl-C or an error)
            if w.handle is not None and not w.proc.is_alive():
                forget_attempt(w.handle.task)  # over, with no record: nothing may outlive it
            self._slots[i] = None

    # -- internals -------------------------------------------------------------------------

    def _retiring(self, w: _Worker) -> bool:
        return self._max_tasks is not None and w.runs >= self._max_tasks

    def _spawn(self, device: str | None) -> _Worker:
        parent, child = self._ctx.Pipe(duplex=True)
        with _sigint_held() as held:
            proc = self._ctx.Process(
                target=_worker_main, args=(child, device, self._max_tasks, held), daemon=False,
                name=f"race-worker-{device if device is not None else 'cpu'}",
            )
            proc.start()
        child.close()  # so the worker sees EOF, not a hang, if this driver dies
        return _Worker(proc, parent, device)

    @staticmethod
    def _kill(w: _Worker) -> None:
        if w.proc.is_alive():
            try:
                os.killpg(w.proc.pid, signal.SIGKILL)  # the worker and every process its run started
            except (AttributeError, OSError):  # no process groups here, or not (yet) a leader
                w.proc.kill()
        w.proc.join(timeout=10)
        w.conn.close()

    def _pump(self) -> None:
        """Collect finished results, notice dead workers, hand queued tasks to idle ones."""
        for i, w in enumerate(self._slots):
            if w is None:
                continue
            if w.handle is not None and w.conn.poll():
                try:
                    out = w.conn.recv()
                except (EOFError, OSError):
                    out = None
                if out is not None:
                    self._done[id(w.handle)] = out
                    w.handle = None
                    w.runs += 1
            if self._retiring(w) and w.handle is None:
                # It exits by itself after this many runs: never hand it another task (it
                # would die holding it); start a fresh one once it is gone. Not waited for
                # here: a worker slow to exit (CUDA or vLLM teardown) would stall the driver
                # loop, and with it every other slot's results and time limits.
                if w.retire_by is None:
                    w.retire_by = time.monotonic() + RETIRE_GRACE_S
                if w.proc.is_alive() and time.monotonic() < w.retire_by:
                    continue
                self._kill(w)
                self._slots[i] = None
                continue
            if not w.proc.is_alive():
                if w.handle is not None:
                    code = w.proc.exitcode
                    why = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                    hint = " (out of memory?)" if code == -9 else ""
                    self._done[id(w.handle)] = WorkerLost(f"worker process died ({why}){hint}")
                w.proc.join(timeout=1)
                w.conn.close()
                self._slots[i] = None
        for i, w in enumerate(self._slots):
            if not self._queue:
                break
            if w is None:
                w = self._slots[i] = self._spawn(self._devices[i])
            if w.handle is None and not self._retiring(w):
                h = self._queue.popleft()
                try:
                    w.conn.send(h.task)
                except (BrokenPipeError, ConnectionResetError, EOFError):
                    # It died after the liveness check above: the task goes back to the
                    # front of the queue, and the next poll replaces the worker.
                    self._queue.appendleft(h)
                    continue
                w.handle = h
