"""One run, one runner: the lease a worker holds on a run while it runs it.

Two drivers on one store would otherwise run the same run at once: a rerun started while a
killed driver's workers still finish the runs in hand, a SLURM job that outlived its driver,
two people racing on one shared directory. The store keeps one record either way (its
exclusive link), but the other run's compute (GPU-hours at the sizes this tool plans) is
spent for nothing.

A lease is ``DIR/.leases/<run_id>.json``: the holder's host, pid namespace, pid, task nonce
and time limit. It is taken by ``os.link`` of a complete temporary file (atomic and
exclusive on local filesystems and NFS; never seen half-written) and touched every
``HEARTBEAT_S`` seconds. A waiter judges it stale when

* the holder is on this machine (same host *and* pid namespace) and its process is gone;
* its heartbeat has not moved for ``TTL_S`` seconds of the *waiter's* clock (so clock skew
  between nodes cannot make a live lease look old), or the file is hours old by any clock;
* the holder has a time limit and the waiter has seen it hold the run for well past it: a
  run its own driver would have killed (on this machine the waiter kills it, standing in
  for a driver that may be dead).

A lease is only ever removed by moving it aside and checking that what moved is the one
meant (a stale one to break, or one's own to release); anything else is put back.

Leases are taken by :func:`runners.task.run_task`, so every backend's workers hold them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from planner.files import remove_idle

__all__ = ["HEARTBEAT_S", "TTL_S", "Holder", "RunLease", "lease_dir", "sweep_leases"]

HEARTBEAT_S = 30.0
# Several heartbeats, and past an NFS client's attribute cache (acregmax defaults to 60 s).
TTL_S = 180.0
# A lease this old by the file's own mtime is dead whatever the clocks' skew.
ANCIENT_S = 3600.0


def lease_dir(data: str | Path) -> Path:
    return Path(data) / ".leases"


@dataclass(frozen=True)
class Holder:
    """Who holds a run's lease (``task``: the attempt's nonce) and its last heartbeat."""

    host: str
    pid: int
    task: str
    mtime: float = 0.0
    pidns: str = ""
    limit_s: float | None = None

    def __str__(self) -> str:
        return f"{self.host} pid {self.pid}" if self.pid > 0 else "an unreadable lease file"


# Something unreadable holds the slot, or takers keep colliding: wait and look again.
UNKNOWN = Holder("?", -1, "?")


def _pidns() -> str:
    """This process's pid namespace: two containers may share a host name, not their pids."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def _read(path: Path) -> Holder | None:
    try:
        body = json.loads(path.read_text())
        limit = body.get("limit_s")
        return Holder(str(body["host"]), int(body["pid"]), str(body["task"]), path.stat().st_mtime,
                      str(body.get("pidns", "")), float(limit) if limit is not None else None)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # gone, or not a lease


def overdue_after_s(limit_s: float) -> float:
    """How long a waiter lets a holder with time limit ``limit_s`` hold a run: past the
    driver's backstop (limit + max(30 s, 10%)) by as much again, for the holder's warm-up
    and for the waiter having started watching late, never early."""
    return limit_s + 2 * max(30.0, 0.1 * limit_s)


