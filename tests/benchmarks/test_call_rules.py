"""call_rules.py replays the benchmark's own races: its `ours` column is the stored result."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

# Races fitted in the canonical record order (the main results file predates it).
STORED = (Path(__file__).resolve().parents[2] / "benchmarks" / "results"
          / "planner_bench_ours_canonical_order_reps0-2.json")


def test_ours_column_replays_the_stored_benchmark_races(load_script: Callable[..., ModuleType]) -> None:
    load_script("planner_bench")  # call_rules imports it by name
    rules = load_script("call_rules", "call_rules_t")
    # shifted rep 0: the stored race with the fewest rounds (7) that still gets calls wrong.
    row = rules.world_calls("shifted", [0], 6.0)[0]
    stored = next(o for o in json.loads(STORED.read_text())["outcomes"]
                  if o["strategy"] == "ours" and o["world"] == "shifted" and o["rep"] == 0)
    assert not all(stored["same"]) and len(stored["curve"]) == 7
    assert [x["ours"] for x in row] == stored["same"]
    for x in row:  # every rule called every setting, from ours' target-budget runs
        assert set(x) == {"ours", "quadratic", "hybrid", "confident", "target_runs"} and x["target_runs"] >= 2
        assert x["hybrid"] == (x["ours"] if x["confident"] else x["quadratic"])
