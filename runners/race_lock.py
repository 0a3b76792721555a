"""One race per store: the lock ``planner race`` holds on its pilot store while it races.

Two races on one store each count the store's runs against ``--max-runs`` and
``--max-flops`` only when they start, so together they overshot the caps (two races capped
at 14 left 15 runs); without workers they could run the same run twice, and the later one
to end replaced the other's ``regimes.json``. A run's lease (:mod:`runners.lease`) stops
the duplicate run but not the overshoot: the caps are the race's, so the race holds the
lock.

The lock is ``DIR/.race.lock`` under ``flock``: the kernel releases it when its holder's
process ends however it ends (a SIGKILL, a lost node's NFS client), so there is no stale
lock to judge. The file says who holds it (host, pid, start, command) for the refusal's
message, and exists only while a race holds it: the holder deletes it before letting go
(so another user of a shared store never meets a file it may not open), and a taker that
finds it locked a file no longer at the path (deleted meanwhile) tries again. A folder the
lock created is removed again if nothing else was put in it (a refused race leaves no
store behind). NFS mounts without lock support raise on ``flock``: the race then runs
unlocked and says so, as it did before the lock.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import stat
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from planner.errors import ConfigError
from planner.files import default_file_mode, shown_path
from runners.lease import machine_id, process_gone

__all__ = ["LOCK_NAME", "race_lock", "race_running"]

LOCK_NAME = ".race.lock"
# What flock raises where the filesystem keeps no locks (an NFS mount without lockd).
_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)
# Takers that found the file deleted under them try again; only a file replaced on every
# try (something else writing it) ends the loop.
_TRIES = 20


@contextlib.contextmanager
def race_lock(data: Path, *, field: str = "data", warn: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the store's race lock for the ``with`` body; refuse with a one-line
    :class:`ConfigError` naming ``field`` while another process holds it. Creates ``data``
    for the body (removed again at the end if it is still empty). ``warn`` is told when the
    filesystem has no locks."""
    import fcntl

    made = _make_folders(data)
    path = data / LOCK_NAME
    fd, locked, created, waited = -1, False, False, False
    try:
        for _ in range(_TRIES):
            created = not os.path.lexists(path)
            fd, writable = _open(path, field)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                created = False  # another holder's now: a refused taker must not delete it
                if not waited:
                    # Once more after a moment: a `runners execute` probing a file a killed race
                    # left holds it for microseconds (race_running), and is no race.
                    waited = True
                    os.close(fd)
                    fd = -1
                    time.sleep(0.05)
                    continue
                raise ConfigError(
                    f"{field}: another planner race is running on {shown_path(data)} ({_holder(fd, writable)}); two "
                    "races on one store overshoot each other's caps: wait for it to end, or give this race its own "
                    "--data"
                ) from None
            except OSError as exc:
                if exc.errno == errno.EBADF and not writable:
                    # NFS locks only files open for writing, and this one is another user's.
                    raise ConfigError(
                        f"{field}: {shown_path(path)} is another user's race lock, which this filesystem cannot "
                        "lock read-only; if no race is running on this store, delete it and rerun"
                    ) from None
                if exc.errno not in _NO_LOCKS:
                    raise
                if warn is not None:
                    warn(f"{shown_path(data)} takes no file locks ({exc.strerror}): another race started on this "
                         "store now would not be refused, and the two would overshoot each other's caps")
                break
            if not _at_path(fd, path):
                os.close(fd)  # its holder deleted it as it ended: a lock on it guards nothing now
                fd = -1
                continue
            if writable:
                locked = True
                break
            # Held, but another user's file (a killed holder left it): ours would name this
            # race to the next taker. Deleted while held (as a holder ends), then made anew.
            try:
                path.unlink()
            except OSError:  # a sticky folder: only its owner may delete it; hold it read-only
                locked = True
                break
            os.close(fd)
            fd = -1
        else:
            raise ConfigError(f"{field}: {shown_path(path)} kept being replaced while this race tried to lock it; "
                              "rerun, and check that nothing else writes that file")
        if locked and writable:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(_me()).encode(), 0)
        yield
    finally:
        try:
            if fd >= 0 and (locked or created):
                # Deleted while still held, so no taker can lock this file after us (without
                # locks: only the file this race made).
                with contextlib.suppress(OSError):
                    if locked or _at_path(fd, path):
                        path.unlink()
        finally:
            if fd >= 0:
                os.close(fd)
            for folder in made:  # deepest first; one that holds anything stays
                try:
                    folder.rmdir()
                except OSError:
                    break


