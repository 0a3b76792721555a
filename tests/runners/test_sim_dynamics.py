"""Properties of the mechanism (runners.sim.dynamics) that must hold for any levers."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from runners.sim.dynamics import base_metrics, learn
from runners.sim.world import load_world

W = load_world("paper")
MODELS = ["qwen2.5-1.5b", "qwen2.5-7b", "tiny-m"]
REWARDS = ["sparse", "dense", "prm"]

levers = st.tuples(
    st.sampled_from(MODELS),
    st.sampled_from(REWARDS),
    st.integers(1, 5000),  # prompts
    st.sampled_from([2, 4, 8, 16]),  # kept
    st.integers(0, 48),  # extra generated
    st.integers(1, 16),  # passes
)


@settings(max_examples=60, deadline=None)
@given(levers)
def test_between_base_and_ceiling_and_more_prompts_help(lv: tuple) -> None:
    model, reward, n, k, extra, mu = lv
    g = k + extra
    now = learn(W, model, reward, np.array([n, 2 * n]), g, k, mu)
    base = base_metrics(W, model, reward)
    lift = W.reward(reward).native_lift
    for t, v in now.items():
        ceiling = W.capacity(model, t).ceiling
        if t == "native":  # partial credit lifts the native reward's ceiling too
            ceiling += lift * (1.0 - ceiling)
        assert base[t] - 1e-12 <= v[0] <= v[1] + 1e-12  # twice the prompts never hurts
        assert v[1] <= ceiling + 1e-12


@settings(max_examples=40, deadline=None)
@given(levers)
def test_stale_passes_add_less_than_fresh_prompts(lv: tuple) -> None:
    """mu passes over N prompts teach less than one pass over mu*N fresh prompts."""
    model, reward, n, k, extra, mu = lv
    if mu == 1:
        return
    g = k + extra
    stale = learn(W, model, reward, n, g, k, mu)
    fresh = learn(W, model, reward, mu * n, g, k, 1)
    for t in stale:
        assert stale[t][()] <= fresh[t][()] + 1e-12


def test_ties_make_over_generation_pay_for_strong_policies() -> None:
    """A sparse reward ties more often for an accurate policy, so G > K helps it more."""
    gains = {}
    for model in ("qwen2.5-1.5b", "qwen2.5-7b"):
        plain = learn(W, model, "sparse", 20, 8, 8, 1)["native"]
        wide = learn(W, model, "sparse", 20, 32, 8, 1)["native"]
        base = W.capacity(model, "native").base
        gains[model] = float((wide - base) / (plain - base))
    assert gains["qwen2.5-7b"] > gains["qwen2.5-1.5b"] > 1.0
