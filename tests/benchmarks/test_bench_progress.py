"""The benchmark's live progress: one bar per world that counts finished repetitions."""

from __future__ import annotations

import queue
import re
import time
from collections.abc import Callable
from types import ModuleType, SimpleNamespace

import pytest

from planner.frontier import Setting
from planner.strategies import RaceProblem


@pytest.fixture(scope="module")
def progress(load_script: Callable[..., ModuleType]) -> ModuleType:
    return load_script("bench_progress", "bench_progress_t")


def _outcome(world: str, rep: int) -> SimpleNamespace:
    return SimpleNamespace(world=world, rep=rep, strategy="ours", same=[True, False], regret=[0.001, 0.003],
                           flops=12.0, stop="max-flops")


def test_bars_count_each_worlds_repetitions_and_race_lines_print_whole(
    progress: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    with progress.bench_progress(["flat", "paper"], 2, time.perf_counter(), queue.SimpleQueue()) as log:
        log(_outcome("flat", 0))
        log.rep_done("flat")
        log.rep_done("flat")
        log.rep_done("paper")
    out = capsys.readouterr().out
    # The race line is printed once and unwrapped, above the bars.
    assert len(re.findall(r"flat rep 0 ours +same 0\.50 regret 0\.0020 flops 12\.0 stop max-flops\n", out)) == 1
    assert re.search(r"flat .*2/2 reps", out) and re.search(r"paper .*1/2 reps", out)


def test_without_a_queue_the_log_prints_directly(progress: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    log = progress.Log(time.perf_counter())
    log(_outcome("noisy", 3))
    log.rep_done("noisy")  # nothing to advance
    assert "noisy rep 3 ours" in capsys.readouterr().out


def test_bench_world_reports_one_event_per_repetition(load_script: Callable[..., ModuleType]) -> None:
    bench = load_script("planner_bench", "planner_bench_p")
    prog = load_script("bench_progress")
    problem = RaceProblem((Setting("qwen2.5-1.5b", "sparse"),), budget=1e16, pilot_budget=1e15)
    events: queue.SimpleQueue = queue.SimpleQueue()
    out = bench.bench_world("flat", problem, [0, 1], ["grid", "random"], True, prog.Log(0.0, events), 1e16)
    seen = []
    while not events.empty():
        seen.append(events.get())
    assert [(k, w) for k, w, _ in seen if k == "rep"] == [("rep", "flat")] * 2
    # Each random race is logged (grid designs are many and quick: only counted).
    assert sum(k == "race" for k, _, _ in seen) == sum(o.strategy == "random" for o in out) == 2
