"""benchmarks/setting_calls.py: right calls per setting from stored results."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def sc(load_script: Callable[..., ModuleType]) -> ModuleType:
    return load_script("setting_calls", "setting_calls_t")


def doc() -> dict:
    config = {"worlds": ["contrast", "flat"], "models": ["qwen2.5-1.5b"], "rewards": ["sparse", "prm"]}

    def out(world: str, strategy: str, config: str, rep: int, same: list[bool]) -> dict:
        return {"world": world, "strategy": strategy, "config": config, "rep": rep, "same": same}

    outs = [out("contrast", "ours", "", r, [True, r < 2]) for r in range(4)]
    outs += [out("contrast", "grid", "3pts x1 @target", r, [True, True]) for r in range(4)]
    outs += [out("contrast", "grid", "3pts x1 @pilot", r, [False, False]) for r in range(4)]
    outs += [out("flat", "ours", "", r, [False, True]) for r in range(4)]
    return {"config": config, "outcomes": outs}


def test_counts_right_calls_per_setting_and_filters(sc: ModuleType) -> None:
    keys, rows = sc.setting_calls(doc(), ["contrast"])
    assert keys == ["qwen2.5-1.5b/sparse", "qwen2.5-1.5b/prm"]
    got = {(r["strategy"], r["design"]): (r["reps"], r["right"]) for r in rows}
    assert got == {("ours", ""): (4, [4, 2]), ("grid", "3pts x1 @target"): (4, [4, 4])}  # pilot grid left out
    _, rows = sc.setting_calls(doc(), None, "all")
    assert (rows[0]["world"], rows[0]["strategy"]) == ("contrast", "ours")  # ours first in each world
    assert {r["design"] for r in rows if r["strategy"] == "grid"} == {"3pts x1 @target", "3pts x1 @pilot"}
    _, rows = sc.setting_calls(doc(), None, "none")
    assert {r["strategy"] for r in rows} == {"ours"}


def test_main_reads_files_and_names_a_bad_one(sc: ModuleType, tmp_path: Path) -> None:
    f = tmp_path / "r.json"
    f.write_text(json.dumps(doc()))
    [(name, _, rows)] = sc.main([str(f), "--worlds", "flat"])
    assert name == "r.json" and [r["right"] for r in rows] == [[0, 4]]
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(SystemExit, match=r"bad\.json: not a planner_bench\.py results file"):
        sc.main([str(bad)])
