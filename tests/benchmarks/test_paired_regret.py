"""Paired regret comparison of the benchmark's results (benchmarks/paired_regret.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest


@pytest.fixture(scope="module")
def paired(load_script: Callable[..., ModuleType]) -> ModuleType:
    return load_script("paired_regret", "paired_regret_t")


def outcomes(shift: float, reps: range = range(10), worlds: tuple[str, ...] = ("a", "b"),
             seed: int = 0) -> list[dict[str, Any]]:
    """ours = random + ``shift`` per setting, plus a grid row that must not be paired."""
    rng = np.random.default_rng(seed)
    out = []
    for w in worlds:
        for rep in reps:
            base = rng.exponential(0.002, size=6)
            out.append({"strategy": "random", "world": w, "rep": rep, "config": "", "regret": list(base)})
            out.append({"strategy": "ours", "world": w, "rep": rep, "config": "", "regret": list(base + shift)})
            out.append({"strategy": "grid", "world": w, "rep": rep, "config": "3pts x1", "regret": [9.0] * 6})
    return out


def test_pairs_match_world_and_repetition(paired: ModuleType) -> None:
    outs = outcomes(-0.0005)
    outs.append({"strategy": "ours", "world": "a", "rep": 99, "config": "", "regret": [0.0] * 6})  # unpaired
    p = paired.pairs(outs, "random")
    assert set(p) == {"a", "b"} and set(p["a"]) == set(range(10))
    ours, base = p["a"][3]
    np.testing.assert_allclose(ours - base, -0.0005)
    assert paired.pairs(outs, "optuna-tpe") == {}


def test_a_uniform_improvement_is_found_and_no_difference_is_not(paired: ModuleType) -> None:
    better = paired.compare(paired.pairs(outcomes(-0.0005), "random"))
    assert better["n"] == 120 and better["n_reps"] == 20 and better["ours_lower"] == 1.0
    assert better["diff"] == pytest.approx(-0.0005, abs=1e-9)
    lo, hi = better["diff_ci"]
    # 20 races, all better (as 120 independent pairs it would be ~1e-21).
    assert lo <= -0.0005 + 1e-9 and hi < 0 and 1e-7 < better["wilcoxon_p"] < 1e-4
    same = paired.compare(paired.pairs(outcomes(0.0), "random"))
    assert same["ours_lower"] == 0.5 and same["diff"] == 0.0 and np.isnan(same["wilcoxon_p"])


def test_the_signed_rank_test_counts_races_not_settings(paired: ModuleType) -> None:
    # 3 races of 6 settings, ours better on all 18: as 18 independent pairs the test would
    # give p < 1e-3; the settings of a race share its runs, so it sees 3 values and cannot
    # go below 2 / 2**3.
    r = paired.compare(paired.pairs(outcomes(-0.0005, reps=range(3), worlds=("a",)), "random"))
    assert r["n"] == 18 and r["n_reps"] == 3
    assert r["wilcoxon_p"] > 0.1


def test_noise_alone_gives_an_interval_around_zero(paired: ModuleType) -> None:
    outs = outcomes(0.0)
    rng = np.random.default_rng(1)
    for o in outs:
        if o["strategy"] == "ours":  # an independent draw of the same distribution
            o["regret"] = list(rng.exponential(0.002, size=6))
    r = paired.compare(paired.pairs(outs, "random"))
    lo, hi = r["diff_ci"]
    assert lo < 0 < hi and r["wilcoxon_p"] > 0.01


def test_table_has_a_pooled_row_and_main_reads_files(paired: ModuleType, tmp_path: Path) -> None:
    rows = paired.paired_table(outcomes(-0.0005))
    assert [(r["baseline"], r["world"]) for r in rows] == [("random", "a"), ("random", "b"), ("random", "pooled")]
    f1, f2 = tmp_path / "r0.json", tmp_path / "r10.json"
    f1.write_text(json.dumps({"outcomes": outcomes(-0.0005)}))
    f2.write_text(json.dumps({"outcomes": outcomes(-0.0005, reps=range(10, 20), seed=3)}))
    merged = paired.main([str(f1), str(f2), "--merge"])
    assert next(r for r in merged if r["world"] == "pooled")["n"] == 240


def test_bad_files_name_the_file_and_the_fix(paired: ModuleType, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SystemExit, match=r"bad\.json: not a planner_bench\.py results file"):
        paired.main([str(bad)])
    lonely = tmp_path / "ours.json"
    lonely.write_text(json.dumps({"outcomes": [o for o in outcomes(0.0) if o["strategy"] == "ours"]}))
    with pytest.raises(SystemExit, match="no baseline ran beside ours"):
        paired.main([str(lonely)])
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"outcomes": outcomes(-0.0005)}))
    with pytest.raises(SystemExit, match="repeats a repetition"):
        paired.main([str(f), str(f), "--merge"])


def test_merge_pairs_only_within_a_file(paired: ModuleType, tmp_path: Path) -> None:
    """Ours from one benchmark run and a baseline's same repetition from another were not
    capped at the same spend: --merge must not pair them."""
    outs = outcomes(-0.0005)
    ours_only, random_only = tmp_path / "ours.json", tmp_path / "random.json"
    ours_only.write_text(json.dumps({"outcomes": [o for o in outs if o["strategy"] == "ours"]}))
    random_only.write_text(json.dumps({"outcomes": [o for o in outs if o["strategy"] != "ours"]}))
    with pytest.raises(SystemExit, match="no baseline ran beside ours"):
        paired.main([str(ours_only), str(random_only), "--merge"])
