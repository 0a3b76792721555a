"""Properties of the mechanism (runners.sim.dynamics) that must hold for any levers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.schema import TARGETS
from runners.sim.dynamics import base_metrics, learn
from runners.sim.world import Capacity, RewardDynamics, World, load_world

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


def _hand_world(stages: int) -> World:
    """A world small enough to work by hand: one reward, one policy, every branch of the
    mechanism used (no reuse decay on pass1, a prompt cap below 1 on pass1, above 1 on judge,
    none on native; a near-zero decay on judge)."""
    targets = ("native", "pass1", "judge")
    return World(
        name="hand", description="", sources=(), stages=stages,
        noise=dict.fromkeys(targets, 0.01),
        reuse_decay={"native": 0.5, "pass1": 0.0, "judge": 0.01},
        prompt_cap={"native": 0.0, "pass1": 0.5, "judge": 2.0},
        rewards={"sparse": RewardDynamics(graded=0.2, selection=0.5, native_lift=0.1,
                                          signal={"native": 1.0, "pass1": 1.0, "judge": 0.5})},
        models={"m": {"native": Capacity(0.5, 0.9, 200.0), "pass1": Capacity(0.2, 0.6, 10.0),
                      "judge": Capacity(0.3, 0.8, 300.0)}},
    )


def test_one_stage_by_hand() -> None:
    """docs/sim.md's table, worked by hand for N 100, G 4, K 2, mu 2 in one stage:
    p = 0.5 ties a group with 0.5^4 + 0.5^4 = 0.125, phi = 1 - 0.8 * 0.125 = 0.9; the gain
    (4/2)^0.5 = sqrt 2; reuse 1 + 0.5 (native), 1 + 0 (pass1), 1 + 0.01 (judge); so
    x_native = 2 * 0.9 * sqrt2 * 1.5 = 3.81838, x_pass1 = 2.54558 capped to
    0.5 (1 - e^(-2.54558 / 0.5)) = 0.49692, x_judge = 2 * 0.9 * sqrt2 * 1.01 * 0.5 = 1.28552
    capped to 2 (1 - e^(-0.64276)) = 0.94838; m = base + (ceiling - base)(1 - e^(-100 x / scale)),
    and native = m + 0.1 (1 - m)."""
    got = learn(_hand_world(1), "m", "sparse", 100, 4, 2, 2)
    native_m = 0.5 + 0.4 * (1 - math.exp(-100 * 3.818376618407357 / 200))
    assert native_m == pytest.approx(0.84071975, abs=1e-8)
    assert float(got["native"]) == pytest.approx(native_m + 0.1 * (1 - native_m), rel=1e-12)
    assert float(got["native"]) == pytest.approx(0.85664777, abs=1e-8)
    assert float(got["pass1"]) == pytest.approx(0.59722065, abs=1e-8)
    assert float(got["judge"]) == pytest.approx(0.43550938, abs=1e-8)


def test_stages_update_the_tie_rate_between_stages() -> None:
    """In S stages of N / S prompts, each stage's phi uses the native accuracy reached so far."""
    w = _hand_world(2)

    def by_hand(n: int, g: int, k: int, mu: int) -> dict[str, float]:
        # the table of docs/sim.md, one scalar step at a time
        m = {t: w.capacity("m", t).base for t in TARGETS}
        rd = w.reward("sparse")
        for _ in range(w.stages):
            p = m["native"]
            phi = 1 - (1 - rd.graded) * (p**g + (1 - p) ** g)
            for t in TARGETS:
                reuse = sum(w.reuse_decay[t] ** j for j in range(mu))
                x = k * phi * (g / k) ** rd.selection * reuse * rd.signal[t]
                if w.prompt_cap[t]:
                    x = w.prompt_cap[t] * (1 - math.exp(-x / w.prompt_cap[t]))
                c = w.capacity("m", t)
                m[t] += (c.ceiling - m[t]) * (1 - math.exp(-(n / w.stages) * x / c.scale))
        m["native"] += rd.native_lift * (1 - m["native"])
        return m

    for lv, native in (((100, 4, 2, 2), 0.84737301), ((40, 8, 4, 3), 0.85583354)):
        got, want = learn(w, "m", "sparse", *lv), by_hand(*lv)
        for t in TARGETS:
            assert float(got[t]) == pytest.approx(want[t], rel=1e-12), (lv, t)
        assert float(got["native"]) == pytest.approx(native, abs=1e-8)


def test_no_reuse_decay_counts_one_pass_and_base_metrics_lift_native() -> None:
    """decay 0: later passes over a batch are worth nothing, so mu does not matter; the
    base policy's native reward gets the same partial credit as a trained one's."""
    w = _hand_world(1)
    one, many = learn(w, "m", "sparse", 100, 4, 2, 1), learn(w, "m", "sparse", 100, 4, 2, 7)
    assert float(one["pass1"]) == pytest.approx(float(many["pass1"]), rel=1e-12)
    assert float(one["native"]) < float(many["native"])  # native decays at 0.5: passes add
    assert base_metrics(w, "m", "sparse") == pytest.approx({"native": 0.5 + 0.1 * 0.5, "pass1": 0.2, "judge": 0.3})
