"""One run, one runner: the lease a worker holds on a run while it runs it.

Two drivers on one store would otherwise run the same run at once: a rerun started while a
killed driver's workers still finish the runs in hand, a SLURM job that outlived its driver,
two people racing on one shared directory. The store keeps one record either way (its
exclusive link), but the other run's compute (GPU-hours at the sizes this tool plans) is
spent for nothing.

A lease is ``DIR/.leases/<run_id>.json``: the holder's host, machine (boot id and pid
namespace), pid, task nonce, time limit and when that limit started. It is taken by
``os.link`` of a complete temporary file (atomic and exclusive on local filesystems and
NFS; never seen half-written) and touched every ``HEARTBEAT_S`` seconds. A waiter judges
it dead when

* the holder is on this machine and its process is gone;
* its heartbeat has not moved for ``TTL_S`` seconds of the *waiter's* clock (clock skew
  between nodes cannot make a live lease look old), or its mtime is over an hour behind
  this machine's clock;
* the holder has a time limit and the waiter has watched it hold the run, since its limit
  started, for well past it (:func:`overdue_after_s`): a hung run its own driver would
  have killed, and that driver may be dead. The waiter does not kill it (it may not be
  its to kill); it takes the lease and runs the run beside it, as it would have without
  leases.

A lease is removed only by moving it aside and checking that what moved is exactly the
lease meant (same holder, pid and start); anything else is put back.

Leases are taken by :func:`runners.task.run_task`, so every backend's workers hold them.
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
from typing import Any

__all__ = [
    "HEARTBEAT_S", "TTL_S", "Holder", "RunLease", "lease_dir", "machine_id", "process_gone", "release_dead",
    "sweep_leases",
]

HEARTBEAT_S = 30.0
# Several heartbeats, and past an NFS client's attribute cache (acregmax defaults to 60 s).
TTL_S = 180.0
# A lease whose mtime is this far behind this machine's clock is dead, skew or not.
ANCIENT_S = 3600.0


def lease_dir(data: str | Path) -> Path:
    """The folder of a store's run leases: ``DATA/.leases``."""
    return Path(data) / ".leases"


@dataclass(frozen=True)
class Holder:
    """Who holds a run's lease (``task``: the attempt's nonce; ``since``: when its time
    limit started) and the lease file's last heartbeat (``mtime``)."""

    host: str
    pid: int
    task: str
    since: float = 0.0
    machine: str = ""
    limit_s: float | None = None
    mtime: float = 0.0

    @property
    def key(self) -> tuple[str, str, int, str, float]:
        """What makes one lease this lease: a requeued attempt (same nonce) or a restarted
        limit is another one."""
        return (self.host, self.machine, self.pid, self.task, self.since)

    def __str__(self) -> str:
        return f"{self.host} pid {self.pid}" if self.pid > 0 else "an unreadable lease file"


# Something unreadable holds the slot, or takers keep colliding: wait and look again.
UNKNOWN = Holder("?", -1, "?")


def machine_id() -> str:
    """This boot of this machine and this pid namespace: two containers may share a host
    name (and two hosts a namespace id) but not both, so a pid means the same process."""
    parts = []
    for path in ("/proc/sys/kernel/random/boot_id", "/proc/self/ns/pid"):
        try:
            parts.append(os.readlink(path) if path.endswith("/pid") else Path(path).read_text().strip())
        except OSError:
            parts.append("")
    return "/".join(parts)


def process_gone(host: str, machine: str, pid: int) -> bool:
    """Whether the process ``pid`` of ``host``/``machine`` (:func:`machine_id` there) is
    known to have ended. Only checked where the boot and pid namespace are known and are
    this process's (Linux's /proc): elsewhere a pid proves nothing (and Windows'
    ``os.kill(pid, 0)`` would send Ctrl-C), so the answer is False."""
    here = machine_id()
    if "" in here.split("/") or host != socket.gethostname() or machine != here:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # exists, owned by someone else
    return False


