"""One run, one runner: the lease a worker holds on a run while it runs it.

Two drivers on one store would otherwise run the same run at once: a rerun started while a
killed driver's workers still finish the runs in hand, a SLURM job that outlived its driver,
two people racing on one shared directory. The store keeps one record either way (its
exclusive link), but the other run's compute (GPU-hours at the sizes this tool plans) is
spent for nothing.

A lease is ``DIR/.leases/<run_id>.json`` with the holder's host, pid and task nonce. It is
taken by ``os.link`` of a complete temporary file: atomic and exclusive on local filesystems
and on NFS, and never seen half-written. The holder touches it every ``HEARTBEAT_S``
seconds. A lease is *live* while touched within ``TTL_S`` and, when the holder is on this
host, while its process exists: a worker killed on this machine frees its runs at once, one
on another node after ``TTL_S``. A stale lease is broken by renaming it aside, checking that
what was moved is the stale one (a fresh lease moved by a racing breaker is put back).

Leases are taken by :func:`runners.task.run_task`, so every backend's workers hold them. A
worker that finds a live lease waits for it; when it goes, the run either has its ok record
(skipped) or not (the holder failed or died: this worker runs it).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HEARTBEAT_S", "TTL_S", "Holder", "RunLease", "lease_dir", "sweep_leases"]

HEARTBEAT_S = 30.0
# Several heartbeats, and past an NFS client's attribute cache (acregmax defaults to 60 s).
TTL_S = 180.0


def lease_dir(data: str | Path) -> Path:
    return Path(data) / ".leases"


@dataclass(frozen=True)
class Holder:
    """Who holds a run's lease: ``host``, ``pid`` and the attempt's ``task`` nonce."""

    host: str
    pid: int
    task: str
    age_s: float  # since its last heartbeat

    def __str__(self) -> str:
        return f"{self.host} pid {self.pid}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists, owned by someone else
    return True


def _read(path: Path) -> Holder | None:
    try:
        body = json.loads(path.read_text())
        age = time.time() - path.stat().st_mtime
        return Holder(str(body["host"]), int(body["pid"]), str(body["task"]), age)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # gone, or not a lease: either way nobody holds the run through it


def _live(h: Holder, ttl_s: float) -> bool:
    if h.age_s > ttl_s:
        return False
    return h.host != socket.gethostname() or _pid_alive(h.pid)


class RunLease:
    """The lease of one attempt (``task``, its nonce) on ``run_id`` in the store ``data``.

    ``try_acquire()`` returns None once this attempt holds the lease (and keeps it fresh
    from a daemon thread), else the live :class:`Holder`; ``release()`` gives it up.
    """

    def __init__(self, data: str | Path, run_id: str, task: str, *, ttl_s: float = TTL_S,
                 heartbeat_s: float = HEARTBEAT_S) -> None:
        self.path = lease_dir(data) / f"{run_id}.json"
        self.task, self.ttl_s, self.heartbeat_s = task, ttl_s, heartbeat_s
        self._stop: threading.Event | None = None

    @property
    def held(self) -> bool:
        return self._stop is not None

    def try_acquire(self) -> Holder | None:
        if self.held:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "task": self.task,
                                   "since": time.time()}))
        try:
            for _ in range(8):  # each pass either takes the lease, names a live holder, or breaks a stale one
                try:
                    os.link(tmp, self.path)
                except FileExistsError:
                    holder = _read(self.path)
                    if holder is None:
                        if self.path.exists() and time.time() - _mtime(self.path) < self.ttl_s:
                            # Unreadable but young: a lease is never written in place, so
                            # this is a foreign file; wait for it to age like a lease.
                            return Holder("?", -1, "?", 0.0)
                        _unlink(self.path)
                        continue
                    if holder.task == self.task:
                        break  # ours already (an earlier try of this attempt)
                    if _live(holder, self.ttl_s):
                        return holder
                    self._break(holder)
                    continue
                break
            else:
                return Holder("?", -1, "?", 0.0)  # contended past reason: wait and look again
        finally:
            _unlink(tmp)
        self._start_heartbeat()
        return None

    def release(self) -> None:
        """Give up the lease if this attempt holds it (by nonce: never another's)."""
        if self._stop is not None:
            self._stop.set()
            self._stop = None
        holder = _read(self.path)
        if holder is not None and holder.task == self.task:
            _unlink(self.path)

    def _break(self, stale: Holder) -> None:
        aside = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex}.stale")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return  # another breaker, or the holder's release, was first
        moved = _read(aside)
        if moved is None or moved.task != stale.task:
            # A racing breaker's fresh lease was moved, not the stale one: put it back.
            try:
                os.link(aside, self.path)
            except FileExistsError:
                pass
        _unlink(aside)

    def _start_heartbeat(self) -> None:
        stop = self._stop = threading.Event()
        path, every = self.path, self.heartbeat_s

        def beat() -> None:
            while not stop.wait(every):
                try:
                    os.utime(path)
                except OSError:
                    return

        threading.Thread(target=beat, name=f"lease-{path.stem}", daemon=True).start()


def sweep_leases(data: str | Path, older_than_s: float = 3600.0) -> int:
    """Delete leases and leftovers no live holder keeps fresh (``older_than_s`` idle)."""
    from runners.store import remove_idle

    return remove_idle(lease_dir(data), older_than_s)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _unlink(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass
