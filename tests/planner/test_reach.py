"""The compiler's choice of plan as a step function of the requested rho (planner.reach):
exact against compile_plan, and reaching the plans a grid of requests misses."""

from __future__ import annotations

import numpy as np
import pytest

from planner.compiler import CompileOptions, _candidates, compile_plan, per_completion
from planner.errors import InfeasibleError
from planner.reach import request_map
from planner.registry import get_model, get_reward

SETTINGS = [("qwen2.5-1.5b", "prm"), ("qwen2.5-7b", "sparse"), ("qwen2.5-3b", "dense"), ("tiny-s", "sparse")]


def _levers(model: str, reward: str, index: int) -> tuple[int, int, int]:
    arch, rs = get_model(model), get_reward(reward)
    o = CompileOptions().resolve(arch)
    _, g, k, mu, _ = _candidates(per_completion(arch, rs, o), o)[index]
    return g, k, mu


@pytest.mark.parametrize(("model", "reward"), SETTINGS)
def test_the_map_picks_what_compile_plan_picks(model: str, reward: str) -> None:
    rm = request_map(model, reward)
    rng = np.random.default_rng(7)
    for rho in np.round(rng.uniform(0.005, 0.995, 150), 6):
        w = int(rm.winner[rm.interval(rho)])
        try:
            p = compile_plan(model, reward, float(rho), 1e30)
        except InfeasibleError:
            assert w == -1, rho
            continue
        assert _levers(model, reward, w) == (p.completions_per_prompt, p.completions_kept, p.num_iterations), rho


def test_representatives_reach_every_plan_once_and_more_than_a_grid_of_requests() -> None:
    """A 0.005 grid of requests (half the compiler's bin) reached 125 of paper 1.5b prm's
    plans; requests elsewhere reach others, and the truth must see them all."""
    model, reward = "qwen2.5-1.5b", "prm"
    rm = request_map(model, reward)

    def levers(rho: float) -> tuple[int, int, int]:
        p = compile_plan(model, reward, round(float(rho), 6), 1e30)
        return p.completions_per_prompt, p.completions_kept, p.num_iterations

    reps = rm.representatives()
    plans = {levers(r) for r in reps}
    assert len(plans) == len(reps) == len(set(rm.winner[rm.winner >= 0].tolist()))
    lo, hi = float(rm.rho.min()), float(rm.rho.max())
    grid = {levers(r) for r in np.append(np.arange(lo, hi, 0.005), hi)}
    assert grid < plans and len(plans) >= 2 * len(grid) - 10


def test_requests_beyond_the_tolerance_reach_nothing() -> None:
    rm = request_map("qwen2.5-1.5b", "sparse")
    lo = float(rm.rho.min())
    far = lo - 0.06  # the compiler's tolerance is 0.05
    assert far > 0 and rm.winner[rm.interval(far)] == -1
    with pytest.raises(InfeasibleError, match="out of reach"):
        compile_plan("qwen2.5-1.5b", "sparse", far, 1e16)


@pytest.mark.parametrize("budget", [1e16, 1e15, 3e14])
def test_at_a_budget_the_map_picks_what_compile_plan_picks(budget: float) -> None:
    """At a small budget the first-ranked levers can miss it by over 2% (few prompts), and
    the compiler walks down its ranking: to plans no unlimited-budget choice names."""
    model, reward = "qwen2.5-1.5b", "prm"
    rm = request_map(model, reward, budget=budget)
    rng = np.random.default_rng(11)
    fell_back = 0
    for rho in np.round(rng.uniform(0.005, 0.995, 200), 6):
        w = int(rm.winner[rm.interval(rho)])
        try:
            p = compile_plan(model, reward, float(rho), budget)
        except InfeasibleError:
            assert w == -1, rho
            continue
        assert _levers(model, reward, w) == (p.completions_per_prompt, p.completions_kept, p.num_iterations), rho
        fell_back += w != int(request_map(model, reward).winner[rm.interval(rho)])
    assert fell_back > 0 if budget < 1e16 else True


def test_requests_outside_zero_one_lie_in_no_interval() -> None:
    rm = request_map("qwen2.5-1.5b", "sparse")
    assert rm.edges[0] == 0.0 and rm.edges[-1] == 1.0
    assert rm.interval(np.array([-0.1, 1.0, 1.5])).tolist() == [-1, -1, -1]
    assert rm.interval(np.array([0.5]))[0] >= 0


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 8, 9, 16])
def test_range_minimum_is_the_minimum_of_every_slice(n: int) -> None:
    # Powers of two included: the table's top level spans the whole array there.
    from planner.reach import _SparseMin

    values = np.random.default_rng(n).permutation(n)
    lo, hi = np.array([(a, b) for a in range(n) for b in range(a + 1, n + 1)]).T
    got = _SparseMin(values).query(lo, hi)
    assert got.tolist() == [int(values[a:b].min()) for a, b in zip(lo, hi, strict=True)]


def test_a_tolerance_past_half_a_bin_gets_its_outer_bin_too() -> None:
    """At 0.057 the disk of bins reaches radius 0.055 (bin 5) before the tolerance itself;
    only near the ends of reach, where the nearest candidates sit in the outer bins, does
    that bin decide the pick: requests there are swept densely."""
    model, reward, opts = "tiny-s", "sparse", CompileOptions(rho_tolerance=0.057)
    rm = request_map(model, reward, opts)
    arch, rs = get_model(model), get_reward(reward)
    o = opts.resolve(arch)
    cands = _candidates(per_completion(arch, rs, o), o)
    lo, hi = float(rm.rho.min()), float(rm.rho.max())
    ends = np.concatenate([np.linspace(max(lo - 0.06, 0.001), lo + 0.01, 300), np.linspace(hi - 0.01, min(hi + 0.06, 0.999), 300)])
    for rho in np.round(ends, 6):
        w = int(rm.winner[rm.interval(rho)])
        try:
            p = compile_plan(model, reward, float(rho), 1e30, opts)
        except InfeasibleError:
            assert w == -1, rho
            continue
        assert cands[w][1:4] == (p.completions_per_prompt, p.completions_kept, p.num_iterations), rho
