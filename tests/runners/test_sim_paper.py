"""paper.toml reproduces the paper's qualitative findings (noise-free truth mode)."""

from __future__ import annotations

import pytest

from runners.sim.truth import frontier

M15 = "qwen2.5-1.5b"
B = 1e16


@pytest.mark.parametrize("reward", ["sparse", "structured", "dense"])
def test_rule_rewards_are_update_heavy(reward: str) -> None:
    f = frontier("paper", M15, reward, B, "native")
    assert 0.62 <= f.rho_star <= 0.80, f.rho_star
    assert f.regime == "update-heavy"
    assert f.shares_star["reward"] == 0.0


@pytest.mark.parametrize("reward", ["prm", "proxy-prm"])
def test_prm_rewards_move_rho_down(reward: str) -> None:
    f = frontier("paper", M15, reward, B, "native")
    assert 0.38 <= f.rho_star <= 0.52, f.rho_star
    assert f.shares_star["reward"] > 0.1  # reward inference eats budget


def test_rho_star_moves_with_model_size() -> None:
    stars = {m: frontier("paper", m, "sparse", B).rho_star for m in (M15, "qwen2.5-7b")}
    assert abs(stars[M15] - stars["qwen2.5-7b"]) >= 0.03, stars


def test_native_and_pass1_disagree_somewhere() -> None:
    gaps = {}
    for model in (M15, "qwen2.5-7b"):
        for reward in ("sparse", "proxy-prm"):
            a = frontier("paper", model, reward, B, "native").rho_star
            b = frontier("paper", model, reward, B, "pass1").rho_star
            gaps[(model, reward)] = abs(a - b)
    assert max(gaps.values()) > 0.1, gaps


def test_training_helps_and_stays_below_ceiling() -> None:
    from runners.sim.world import load_world

    w = load_world("paper")
    for target in ("native", "pass1", "judge"):
        f = frontier(w, M15, "dense", B, target)
        cap = w.capacity(M15, target)
        assert f.value.min() > cap.base - 1e-12
        assert f.value.max() < max(cap.ceiling, 1.0)