def _holder(body: dict[str, Any], mtime: float) -> Holder:
    limit = body.get("limit_s")
    return Holder(str(body["host"]), int(body["pid"]), str(body["task"]), float(body.get("since", 0.0)),
                  str(body.get("machine", "")), float(limit) if limit is not None else None, mtime)


def _read(path: Path) -> Holder | None:
    try:
        body = json.loads(path.read_text())
        return _holder(body, path.stat().st_mtime)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # gone, or not a lease


def overdue_after_s(limit_s: float) -> float:
    """How long past the start of its limit a waiter lets a holder with time limit
    ``limit_s`` hold a run: past the driver's backstop (limit + max(30 s, 10%)) by as much
    again, so never before the holder's own driver would have stopped it."""
    return limit_s + 2 * max(30.0, 0.1 * limit_s)


def _move_aside(path: Path, expected: Holder | None) -> bool:
    """Remove the lease at ``path`` if it is exactly ``expected`` (None: an unreadable
    file); put back whatever else a racing taker has put there meanwhile."""
    aside = path.with_name(f".{path.name}.{uuid.uuid4().hex}.aside")
    try:
        os.rename(path, aside)
    except OSError:
        return False  # gone already
    moved = _read(aside)
    if (moved.key if moved is not None else None) != (expected.key if expected is not None else None):
        try:
            os.link(aside, path)
        except OSError:
            pass  # a third taker got in meanwhile (a window of microseconds)
        _unlink(aside)
        return False
    _unlink(aside)
    return True


class RunLease:
    """The lease of one attempt (``task``, its nonce; ``limit_s``, its time limit) on
    ``run_id`` in the store ``data``.

    ``try_acquire()`` returns None once this attempt holds the lease (kept fresh by a daemon
    thread) or when no lease can be written there (the run goes unguarded), else the live
    :class:`Holder` to wait for. ``limit_starts()`` says the time limit starts now (after
    warm-up); ``release()`` gives the lease up.
    """

    def __init__(self, data: str | Path, run_id: str, task: str, *, limit_s: float | None = None,
                 ttl_s: float = TTL_S, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.path = lease_dir(data) / f"{run_id}.json"
        self.task, self.limit_s, self.ttl_s, self.heartbeat_s = task, limit_s, ttl_s, heartbeat_s
        self._mine: Holder | None = None
        self._stop: threading.Event | None = None
        # Per lease seen (by key): its last mtime, when that mtime was first seen and when
        # the lease was first seen, on this process's monotonic clock.
        self._seen: dict[tuple[str, str, int, str, float], tuple[float, float, float]] = {}

    @property
    def held(self) -> bool:
        return self._mine is not None

    def try_acquire(self) -> Holder | None:
        if self.held:
            return None
        tmp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex}.tmp")
        try:
            mine = self._write(tmp)
        except OSError:
            return self._unguarded()
        try:
            for _ in range(8):  # each pass takes the lease, meets a live holder, or clears a dead one
                try:
                    os.link(tmp, self.path)
                except FileExistsError:
                    pass
                except OSError:
                    return self._unguarded()
                else:
                    self._hold(mine)
                    return None
                holder = _read(self.path)
                if holder is None:
                    mtime = _mtime(self.path)
                    if mtime is None:
                        continue  # released meanwhile
                    if time.time() - mtime < self.ttl_s:
                        return UNKNOWN  # unreadable but young: a foreign file; let it age like a lease
                    _move_aside(self.path, None)
                    continue
                # Ours from an earlier incarnation (a requeued SLURM job: it was killed, and
                # its nonce is only ever this attempt's), or a dead holder: cleared.
                if holder.task != self.task and self._judge(holder) == "live":
                    return holder
                _move_aside(self.path, holder)
            return UNKNOWN
        finally:
            _unlink(tmp)

    def limit_starts(self) -> None:
        """The holder's time limit starts now (after its warm-up): a waiter times it from here."""
        if self._mine is None:
            return
        tmp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex}.tmp")
        try:
            mine = self._write(tmp)
            # Moved aside only if still exactly ours, then linked anew: never written over a
            # lease another taker linked meanwhile.
            if _move_aside(self.path, self._mine):
                try:
                    os.link(tmp, self.path)
                    self._mine = mine
                except FileExistsError:
                    self._mine = None  # taken in the gap: this run goes on unguarded
                    if self._stop is not None:
                        self._stop.set()
                        self._stop = None
        except OSError:
            pass  # the old start stands: a waiter judges it overdue earlier, never later
        finally:
            _unlink(tmp)

    def release(self) -> None:
        """Give up the lease if this attempt holds it; anyone else's is left alone."""
        if self._stop is not None:
            self._stop.set()
            self._stop = None
        mine, self._mine = self._mine, None
        if mine is not None:
            current = _read(self.path)
            if current is not None and current.key == mine.key:
                _move_aside(self.path, current)

    # -- internals -------------------------------------------------------------------------

    def _write(self, tmp: Path) -> Holder:
        body = {"host": socket.gethostname(), "machine": machine_id(), "pid": os.getpid(), "task": self.task,
                "limit_s": self.limit_s, "since": time.time()}
        tmp.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(body))
        return _holder(body, 0.0)

    def _unguarded(self) -> Holder | None:
        """No lease can be written here (a read-only ``.leases``, a filesystem without
        links): still wait for a live holder's; otherwise run unguarded."""
        holder = _read(self.path)
        if holder is not None and holder.task != self.task and self._judge(holder) == "live":
            return holder
        return None

    def _judge(self, h: Holder) -> str:
        """``live``, ``dead`` (gone, or no heartbeat), or ``overdue`` (past its limit)."""
        now = time.monotonic()
        if h.key not in self._seen:
            self._seen.clear()  # only the lease in front of this waiter matters
        mtime, moved, first = self._seen.get(h.key, (h.mtime, now, now))
        if h.mtime != mtime:
            moved = now
        self._seen[h.key] = (h.mtime, moved, first)
        if process_gone(h.host, h.machine, h.pid):
            return "dead"
        if now - moved > self.ttl_s or time.time() - h.mtime > ANCIENT_S:
            return "dead"
        if h.limit_s is not None and now - first > overdue_after_s(h.limit_s):
            return "overdue"
        return "live"

    def _hold(self, mine: Holder) -> None:
        self._mine = mine
        stop = self._stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.heartbeat_s):
                # Only this lease (by content: inode numbers are reused at once): one broken
                # and retaken must age as its new holder's, not be kept fresh by this one.
                current, mine = _read(self.path), self._mine
                if current is None or mine is None or current.key != mine.key:
                    continue  # moved aside for a moment, an NFS hiccup, or not ours now
                try:
                    os.utime(self.path)
                except OSError:
                    continue

        threading.Thread(target=beat, name=f"lease-{self.path.stem}", daemon=True).start()


def release_dead(data: str | Path, run_id: str, task: str) -> bool:
    """Remove the lease of attempt ``task`` (a worker the driver knows is dead), if it is
    that attempt's: on another node it would keep the run from everyone for ``TTL_S``."""
    path = lease_dir(data) / f"{run_id}.json"
    holder = _read(path)
    return holder is not None and holder.task == task and _move_aside(path, holder)


def sweep_leases(data: str | Path, older_than_s: float = ANCIENT_S) -> int:
    """Remove leases no live holder keeps fresh (``older_than_s`` idle), and leftovers."""
    folder = lease_dir(data)
    if not folder.is_dir():
        return 0
    removed, cutoff = 0, time.time() - older_than_s
    for p in folder.iterdir():
        mtime = _mtime(p)
        if mtime is None or mtime >= cutoff:
            continue
        if p.name.startswith("."):  # a killed taker's temporary: nobody else has its name
            _unlink(p)
            removed += 1
        elif _move_aside(p, _read(p)):
            removed += 1
    return removed


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
