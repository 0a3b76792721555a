"""SIGKILL `runners execute` partway through 20 sim proposals; the rerun finishes the rest.

Sim runs take microseconds, too fast to kill "partway" reliably, so the engine here is the
real sim engine paced to ~0.15 s a run (the records are exactly the sim's).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from planner.compiler import compile_plan
from planner.engine import ProgressFn
from planner.proposals import make_proposal, write_proposals
from planner.schema import Proposal, RunRecord, run_id_for
from runners.engines.sim import SimEngine
from runners.store import PilotStore

HERE = Path(__file__).parent


class PacedSim(SimEngine):
    """The sim engine at ``steps`` x ``pause`` seconds a run, reporting progress each step."""

    steps, pause = 3, 0.05

    def run(self, proposal: Proposal, seed: int, progress: ProgressFn | None = None) -> RunRecord:
        for i in range(self.steps):
            time.sleep(self.pause)
            if progress is not None:
                progress("search", proposal.budget * i / self.steps, proposal.budget, {})
        return super().run(proposal, seed, progress)


def proposals(tmp: Path) -> tuple[Path, list[str]]:
    props = [
        make_proposal(compile_plan(model, reward, 0.66 + 0.03 * i, 1e12))
        for model in ("tiny-s", "tiny-m") for reward in ("sparse", "dense") for i in range(5)
    ]
    path = write_proposals(tmp / "proposals.json", props)
    return path, sorted(run_id_for(p.id, 0) for p in props)


def runners(args: list[str], **kw: Any) -> subprocess.Popen[str]:
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-c", "from runners.cli import main; main()", *args]
    return subprocess.Popen(cmd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def execute_args(path: Path, data: Path, engine: str) -> list[str]:
    """`runners execute` of ``path`` into ``data`` with two workers and the test ``engine``."""
    return ["execute", str(path), "--data", str(data), "--engine", f"test_execute_kill:{engine}",
            "--workers", "2", "--json"]


def wait_for(proc: subprocess.Popen[str], folder: Path, pattern: str, count: int, step: float = 0.01) -> None:
    """Until ``folder`` holds ``count`` files matching ``pattern`` (at most 60 s, or until
    ``proc`` ends)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if folder.is_dir() and len(list(folder.glob(pattern))) >= count:
            return
        time.sleep(step)


def test_sigkill_then_rerun_gives_exactly_twenty(tmp_path: Path) -> None:
    path, expected = proposals(tmp_path)
    data = tmp_path / "data"
    args = execute_args(path, data, "PacedSim")
    first = runners(args)
    runs = data / "runs"
    wait_for(first, runs, "*.parquet", 5)
    assert first.poll() is None, first.communicate()
    os.kill(first.pid, signal.SIGKILL)  # no cleanup of any kind in the driver
    first.wait()
    assert first.returncode == -signal.SIGKILL
    time.sleep(0.5)  # orphaned workers finish the run in hand, write it, then exit
    at_kill = PilotStore(data).run_ids()
    assert 5 <= len(at_kill) < 20, len(at_kill)

    second = runners(args)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    summary = json.loads(out)
    assert summary["skipped"] >= len(at_kill) and summary["ok"] + summary["skipped"] == 20

    store = PilotStore(data)
    scan = store.scan(status=None)
    assert scan.corrupt == []
    ok = [r for r in scan.records if r.status == "ok"]
    assert sorted(r.run_id for r in ok) == expected  # exactly 20, no duplicates
    assert len(list(runs.glob("*.parquet"))) == 20
    assert at_kill <= {r.run_id for r in ok}


def test_ctrl_c_says_what_is_kept_and_exits_130(tmp_path: Path) -> None:
    path, _ = proposals(tmp_path)
    data = tmp_path / "data"
    first = runners(execute_args(path, data, "PacedSim"))
    wait_for(first, data / "runs", "*.parquet", 3)
    os.kill(first.pid, signal.SIGINT)
    _, err = first.communicate(timeout=60)
    assert first.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith(f"interrupted: the finished runs are kept in {data}")
    assert PilotStore(data).scan(status=None).corrupt == []


class SlowSim(PacedSim):
    """3 s a run: long enough to be inside one when the driver is stopped."""

    steps, pause = 30, 0.1


def test_sigterm_stops_the_workers_too_and_exits_143(tmp_path: Path) -> None:
    # `timeout`, `scancel` and `kill` send SIGTERM: the driver used to die at once and leave
    # its workers to finish (and record) the runs in hand after the command had ended.
    path, _ = proposals(tmp_path)
    data = tmp_path / "data"
    first = runners(execute_args(path, data, "SlowSim"))
    wait_for(first, data / ".progress", "*.json", 1, step=0.02)
    time.sleep(0.3)  # inside the runs
    os.kill(first.pid, signal.SIGTERM)
    _, err = first.communicate(timeout=60)
    assert first.returncode == 143, err
    assert err.strip().splitlines()[-1].startswith(f"interrupted: the finished runs are kept in {data}")
    time.sleep(3.5)  # an orphaned worker would have finished and recorded its run by now
    assert PilotStore(data).scan(status=None).records == []
    # The stopped attempts' leases and progress files go with them: a rerun from another
    # host would wait out each lease's TTL (the local host sees the dead pid).
    assert list((data / ".leases").glob("*.json")) == [] and list((data / ".progress").glob("*.json")) == []


def _starting_worker(driver: int) -> int | None:
    """A spawned worker of ``driver`` that is importing: it has its Ctrl-C handler (an
    earlier SIGINT would kill it silently, hiding the bug) and is still in the driver's
    process group (the worker leaves it first thing once its imports are done)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            ppid, pgrp = int(stat[1]), int(stat[2])
            if ppid != driver or pgrp != driver or b"spawn_main" not in (entry / "cmdline").read_bytes():
                continue
            caught = next(line for line in (entry / "status").read_text().splitlines() if line.startswith("SigCgt:"))
        except (OSError, ValueError, IndexError, StopIteration):
            continue  # gone, or not yet exec'd
        if int(caught.split()[1], 16) & (1 << (signal.SIGINT - 1)):
            return int(entry.name)
    return None


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="finds the starting workers in /proc")
def test_ctrl_c_while_workers_start_prints_no_worker_traceback(tmp_path: Path) -> None:
    # The terminal's Ctrl-C goes to its whole process group, which a spawned worker was still
    # in for its first second or so of imports: it died there printing a KeyboardInterrupt
    # traceback (one per worker) around the driver's one line. The window is hit directly
    # here, a few times over.
    path, _ = proposals(tmp_path)
    for attempt in range(3):
        data = tmp_path / f"data{attempt}"
        # Its own session, as a shell's foreground job: the group can be sent Ctrl-C.
        driver = runners(["execute", str(path), "--data", str(data), "--engine", "sim", "--workers", "2"],
                         start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while (worker := _starting_worker(driver.pid)) is None:
                assert driver.poll() is None and time.monotonic() < deadline, "no worker seen starting"
                time.sleep(0.005)
            os.killpg(driver.pid, signal.SIGINT)
            _, err = driver.communicate(timeout=60)
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait()
        assert driver.returncode == 130, err
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, f"worker {worker}:\n{err}"
        assert err.strip().splitlines()[-1].startswith(f"interrupted: the finished runs are kept in {data}"), err
