"""One run's attempt on a worker: the :class:`Task` a backend carries, and :func:`run_task`,
which every backend's worker calls.

:func:`run_task` builds the engine, runs it, and writes the record (ok or failed) into the
store *itself*, so a driver killed at any point loses nothing that finished. Exceptions,
out-of-memory, NaN losses and timeouts become ``failed`` records with their partial compute
card; :class:`RunFailed` is how an engine (or the meter) says a run cannot finish.
"""

from __future__ import annotations

import math
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from planner.engine import Engine, FailureKind, diverged, failure_kind, load_engine, one_line
from planner.errors import ConfigError, RaceError
from planner.schema import (
    ComputeCard,
    FlopsSplit,
    Metrics,
    Proposal,
    RunRecord,
    first_error,
    run_id_for,
)
from runners.backends.progress import ProgressFile
from runners.lease import RunLease, release_dead
from runners.store import PilotStore, attempt_of

__all__ = [
    "ALARM_SIGNAL",
    "Outcome",
    "RunFailed",
    "Task",
    "failed_record",
    "forget_attempt",
    "make_engine",
    "placed_options",
    "run_task",
]

# How often a worker waiting on another attempt's lease looks again.
LEASE_POLL_S = 1.0

class RunFailed(Exception):
    """Raised by an engine (or the meter) when a run cannot finish.

    ``card`` is the partial compute card metered so far; ``kind`` is one of
    ``error``, ``oom``, ``nan``, ``timeout``. The run is recorded as ``failed``.
    """

    def __init__(
        self,
        message: str,
        *,
        card: ComputeCard | None = None,
        kind: FailureKind = "error",
        metrics: Metrics | None = None,
    ) -> None:
        super().__init__(message)
        self.card = card
        self.kind: FailureKind = kind
        self.metrics = metrics


def new_nonce() -> str:
    import uuid

    return uuid.uuid4().hex


@dataclass(frozen=True)
class Task:
    """One attempt of one run. Plain data, so it pickles to any worker."""

    proposal: Proposal
    seed: int
    attempt: int
    engine: str
    data: str
    engine_options: Mapping[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None
    # Which attempt this is, whatever its number: two drivers on one store can plan the same
    # attempt number, and a failed record says whose it is by this (``provenance["task"]``).
    nonce: str = field(default_factory=new_nonce)

    @property
    def run_id(self) -> str:
        return run_id_for(self.proposal.id, self.seed)


@dataclass(frozen=True)
class Outcome:
    """What a worker reports back (the record itself is already in the store)."""

    run_id: str
    status: Literal["ok", "failed", "skipped", "refused"]  # refused: bad input, no record
    attempt: int
    error: str | None = None
    kind: str | None = None
    wall_s: float = 0.0
    reward: float | None = None
    flops: float = 0.0


_ENGINES: dict[tuple[str, str], Engine] = {}


def placed_options(engine: Engine, options: Mapping[str, Any]) -> dict[str, Any]:
    """The engine options a backend places workers by: a simulated engine ignores the
    device, so it gets no GPU to find and no worker per GPU."""
    return {k: v for k, v in options.items() if k != "device"} if getattr(engine, "simulated", False) else dict(options)


def make_engine(name: str, options: Mapping[str, Any]) -> Engine:
    """The engine ``name`` with ``options``; one instance per worker process (engines may
    cache tokenizers, pretrained bases or worlds between runs)."""
    key = (name, repr(sorted(options.items())))
    if key not in _ENGINES:
        try:
            _ENGINES[key] = _load(name, options)
        except RaceError:
            raise
        except Exception as exc:  # a bad world file, an option the engine does not take
            raise ConfigError(f"engine {name}: {first_error(exc)}") from None
    return _ENGINES[key]


def _load(name: str, options: Mapping[str, Any]) -> Engine:
    """An engine by entry-point name (``sim``, ``trl``) or by ``module:Class`` for engines
    that live outside this package (a user's own, or a test's)."""
    if ":" not in name:
        return load_engine(name, **options)
    import importlib

    module, _, attr = name.partition(":")
    try:
        if not module or not attr:
            raise ValueError(name)
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        # Python's reason, where there is one: a module that exists but fails to import one
        # of its own dependencies read as if the module itself were not there.
        why = "" if isinstance(exc, ValueError) else f" ({one_line(str(exc))})"
        raise ConfigError(f"engine: cannot import {name!r}{why}; give sim, trl or module:Class") from None
    if not isinstance(cls, type):  # os:path, json:loads: a module or a function, built or called anyway
        raise ConfigError(f"engine: {name!r} is a {type(cls).__name__}, not a class; give module:Class, an "
                          "engine class (see planner.engine.Engine)")
    engine = cls(**options)
    if not callable(getattr(engine, "run", None)) or not isinstance(getattr(engine, "name", None), str):
        raise ConfigError(f"engine: {name!r} is not an engine (it needs a name and run(proposal, seed)); "
                          "see planner.engine.Engine")
    return engine


def _partial_card(last: dict[str, Any] | None) -> ComputeCard:
    """Best card we can build from the last progress report when the engine gave none."""
    flops = float(last["flops"]) if last and _num(last.get("flops")) else 0.0
    info = (last or {}).get("info", {})
    # flops_* keys (the store's column names): "reward" alone is the reward *metric* so far.
    parts = {k: float(info[f"flops_{k}"]) for k in ("search", "learning", "reward") if _num(info.get(f"flops_{k}"))}
    if len(parts) == 3:
        split = FlopsSplit(**parts, total=sum(parts.values()))
    else:
        split = FlopsSplit(search=0.0, learning=0.0, reward=0.0, total=max(flops, 0.0))
    return ComputeCard(flops=split, rho=split.rho, partial=True, phase=(last or {}).get("phase", ""))


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def failed_record(
    task: Task,
    error: str,
    kind: str,
    *,
    card: ComputeCard | None = None,
    metrics: Metrics | None = None,
    engine: Engine | None = None,
    wall_s: float = 0.0,
    last_progress: dict[str, Any] | None = None,
) -> RunRecord:
    """A ``failed`` record for ``task`` with whatever compute was metered before it died."""
    return RunRecord.failed(
        task.proposal, task.seed, engine=task.engine,
        simulated=bool(getattr(engine, "simulated", task.engine == "sim")),
        error=f"{kind}: {one_line(error)}", card=card or _partial_card(last_progress), metrics=metrics,
        attempt=task.attempt, wall_s=wall_s,
        # The engine's source (the sim's world file and hash) too: where the world caused
        # the failure, the record must say which world it was.
        provenance={**dict(getattr(engine, "source", None) or {}), "engine": task.engine,
                    "failure_kind": kind, "host": socket.gethostname(), "task": task.nonce,
                    "phase": (last_progress or {}).get("phase", "")},
    )


def _secs(seconds: float) -> str:
    """A time limit as text: whole seconds, but a sub-second limit (--timeout-min 0.001)
    as its value, not "0 s"."""
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.2g} s"


