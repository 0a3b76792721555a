"""benchmarks/duel_vs_shape.py: the grid against the oracle duel at equal target runs."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest

from planner.frontier import Setting
from planner.strategies import RaceProblem


@pytest.fixture(scope="module")
def mods(load_script: Callable[..., ModuleType]) -> tuple[ModuleType, ModuleType]:
    return load_script("planner_bench"), load_script("duel_vs_shape")


def test_duel_at_equal_runs_and_the_settings_the_grid_wins(mods: tuple[ModuleType, ModuleType]) -> None:
    bench, dvs = mods
    settings = (Setting("qwen2.5-1.5b", "sparse"), Setting("qwen2.5-7b", "prm"))
    config = {"worlds": ["paper"], "models": ["qwen2.5-1.5b", "qwen2.5-7b"], "rewards": ["sparse", "prm"],
              "budget": 1e16, "pilot_budget": 1e15, "target": "native"}

    def out(cfg: str, same: list[bool], strategy: str = "grid") -> dict:
        # Four settings (models x rewards) in config order; only two are scored below.
        return {"world": "paper", "strategy": strategy, "config": cfg, "same": same}

    # 7b prm (4th setting) right every time at 6 runs: its gap is ~0.04 noise sd, a duel's coin flip.
    outcomes = [out("3pts x2 @target", [True, False, True, True]) for _ in range(4)]
    outcomes += [out("3pts x2 @pilot", [False] * 4), out("", [False] * 4, "ours")]  # not compared
    rows = dvs.compare({"config": config, "outcomes": outcomes}, margin=0.3)
    assert [(r["world"], r["design"], r["runs"]) for r in rows] == [("paper", "3pts x2 @target", 6)]
    r = rows[0]
    assert r["grid"] == pytest.approx(0.75)
    problem = RaceProblem(tuple(Setting(m, w) for m in config["models"] for w in config["rewards"]),
                          budget=1e16, pilot_budget=1e15)
    assert r["duel"] == pytest.approx(bench.oracle_duel(bench.Truth("paper", problem), 3))
    won = {k for k, *_ in r["wins"]}
    assert settings[1].key in won  # 1.0 vs ~0.5
    assert settings[0].key not in won  # the duel settles 1.5b sparse (gap 1.1 sd) too
    assert "qwen2.5-1.5b/prm" not in won  # the grid was wrong there


def test_non_decidable_compares_ours_with_the_grid_on_undecidable_calls_only(
        mods: tuple[ModuleType, ModuleType]) -> None:
    _, dvs = mods

    def out(world: str, strategy: str, config: str, same: list[bool]) -> dict:
        return {"world": world, "strategy": strategy, "config": config, "same": same,
                "decidable": [True, False, False]}

    outcomes = [out("shifted", "ours", "", [False, True, False]),
                out("shifted", "grid", "3pts x2 @target", [True, True, True]),
                out("paper", "ours", "", [False, True, True]), out("paper", "grid", "3pts x2 @target", [True, False, False]),
                out("flat", "ours", "", [False, True, True]), out("flat", "grid", "3pts x2 @target", [True, False, False])]
    config = {"worlds": ["shifted", "paper", "flat"]}
    rows = {r["worlds"]: r for r in dvs.non_decidable({"config": config, "outcomes": outcomes})}
    assert rows["shifted"]["calls"] == 2 and rows["shifted"]["ours"] == 0.5 and rows["shifted"]["grid"] == 1.0
    # Shifted only: paper and flat have one true regime everywhere, so they are not mixed.
    assert rows["mixed"]["calls"] == 2 and rows["mixed"]["diff_se"] > 0
    assert rows["all"]["calls"] == 6 and rows["all"]["ours"] == pytest.approx(5 / 6)
    assert rows["all"]["grid"] == pytest.approx(1 / 3) and rows["all"]["diff_se"] < 0


def test_paper_is_not_a_mixed_regime_world(mods: tuple[ModuleType, ModuleType]) -> None:
    _, dvs = mods
    assert set(dvs.MIXED) == {"contrast", "shifted"}


def test_the_duel_uses_the_gaps_the_files_calls_were_scored_against(mods: tuple[ModuleType, ModuleType]) -> None:
    """A file's ``same`` was scored against the sim's truth of its day, whose gaps it stores
    with every outcome; the duel beside it must rest on those gaps, not on today's truth
    (12-03 moved shifted 3b sparse from 0.51 to 0.44 noise sd, and two settings' regimes)."""
    _, dvs = mods
    config = {"worlds": ["paper"], "models": ["qwen2.5-1.5b"], "rewards": ["sparse", "prm"],
              "budget": 1e16, "pilot_budget": 1e15, "target": "native"}
    # paper's noise sd is 0.01: a stored gap of 1 sd and an infinite one (stored as null).
    outcomes = [{"world": "paper", "strategy": "grid", "config": "3pts x2 @target", "same": [True, True],
                 "gap": [0.01, None]} for _ in range(2)]
    (r,) = dvs.compare({"config": config, "outcomes": outcomes}, margin=0.3)
    # 6 runs: 3 per arm, so P(right) = Phi(1 / sqrt(2 / 3)) on the first, 1 on the second.
    assert r["duel"] == pytest.approx((dvs._phi(1 / (2 / 3) ** 0.5) + 1.0) / 2)
    assert r["wins"] == []  # the grid's 1.0 against 0.89 and 1.0
