"""The stake check: rank agreement and medians computed from the outcomes, not assumed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


@pytest.fixture(scope="module")
def stake(load_script: Callable[..., ModuleType]) -> ModuleType:
    return load_script("bench_stake", "bench_stake_t")


def _outcome(world: str, stakes: list[float | None], gaps: list[float]) -> dict[str, Any]:
    return {"world": world, "strategy": "ours", "stake": stakes, "gap": gaps}


def test_stakes_that_order_like_the_gaps_score_spearman_one(stake: ModuleType) -> None:
    sd = {"a": 0.01, "b": 0.02}
    outs = [_outcome("a", [0.0001, 0.002, 0.02], [0.0005, 0.01, 0.03]),
            _outcome("b", [0.03, 0.001, None], [0.001, 0.04, 0.05])]  # b's stakes order backwards
    rows = {r["world"]: r for r in stake.stake_table(outs, sd)}
    assert set(rows) == {"a", "b", "pooled"}
    assert rows["a"]["calls"] == 3 and rows["a"]["spearman"] == pytest.approx(1.0)
    assert rows["b"]["calls"] == 2 and rows["b"]["spearman"] != rows["b"]["spearman"]  # 2 calls: NaN
    # a: gaps 0.05 / 1 / 3 sd -> one near-tie (stake 0.01 sd), two decidable (0.2, 2 sd).
    assert rows["a"]["near_tie_calls"] == 1 and rows["a"]["stake_sd_near_tie"] == pytest.approx(0.01)
    assert rows["a"]["decidable_calls"] == 2 and rows["a"]["stake_sd_decidable"] == pytest.approx(1.1)
    assert rows["a"]["gap_sd_decidable"] == pytest.approx(2.0)
    assert rows["pooled"]["calls"] == 5 and rows["pooled"]["spearman"] < 1.0
    # By true gap (sd), pooled: a 0.05 and b 0.05 -> [0.05, 0.2); a 1 -> [1, inf); a 3 too; b 2.
    bins = {(r["gap_lo"], r["gap_hi"]): r for r in stake.stake_by_gap(outs, sd)}
    assert set(bins) == {(0.05, 0.2), (1.0, float("inf"))}
    assert bins[(0.05, 0.2)]["calls"] == 2 and bins[(0.05, 0.2)]["median"] == pytest.approx((0.01 + 1.5) / 2)
    assert bins[(1.0, float("inf"))]["calls"] == 3 and bins[(1.0, float("inf"))]["median"] == pytest.approx(0.2)


def test_outcomes_without_stakes_are_skipped_and_the_script_says_so(stake: ModuleType, tmp_path: Path) -> None:
    assert stake.stake_table([{"world": "paper", "strategy": "grid", "stake": [None], "gap": [0.0]}],
                             {"paper": 0.01}) == []
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"config": {"target": "native"},
                             "outcomes": [{"world": "paper", "strategy": "random", "same": [True]}]}))
    with pytest.raises(SystemExit, match="no outcome carries a stake"):
        stake.main([str(f)])


def test_scatter_is_drawn_from_the_outcomes(stake: ModuleType, tmp_path: Path) -> None:
    outs = [_outcome("a", [0.0001, 0.002, 0.0], [0.0005, 0.01, 0.0])]  # a zero stake and gap sit at the floor
    out = stake.plot_stake(outs, {"a": 0.01}, tmp_path / "fig" / "s.png")
    assert out.is_file() and out.stat().st_size > 10_000


def test_a_stored_null_gap_is_an_infinite_one_not_a_crash(stake: ModuleType) -> None:
    """JSON stores an infinite gap (no other regime reachable) as null: a TypeError here."""
    outs = [_outcome("a", [0.01, 0.02], [None, 0.03])]
    (row,) = stake.stake_table(outs, {"a": 0.01})
    assert row["calls"] == 2 and row["decidable_calls"] == 2 and row["near_tie_calls"] == 0
    (top,) = stake.stake_by_gap(outs, {"a": 0.01})
    assert top["gap_hi"] == float("inf") and top["calls"] == 2
