"""benchmarks/order_sensitivity.py: the stored main races against the same races fitted in
a canonical record order (the numbers docs/benchmark.md quotes)."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType


def test_compare_counts_changed_calls_on_hand_made_races(load_script: Callable[..., ModuleType]) -> None:
    m = load_script("order_sensitivity", "order_sensitivity_t")

    def race(same: list[bool], regret: list[float]) -> dict:
        return {"same": same, "regret": regret, "flops_target_units": 6.0}

    before = {("w", 0): race([True, True], [0.1, 0.3]), ("w", 1): race([False, True], [0.0, 0.0])}
    after = {("w", 0): race([True, False], [0.2, 0.2]), ("w", 1): race([False, True], [0.0, 0.0]),
             ("w", 2): race([True, True], [0.0, 0.0])}  # only in one file: not compared
    r = m.compare(before, after)
    assert (r["races"], r["changed"], r["calls"], r["right"]) == (2, 1, 4, [3, 2])
    assert [line[-1] for line in r["lines"]] == [False, True]


def test_stored_files_give_the_quoted_totals(load_script: Callable[..., ModuleType]) -> None:
    m = load_script("order_sensitivity", "order_sensitivity_t")
    first = m.compare(m.ours(m.BEFORE), m.ours(m.AFTER[0]))  # repetitions 0-2
    assert (first["races"], first["changed"], first["calls"], first["right"]) == (15, 19, 90, [75, 72])
    assert sum(not line[-1] for line in first["lines"]) == 12  # races whose calls changed
    r = m.compare(m.ours(m.BEFORE), m.merged(m.AFTER))  # all ten
    assert (r["races"], r["changed"], r["calls"], r["right"]) == (50, 46, 300, [253, 255])
    assert sum(not line[-1] for line in r["lines"]) == 31
    assert [round(x, 4) for x in r["regret_median"]] == [0.0014, 0.0014]


def test_summary_gives_the_quoted_pooled_and_per_world_figures(load_script: Callable[..., ModuleType]) -> None:
    m = load_script("order_sensitivity", "order_sensitivity_t")
    after = m.summary(m.merged(m.AFTER))
    assert (round(after["same"], 3), round(after["se"], 3)) == (0.850, 0.021)
    assert after["decidable"] == (68, 70) and after["confident"] == (136, 141)
    assert round(after["flops"], 1) == 35.1 and round(after["regret_median"], 4) == 0.0014
    worlds = {w: round(m.summary(m.merged(m.AFTER), w)["same"], 3)
              for w in ("contrast", "flat", "noisy", "paper", "shifted")}
    assert worlds == {"contrast": 0.683, "flat": 0.983, "noisy": 0.867, "paper": 0.900, "shifted": 0.817}
    before = m.summary(m.ours(m.BEFORE))
    assert (round(before["same"], 3), before["decidable"], before["confident"]) == (0.843, (67, 70), (130, 133))


def test_merging_files_that_share_a_repetition_is_refused(load_script: Callable[..., ModuleType]) -> None:
    import pytest

    from planner.errors import ConfigError

    m = load_script("order_sensitivity", "order_sensitivity_t")
    with pytest.raises(ConfigError, match="repeats contrast rep 0 of an earlier file"):
        m.merged([m.AFTER[0], m.AFTER[0]])  # a later file would overwrite the earlier one's races
