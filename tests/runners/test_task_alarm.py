"""The in-worker hard time limit (``runners.task._alarm``)."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from runners import task
from runners.task import RunFailed, _alarm
from runners.tasks.answers import verify

pytestmark = pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="no POSIX signals here")


def test_the_limit_raises_a_timeout_and_restores_the_handler() -> None:
    sig = getattr(task, "ALARM_SIGNAL", signal.SIGALRM)
    before = signal.getsignal(sig)
    t0 = time.monotonic()
    with pytest.raises(RunFailed, match="time limit") as exc, _alarm(0.5):
        time.sleep(5)
    assert exc.value.kind == "timeout" and time.monotonic() - t0 < 2
    assert signal.getsignal(sig) is before
    with _alarm(0.3):  # a block that ends in time: nothing fires later
        pass
    time.sleep(0.6)


def test_the_limit_survives_answer_checks() -> None:
    # math-verify times itself with signal.alarm(n) / alarm(0) on the main thread; on
    # ITIMER_REAL that cancelled the run's limit at the first reward call.
    t0 = time.monotonic()
    with pytest.raises(RunFailed), _alarm(1.0):
        assert verify("\\frac12", "0.5", exact_shortcut=False)
        time.sleep(5)
    assert time.monotonic() - t0 < 3


def test_a_swallowed_timeout_fires_again() -> None:
    # math-verify catches every exception its parser raises: a limit that fires once, in
    # there, must not be lost.
    swallowed = 0
    with pytest.raises(RunFailed), _alarm(0.3):
        try:
            time.sleep(5)
        except RunFailed:
            swallowed += 1
        time.sleep(5)
    assert swallowed == 1


def test_a_run_deaf_to_the_signal_and_stopped_past_its_limit_is_a_timeout() -> None:
    # A backend's cancel of a run that blocks the signal (submitit's SIGINT) ends it with
    # KeyboardInterrupt: past the limit that is the run's timeout, with its partial card.
    sig = getattr(task, "ALARM_SIGNAL", signal.SIGALRM)
    old = signal.getsignal(sig)
    try:
        with pytest.raises(RunFailed) as exc, _alarm(0.2):
            signal.pthread_sigmask(signal.SIG_BLOCK, {sig})
            time.sleep(0.5)
            raise KeyboardInterrupt
        assert exc.value.kind == "timeout"
        with pytest.raises(KeyboardInterrupt), _alarm(5):  # before the limit: not a timeout
            raise KeyboardInterrupt
    finally:
        signal.signal(sig, signal.SIG_IGN)  # drop the signal left pending, then unblock
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        signal.signal(sig, old)


def test_off_the_main_thread_it_does_nothing() -> None:
    done: list[bool] = []

    def body() -> None:
        with _alarm(0.1):
            time.sleep(0.4)
        done.append(True)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert done == [True]


def test_a_sub_second_time_limit_is_named_by_its_value_not_as_zero() -> None:
    # `--timeout-min 0.0001` failed its run with "time limit of 0 s".
    from runners.task import _secs

    assert [_secs(s) for s in (0.006, 3.5, 60.0, 14400.0)] == ["0.006 s", "3.5 s", "60 s", "14400 s"]


def test_a_limit_past_what_threads_can_wait_keeps_its_watchdog(monkeypatch: pytest.MonkeyPatch) -> None:
    # A wait past threading.TIMEOUT_MAX raised OverflowError in the watchdog: one traceback
    # per run on stderr, and no limit at all.
    died: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: died.append(args.exc_value))
    with _alarm(threading.TIMEOUT_MAX * 10):
        time.sleep(0.2)
    assert died == []
