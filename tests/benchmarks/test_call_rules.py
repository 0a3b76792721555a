"""call_rules.py replays the benchmark's own races: its `ours` column is what planner_bench's
race makes of the same repetition.

Compared side by side, in one process, not with a stored file: a race is a chain of GP fits
and acquisition choices, and another CPU's floating-point rounding (BLAS kernels differ
between machines) can move a near-tied choice and with it the rest of the race. The stored
races replay exactly only at their commit (before 12-02 the sim's noise key held no world
name) and on the machine that stored them.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType


def test_ours_column_replays_the_benchmark_race(load_script: Callable[..., ModuleType]) -> None:
    pb = load_script("planner_bench")  # call_rules imports it by name
    rules = load_script("call_rules", "call_rules_t")
    # shifted rep 0: in the stored run (world-blind noise) the race with the fewest rounds (7)
    # that got calls wrong.
    # Half the benchmark's FLOP cap: the same replay (anchors included) at half the suite's
    # time (two races took 200 s of it on a slow box).
    cap = pb.FLOPS_PER_SETTING / 2
    row = rules.world_calls("shifted", [0], cap)[0]
    problem = pb.RaceProblem(tuple(pb.Setting(m, r) for m in pb.POLICIES_QWEN for r in pb.REWARDS), budget=1e16,
                             pilot_budget=1e15, target="native", confidence=0.9)
    n = len(problem.settings)
    bench = pb._race("ours", "shifted", 0, problem, pb.Truth("shifted", problem),
                     max_runs=pb.RUNS_PER_SETTING * n, max_flops=cap * n * problem.budget,
                     n_anchor=pb.N_ANCHOR, anchor="stratified", cost_power=0.5)
    assert [x["ours"] for x in row] == bench.same
    assert [x["confident"] for x in row] == bench.confident
    for x in row:  # every rule called every setting, from ours' target-budget runs
        assert set(x) == {"ours", "quadratic", "hybrid", "confident", "target_runs"} and x["target_runs"] >= 2
        assert x["hybrid"] == (x["ours"] if x["confident"] else x["quadratic"])