# The signal of the run's hard time limit. Not SIGALRM: math-verify (the qwen2.5 rewards'
# answer check) times itself with signal.alarm(n) and alarm(0) on the main thread, which
# share ITIMER_REAL, so one reward call cancelled the limit. A watchdog thread sends this
# one to the main thread, where Python runs the handler that raises; None off POSIX.
ALARM_SIGNAL: signal.Signals | None = getattr(signal, "SIGVTALRM", None)
# After the limit, the watchdog fires again this often: a handler's RunFailed raised
# inside code that swallows exceptions (math-verify catches them all) must not end it.
ALARM_REPEAT_S = 1.0


@contextmanager
def _alarm(seconds: float | None) -> Iterator[None]:
    """Hard per-run time limit in the worker (:data:`ALARM_SIGNAL` from a watchdog
    thread), where signals can be used: on the main thread of a POSIX process."""
    sig = ALARM_SIGNAL
    if not seconds or sig is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    main = threading.main_thread().ident
    done, fired = threading.Event(), threading.Event()
    message = f"run exceeded its time limit of {_secs(seconds)}"

    def _fire(signum: int, frame: Any) -> None:
        if not done.is_set():  # a signal still pending as the block ended is not a timeout
            raise RunFailed(message, kind="timeout")

    def _watch() -> None:
        wait = min(float(seconds), threading.TIMEOUT_MAX)  # a longer wait overflows and kills this thread
        while main is not None and not done.wait(wait):
            fired.set()
            signal.pthread_kill(main, sig)
            wait = ALARM_REPEAT_S

    old = signal.signal(sig, _fire)
    watchdog = threading.Thread(target=_watch, name="run-time-limit", daemon=True)
    watchdog.start()
    try:
        yield
    except RunFailed:
        raise
    except (Exception, KeyboardInterrupt) as exc:
        # Past its limit, a run deaf to the signal (it blocks it, or swallowed the error)
        # ends some other way, as a backend's cancel (SIGINT) ends it: still a timeout.
        if fired.is_set():
            raise RunFailed(message, kind="timeout") from exc
        raise
    finally:
        try:
            done.set()
            watchdog.join()
        finally:
            signal.signal(sig, old)


def forget_attempt(task: Task) -> None:
    """Remove what an attempt whose worker is known dead left behind: its progress file and
    its lease (which, held on another node, would keep the run from everyone for the
    lease's TTL)."""
    ProgressFile(task.data, task.run_id, task.attempt, task.nonce).clear()
    release_dead(task.data, task.run_id, task.nonce)


