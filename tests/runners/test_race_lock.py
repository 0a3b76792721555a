"""The store's race lock: one ``planner race`` per store, released however its holder ends."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from planner.errors import ConfigError
from runners.race_lock import LOCK_NAME, race_lock


def test_a_second_holder_is_refused_in_one_line_naming_the_first(tmp_path: Path) -> None:
    data = tmp_path / "new" / "store"  # created: the race is about to write there
    with race_lock(data):
        who = json.loads((data / LOCK_NAME).read_text())
        assert who["pid"] == os.getpid()
        with pytest.raises(ConfigError) as err, race_lock(data):
            pytest.fail("a second holder ran its body")
        text = str(err.value)
        assert text.startswith("data: another planner race is running on ") and "\n" not in text
        assert f"pid {os.getpid()} on " in text and "give this race its own --data" in text
        assert json.loads((data / LOCK_NAME).read_text()) == who  # the refused taker left it alone
    # Released when the first holder's body ended, and the file and the folders it made are
    # gone: nothing else was put there (a refused race leaves no store behind).
    assert not (tmp_path / "new").exists()
    with race_lock(data):
        (data / "runs").mkdir()
    assert sorted(p.name for p in data.iterdir()) == ["runs"]  # a store stays; the lock does not


def test_the_lock_is_released_when_its_holder_is_killed(tmp_path: Path) -> None:
    # No stale lock to judge: a SIGKILLed race frees its store for the next one at once.
    data = tmp_path / "d"
    code = ("import sys, time; from pathlib import Path; from runners.race_lock import race_lock\n"
            "with race_lock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(data)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=f"pid {proc.pid} on "), race_lock(data):
            pass
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        t0 = time.monotonic()
        with race_lock(data):
            assert time.monotonic() - t0 < 1
    finally:
        proc.kill()
        proc.wait()


def test_a_filesystem_without_locks_races_unlocked_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fcntl

    def no_locks(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    said: list[str] = []
    ran = False
    with race_lock(tmp_path, warn=said.append):
        ran = True
    assert ran and len(said) == 1 and "takes no file locks (No locks available)" in said[0]
    monkeypatch.setattr(fcntl, "flock", lambda fd, op: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error")))
    with pytest.raises(OSError, match="I/O error"), race_lock(tmp_path):  # not a missing feature: raised
        pass


def test_a_link_or_a_folder_in_the_locks_place_is_refused_and_left_alone(tmp_path: Path) -> None:
    # Planted in a shared store, a link had its target truncated and overwritten.
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    data = tmp_path / "d"
    data.mkdir()
    (data / LOCK_NAME).symlink_to(victim)
    with pytest.raises(ConfigError, match=r"^data: .*\.race\.lock is a symbolic link; remove it"), race_lock(data):
        pass
    assert victim.read_text() == "precious" and (data / LOCK_NAME).is_symlink()
    (data / LOCK_NAME).unlink()
    (data / LOCK_NAME).mkdir()
    with pytest.raises(ConfigError, match=r"is not a plain file; remove it"), race_lock(data):
        pass


def test_another_users_lock_file_is_replaced_or_taken_read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A file another user's killed race left (0644) refused O_RDWR: every later race failed
    # with EACCES. It is now locked read-only, deleted while held and made anew as ours.
    import pathlib

    import runners.race_lock as rl

    theirs = tmp_path / LOCK_NAME
    theirs.write_text(json.dumps({"host": "elsewhere", "pid": 1, "started": "then", "command": "old"}))
    their_inode, real_open = theirs.stat().st_ino, os.open

    def their_file_refuses_writes(path: object, flags: int, *args: object) -> int:
        if (str(path).endswith(LOCK_NAME) and flags & os.O_RDWR and os.path.exists(str(path))
                and os.stat(str(path)).st_ino == their_inode):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(rl.os, "open", their_file_refuses_writes)
    with race_lock(tmp_path):
        assert json.loads(theirs.read_text())["pid"] == os.getpid()  # ours now, naming this race
        with pytest.raises(ConfigError, match=f"pid {os.getpid()} on "), race_lock(tmp_path):
            pass
    assert not theirs.exists()
    # In a sticky folder only its owner may delete it: held read-only, and a taker is told
    # the details may be a killed holder's.
    theirs.write_text(json.dumps({"host": "elsewhere", "pid": 1, "started": "then", "command": "old\nline"}))
    their_inode = theirs.stat().st_ino
    real_unlink = pathlib.Path.unlink

    def sticky(self: pathlib.Path, missing_ok: bool = False) -> None:
        if self.name == LOCK_NAME:
            raise PermissionError(errno.EPERM, "Operation not permitted", str(self))
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(pathlib.Path, "unlink", sticky)
    with race_lock(tmp_path):
        with pytest.raises(ConfigError) as err, race_lock(tmp_path):
            pass
    text = str(err.value)
    assert "another user's race; its file says pid 1 on elsewhere, started then: old?line" in text
    assert "\n" not in text
    assert theirs.exists()  # not ours to delete; the race ended without an error


def test_a_lock_on_a_file_deleted_meanwhile_is_not_a_lock(tmp_path: Path) -> None:
    # A holder deletes the file as it ends; a taker that opened it before must not count a
    # lock on the deleted file (a third race would lock the new one beside it).
    from runners.race_lock import _at_path

    path = tmp_path / LOCK_NAME
    path.write_text("")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert _at_path(fd, path)
        path.unlink()
        assert not _at_path(fd, path)
        path.write_text("")  # a new file at the path
        assert not _at_path(fd, path)
    finally:
        os.close(fd)


def test_a_killed_holders_details_are_not_named_as_the_holder(tmp_path: Path) -> None:
    from runners.lease import machine_id
    from runners.race_lock import _holder

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = tmp_path / LOCK_NAME
    import socket

    path.write_text(json.dumps({"host": socket.gethostname(), "machine": machine_id(), "pid": dead.pid, "started": "then", "command": "x"}))
    fd = os.open(path, os.O_RDONLY)
    try:
        assert _holder(fd) == "its holder is still starting"
    finally:
        os.close(fd)
    path.write_text(json.dumps({"host": socket.gethostname(), "machine": machine_id(), "pid": os.getpid(), "started": "now", "command": "y"}))
    fd = os.open(path, os.O_RDONLY)
    try:
        assert _holder(fd) == f"pid {os.getpid()} on {socket.gethostname()}, started now: y"
    finally:
        os.close(fd)


def test_without_file_locks_the_file_and_folder_a_race_made_are_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import fcntl

    monkeypatch.setattr(fcntl, "flock", lambda fd, op: (_ for _ in ()).throw(OSError(errno.ENOLCK, "No locks")))
    data = tmp_path / "new"
    with pytest.raises(RuntimeError), race_lock(data, warn=lambda text: None):
        raise RuntimeError("the race was refused")
    assert not data.exists()


def test_on_nfs_another_users_file_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # NFS locks only files open for writing: EBADF was a bare "Bad file descriptor".
    import fcntl

    import runners.race_lock as rl

    (tmp_path / LOCK_NAME).write_text("")
    real_open = os.open

    def read_only(path: object, flags: int, *args: object) -> int:
        if str(path).endswith(LOCK_NAME) and flags & os.O_RDWR:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(rl.os, "open", read_only)
    monkeypatch.setattr(fcntl, "flock", lambda fd, op: (_ for _ in ()).throw(OSError(errno.EBADF, "Bad fd")))
    with pytest.raises(ConfigError, match=r"^data: .*\.race\.lock is another user's race lock, .*delete it and rerun$"):
        with race_lock(tmp_path):
            pass


def test_race_running_names_a_live_holder_and_not_a_killed_ones_file(tmp_path: Path) -> None:
    """`runners execute` asks before adding runs: a run added beside a race overshoots its caps."""
    from runners.race_lock import race_running

    data = tmp_path / "d"
    assert race_running(data) is None  # no store yet
    with race_lock(data):
        said = race_running(data)
        assert said is not None and said.startswith(f"pid {os.getpid()} on ")
        assert race_running(data) == said  # a probe: it took nothing from the holder
    assert race_running(data) is None
    # A SIGKILLed race leaves its file; nothing holds it, so no race is running.
    data.mkdir()
    (data / LOCK_NAME).write_text(json.dumps({"host": "h", "pid": 1, "started": "then", "command": "planner race"}))
    assert race_running(data) is None
    (data / LOCK_NAME).unlink()
    os.mkfifo(data / LOCK_NAME)  # never opened blocking (a FIFO would wait for a writer)
    assert race_running(data) is None


def test_race_running_hedges_another_users_file_and_refuses_one_it_cannot_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from runners.race_lock import race_running

    data = tmp_path / "d"
    with race_lock(data):
        me = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: me + 1)
        # Its live holder may hold it read-only, a killed race's details in it.
        assert (race_running(data) or "").startswith("another user's race; its file says pid ")
    monkeypatch.undo()
    data.mkdir()
    (data / LOCK_NAME).write_text("{}")
    real_open = os.open

    def made_under_umask_077(path: object, flags: int, *args: object) -> int:
        if str(path).endswith(LOCK_NAME):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", made_under_umask_077)
    for taker in (lambda: race_running(data), lambda: race_lock(data).__enter__()):
        with pytest.raises(ConfigError) as err:
            taker()
        text = str(err.value)
        assert text.startswith(f"data: {data / LOCK_NAME} is another user's race lock, which this user cannot read")
        assert "own --data" in text and "\n" not in text


def test_a_refused_taker_leaves_the_holders_new_file_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two races at once on a new store: the one that made the file but lost the lock deleted
    # the winner's file on its way out, so a third race could lock a new one beside the winner.
    data = tmp_path / "d"
    with race_lock(data):
        monkeypatch.setattr(os.path, "lexists", lambda p: False)  # as if this taker had made it
        with pytest.raises(ConfigError, match="another planner race is running"), race_lock(data):
            pass
        monkeypatch.undo()
        assert json.loads((data / LOCK_NAME).read_text())["pid"] == os.getpid()


def test_a_probe_beside_a_starting_race_does_not_refuse_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A probe holds a left-behind file's shared lock for microseconds; a race that meets it
    # then tries once more instead of naming a race that is not there.
    import fcntl

    data = tmp_path / "d"
    data.mkdir()
    (data / LOCK_NAME).write_text("{}")
    probe = os.open(data / LOCK_NAME, os.O_RDONLY)
    fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
    real_sleep = time.sleep

    def let_go(s: float) -> None:
        os.close(probe)
        real_sleep(s)

    monkeypatch.setattr(time, "sleep", let_go)
    with race_lock(data):
        assert json.loads((data / LOCK_NAME).read_text())["pid"] == os.getpid()