def race_running(data: Path, field: str = "data") -> str | None:
    """Who holds ``data``'s race lock, on one line as a refusal names it; None where no race
    does (no lock file, or one a killed race left). ``runners execute`` asks before it adds
    runs: a run added beside a race overshoots that race's caps. A probe, not a hold: a
    shared lock taken and dropped at once, and only where the file exists. A lock file
    this user cannot read is a one-line :class:`ConfigError` naming ``field``: whether a
    race holds it cannot be told."""
    import fcntl

    path = data / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except PermissionError:
        if not os.access(data, os.X_OK):
            return None  # a folder this user cannot enter: the store's own checks say so
        raise _unreadable(path, field, "these runs their") from None
    except OSError:
        return None  # none there; a link or a folder there, which the race itself refuses
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            # Another user's file may still hold a killed race's details (its live holder
            # could only read it, as race_lock says of it).
            return _holder(fd, writable=os.fstat(fd).st_uid == os.geteuid())
        except OSError:
            return None  # no locks here (read-only on NFS, no lockd): a race runs unlocked too
        return None
    finally:
        os.close(fd)  # drops the probe's lock with it


def _make_folders(data: Path) -> list[Path]:
    """Create ``data`` and its missing parents; the ones created, deepest first."""
    missing, probe = [], data
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    data.mkdir(parents=True, exist_ok=True)
    return missing


def _open(path: Path, field: str) -> tuple[int, bool]:
    """The lock file's descriptor, created if absent, and whether it is open for writing:
    read-only where another user's file refuses writes (flock takes either). Never through
    a link: a link planted in a shared store would have had its target truncated."""
    flags = os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        try:
            fd, writable = os.open(path, os.O_RDWR | os.O_CREAT | flags, default_file_mode()), True
        except PermissionError:
            try:
                fd, writable = os.open(path, os.O_RDONLY | flags), False
            except PermissionError:
                raise _unreadable(path, field, "this race its") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigError(f"{field}: {shown_path(path)} is a symbolic link; remove it (the race lock is a "
                              "plain file the race makes)") from None
        if exc.errno == errno.EISDIR:
            raise ConfigError(f"{field}: {shown_path(path)} is not a plain file; remove it (the race lock is a "
                              "plain file the race makes)") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ConfigError(f"{field}: {shown_path(path)} is not a plain file; remove it (the race lock is a plain "
                          "file the race makes)")
    return fd, writable


def _unreadable(path: Path, field: str, whose: str) -> ConfigError:
    """The refusal where another user's lock file cannot even be read (made under umask 077)."""
    return ConfigError(f"{field}: {shown_path(path)} is another user's race lock, which this user cannot read, so "
                       f"whether a race is running on the store cannot be told; if none is, have its owner delete "
                       f"it, or give {whose} own --data")


def _at_path(fd: int, path: Path) -> bool:
    """Whether the file open as ``fd`` is still the one at ``path``."""
    try:
        there = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    here = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _me() -> dict[str, object]:
    return {"host": socket.gethostname(), "machine": machine_id(), "pid": os.getpid(),
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]])[:300]}


def _holder(fd: int, writable: bool = True) -> str:
    """Who holds the lock, as its file says, on one line. The holder may be between its
    lock and its write, over a file a killed holder left: a dead pid on this machine says so
    too. Details in a file this taker could only read may be a killed holder's."""
    starting = "its holder is still starting"
    try:
        who = json.loads(os.pread(fd, 4096, 0))
        pid, host = int(who["pid"]), str(who["host"])
        if process_gone(host, str(who.get("machine", "")), pid):
            return starting
        said = f"pid {pid} on {host}, started {who['started']}: {who['command']}"
    except (OSError, ValueError, TypeError, KeyError):
        return starting
    said = "".join(c if c.isprintable() else "?" for c in said)  # argv may hold a newline
    return said if writable else f"another user's race; its file says {said}"