def run_task(task: Task) -> Outcome:
    """Worker entry point: run one attempt and write its record into the store.

    Never raises for a failed run: exceptions, out-of-memory, NaN losses and timeouts become
    ``failed`` records with their error and partial compute card. Holds the run's lease
    (:mod:`runners.lease`) while it runs, and waits while another attempt holds it.
    """
    store = PilotStore(Path(task.data))
    if store.has_ok(task.run_id):
        return Outcome(task.run_id, "skipped", task.attempt)  # finished by an earlier driver
    prog = ProgressFile(task.data, task.run_id, task.attempt, task.nonce)
    lease = RunLease(task.data, task.run_id, task.nonce, limit_s=task.timeout_s)
    try:
        if not _take_lease(lease, store, prog, task.proposal.budget):
            return Outcome(task.run_id, "skipped", task.attempt)  # the holder finished it
        return _run_held(task, store, prog, lease)
    finally:
        prog.clear()
        lease.release()


def _take_lease(lease: RunLease, store: PilotStore, prog: ProgressFile, budget: float) -> bool:
    """Take the run's lease, waiting while another attempt holds it (shown as the phase
    ``waiting``; no time limit runs meanwhile). False when the run got its ok record
    meanwhile: the holder finished it, or did just before this worker looked."""
    parent = os.getppid()
    while (holder := lease.try_acquire()) is not None:
        prog.update("waiting", 0.0, budget, {"holder": str(holder)})
        time.sleep(LEASE_POLL_S)
        if store.has_ok(prog.run_id) or os.getppid() != parent:
            # Done by the holder, or this worker's driver is gone (a local worker's parent):
            # nobody wants the run from it any more.
            return False
    return not store.has_ok(prog.run_id)


def _run_held(task: Task, store: PilotStore, prog: ProgressFile, lease: RunLease) -> Outcome:
    last: dict[str, Any] = {}
    t0 = time.monotonic()

    def progress(phase: str, flops: float, budget: float, info: dict[str, Any]) -> None:
        last.update(phase=phase, flops=float(flops), info=dict(info))
        loss = info.get("loss")
        if loss is not None and _num_like(loss) and not math.isfinite(float(loss)):
            raise RunFailed(f"loss became {float(loss)} in phase {phase!r}", kind="nan")
        if not math.isfinite(float(flops)):
            raise RunFailed(f"metered FLOPs became {flops} in phase {phase!r}", kind="nan")
        if task.timeout_s and time.monotonic() - t0 > task.timeout_s:
            raise RunFailed(f"run exceeded its time limit of {_secs(task.timeout_s)}", kind="timeout")
        prog.update(phase, flops, budget, info)

    engine: Engine | None = None
    prog.started = time.time()  # the driver's backstop counts from here, not from any wait
    prog.update("starting", 0.0, task.proposal.budget, {}, force=True)
    try:
        engine = make_engine(task.engine, task.engine_options)
        warm_up = getattr(engine, "warm_up", None)
        if callable(warm_up):
            # Imports (seconds, once per worker) are not the run's: the limit and
            # the wall time start after them.
            warm_up()
            t0 = time.monotonic()
            prog.started = time.time()
            lease.limit_starts()  # a waiter times this run's limit from here, as it runs
            prog.update("starting", 0.0, task.proposal.budget, {}, force=True)
        with _alarm(task.timeout_s):
            record = engine.run(task.proposal, task.seed, progress)
        record = record.model_copy(update={"attempt": task.attempt, "run_id": task.run_id})
        if (bad := diverged(record)) is not None:
            raise RunFailed(bad[0], kind="nan", card=bad[1])
        if (wrong := record.inconsistency()) is not None:
            # The store reads such a record back as corrupt: written to runs/, it was reported
            # ok, then moved aside and run again by every later execute.
            raise RunFailed(f"the engine's record is invalid: {wrong}", card=record.card)
    except RunFailed as exc:
        record = failed_record(task, str(exc), exc.kind, card=exc.card, metrics=exc.metrics,
                               engine=engine, wall_s=time.monotonic() - t0, last_progress=last)
    except RaceError as exc:
        # Bad input the engine found only once the run began (a checkpoint of another
        # shape, a data file): every retry would fail alike,
        # and it is the user's to fix, so no failed record; the driver stops with it.
        return Outcome(task.run_id, "refused", task.attempt, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    except Exception as exc:
        kind = failure_kind(exc)
        record = failed_record(task, f"{type(exc).__name__}: {exc}", kind, engine=engine,
                               wall_s=time.monotonic() - t0, last_progress=last)
    path, created = store.add(record)
    if record.status == "ok" and not created:  # another driver recorded this run first
        return Outcome(task.run_id, "skipped", task.attempt)
    recorded_kind = (record.provenance or {}).get("failure_kind") if record.status == "failed" else None
    reward = getattr(record.metrics, task.proposal.target, None)
    # The number the record took: another driver's failure may have held the planned one.
    return Outcome(task.run_id, record.status, attempt_of(path, task.attempt), record.error, recorded_kind,
                   time.monotonic() - t0, reward, record.card.flops.total)


def _num_like(v: Any) -> bool:
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False