class RunLease:
    """The lease of one attempt (``task``, its nonce; ``limit_s``, its time limit) on
    ``run_id`` in the store ``data``.

    ``try_acquire()`` returns None once this attempt holds the lease (kept fresh by a daemon
    thread), else the live :class:`Holder` to wait for; ``release()`` gives it up.
    """

    def __init__(self, data: str | Path, run_id: str, task: str, *, limit_s: float | None = None,
                 ttl_s: float = TTL_S, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.path = lease_dir(data) / f"{run_id}.json"
        self.task, self.limit_s, self.ttl_s, self.heartbeat_s = task, limit_s, ttl_s, heartbeat_s
        self._stop: threading.Event | None = None
        # Per holder seen: (its last mtime, when that mtime was first seen, when the holder
        # was first seen), all on this process's monotonic clock.
        self._seen: dict[str, tuple[float, float, float]] = {}

    @property
    def held(self) -> bool:
        return self._stop is not None

    def try_acquire(self) -> Holder | None:
        if self.held:
            return None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex}.tmp")
            tmp.write_text(json.dumps({"host": socket.gethostname(), "pidns": _pidns(), "pid": os.getpid(),
                                       "task": self.task, "limit_s": self.limit_s, "since": time.time()}))
        except OSError:
            return None  # no lease can be written here: run unguarded (the store still keeps one record)
        try:
            if not self._take(tmp):
                return _read(self.path) or UNKNOWN
        finally:
            _unlink(tmp)
        self._start_heartbeat()
        return None

    def _take(self, tmp: Path) -> bool:
        for _ in range(8):  # each pass takes the lease, meets a live holder, or clears a dead one
            try:
                os.link(tmp, self.path)
                return True
            except FileExistsError:
                pass
            holder = _read(self.path)
            if holder is None:
                mtime = _mtime(self.path)
                if mtime is None:
                    continue  # released meanwhile
                if time.time() - mtime < self.ttl_s:
                    return False  # unreadable but young: a foreign file; let it age like a lease
                self._move_aside(None)
                continue
            if holder.task == self.task:
                # Ours, from an earlier incarnation of this attempt (a requeued SLURM job):
                # name this process, or a waiter would find the old pid dead and break it.
                os.replace(tmp, self.path)
                return True
            state = self._judge(holder)
            if state == "live":
                return False
            if state == "overdue":
                _stop_locally(holder)
            self._move_aside(holder.task)
        return False

    def _judge(self, h: Holder) -> str:
        """``live``, ``dead`` (gone, or no heartbeat), or ``overdue`` (past its limit)."""
        now = time.monotonic()
        mtime, moved, first = self._seen.get(h.task, (h.mtime, now, now))
        if h.mtime != mtime:
            moved = now
        self._seen[h.task] = (h.mtime, moved, first)
        if _same_machine(h) and not _pid_alive(h.pid):
            return "dead"
        if now - moved > self.ttl_s or time.time() - h.mtime > ANCIENT_S:
            return "dead"
        if h.limit_s is not None and now - first > overdue_after_s(h.limit_s):
            return "overdue"
        return "live"

    def release(self) -> None:
        """Give up the lease if this attempt holds it (by nonce: never another's)."""
        if self._stop is not None:
            self._stop.set()
            self._stop = None
        self._move_aside(self.task)

    def _move_aside(self, task: str | None) -> bool:
        """Remove the lease if it is attempt ``task``'s (None: an unreadable file); put
        back whatever else a racing taker has put there meanwhile."""
        aside = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex}.aside")
        try:
            os.rename(self.path, aside)
        except OSError:
            return False  # gone already
        moved = _read(aside)
        if (moved.task if moved is not None else None) != task:
            try:
                os.link(aside, self.path)
            except OSError:
                pass  # a third taker got in meanwhile (a window of microseconds)
            _unlink(aside)
            return False
        _unlink(aside)
        return True

    def _start_heartbeat(self) -> None:
        stop = self._stop = threading.Event()
        path, every = self.path, self.heartbeat_s

        def beat() -> None:
            while not stop.wait(every):
                try:
                    os.utime(path)
                except OSError:
                    continue  # an NFS hiccup, or moved aside for a moment: the next beat counts

        threading.Thread(target=beat, name=f"lease-{path.stem}", daemon=True).start()


def _same_machine(h: Holder) -> bool:
    return h.host == socket.gethostname() and h.pidns == _pidns()


def _stop_locally(h: Holder) -> None:
    """Kill an overdue holder on this machine with what it started (a local worker leads its
    process group), as its driver's backstop would. One on another node cannot be reached."""
    if not _same_machine(h) or h.pid <= 0:
        return
    try:
        os.killpg(h.pid, signal.SIGKILL)
    except OSError:
        try:
            os.kill(h.pid, signal.SIGKILL)
        except OSError:
            pass


def sweep_leases(data: str | Path, older_than_s: float = ANCIENT_S) -> int:
    """Delete leases and leftovers no live holder keeps fresh (``older_than_s`` idle)."""
    return remove_idle(lease_dir(data), older_than_s)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _unlink(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass
