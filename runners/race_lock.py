"""One race per store: the lock ``planner race`` holds on its pilot store while it races.

Two races on one store each count the store's runs against ``--max-runs`` and
``--max-flops`` only when they start, so together they overshot the caps (two races capped
at 14 left 15 runs); without workers they could run the same run twice, and the later one
to end replaced the other's ``regimes.json``. A run's lease (:mod:`runners.lease`) stops
the duplicate run but not the overshoot: the caps are the race's, so the race holds the
lock.

The lock is ``DIR/.race.lock`` under ``flock``: the kernel releases it when its holder's
process ends however it ends (a SIGKILL, a lost node's NFS client), so there is no stale
lock to judge or sweep. The file says who holds it (host, pid, start, command) for the
refusal's message. NFS mounts without lock support raise on ``flock``: the race then runs
unlocked and says so, as it did before the lock.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from planner.errors import ConfigError
from planner.files import default_file_mode, shown_path

__all__ = ["LOCK_NAME", "race_lock"]

LOCK_NAME = ".race.lock"


@contextmanager
def race_lock(data: Path, *, field: str = "data", warn: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the store's race lock for the ``with`` body; refuse with a one-line
    :class:`ConfigError` naming ``field`` while another process holds it. Creates ``data``
    (the race is about to write into it). ``warn`` is told when the filesystem has no locks."""
    import fcntl

    data.mkdir(parents=True, exist_ok=True)
    fd = os.open(data / LOCK_NAME, os.O_RDWR | os.O_CREAT, default_file_mode())
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(
                f"{field}: another planner race is running on {shown_path(data)} ({_holder(fd)}); two races on one "
                "store overshoot each other's caps: wait for it to end, or give this race its own --data"
            ) from None
        except OSError as exc:
            if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise
            if warn is not None:
                warn(f"{shown_path(data)} takes no file locks ({exc.strerror}): another race started on this "
                     "store now would not be refused, and the two would overshoot each other's caps")
            yield
            return
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(_me()).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def _me() -> dict[str, object]:
    return {"host": socket.gethostname(), "pid": os.getpid(),
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]])[:300]}


def _holder(fd: int) -> str:
    """Who holds the lock, as its file says; the holder may be between its lock and its
    write, so an empty or partial file says so instead."""
    try:
        who = json.loads(os.pread(fd, 4096, 0))
        return f"pid {who['pid']} on {who['host']}, started {who['started']}: {who['command']}"
    except (OSError, ValueError, TypeError, KeyError):
        return "its holder is still starting"
