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
    with race_lock(data):  # released when the first holder's body ended
        pass


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
