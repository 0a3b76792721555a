"""The simulator's learning mechanism: GRPO levers in, noise-free target metrics out.

Pure numpy, vectorised over runs. The inputs are what the budget compiler bought for a
run, not its rho: ``prompts`` (N), completions generated per prompt (G), completions kept
per prompt (K, max-variance down-sampling) and update passes per batch (mu). The rho of a
run only matters through these, so the frontier over rho *emerges* from the mechanism.

Training is integrated in ``S = world.stages`` equal stages of ``N / S`` prompts. In each
stage, with ``p`` the current native accuracy:

* zero-variance groups: all G completions of a prompt tie with probability
  ``p**G + (1 - p)**G`` under a binary reward; a graded reward still separates a share
  ``graded`` of tied groups, so the informative share is
  ``phi = 1 - (1 - graded) * (p**G + (1 - p)**G)``. GRPO advantages of a tied group are 0
  (Shao et al. 2024), so those rollouts teach nothing; more completions per prompt make
  ties rarer, and ties grow as the policy improves (the exploration limit).
* down-sampling: keeping the K most spread-out of G completions raises the advantage
  magnitude; gain ``(G / K) ** selection`` (Xu et al. 2025, "Not All Rollouts are
  Useful"), larger for rewards with continuous scores.
* stale reuse: pass ``j = 0 .. mu-1`` over the same batch is worth ``decay**j`` of a
  fresh one (policy drift, PPO-style clipping), so ``reuse = (1 - decay**mu) / (1 - decay)``.
* per prompt, target t gains ``x = K * phi * gain * reuse_t * signal[reward, t]``
  effective samples; what one prompt can teach that transfers is bounded:
  ``x -> cap_t * (1 - exp(-x / cap_t))`` (cap 0 = unbounded).
* the metric closes a share of its remaining headroom:
  ``m_t <- m_t + (ceiling_t - m_t) * (1 - exp(-(N/S) * x / scale_t))``.

Fewer prompts (a costlier policy or reward model, or a search-heavy split) mean fewer
effective samples: too few updates under-learn, too many passes over too few fresh
rollouts hit diminishing returns. Finally the native reward gives partial credit:
``native = m + native_lift * (1 - m)``.
"""

from __future__ import annotations

import numpy as np

from planner.schema import TARGETS
from runners.sim.world import World

__all__ = ["base_metrics", "learn"]


def _reuse(decay: float, mu: np.ndarray) -> np.ndarray:
    """Value of ``mu`` passes over one batch, in fresh-pass units: ``sum_j decay**j``."""
    if decay == 0.0:
        return np.ones_like(mu)
    return -np.expm1(mu * np.log(decay)) / (1.0 - decay)


def learn(
    world: World,
    model: str,
    reward: str,
    prompts: np.ndarray,
    generated: np.ndarray,
    kept: np.ndarray,
    iterations: np.ndarray,
) -> dict[str, np.ndarray]:
    """Noise-free metric of each target after training with the given levers (arrays
    broadcast together). Returns ``{target: array}`` for every target in ``TARGETS``."""
    rd = world.reward(reward)
    caps = {t: world.capacity(model, t) for t in TARGETS}
    n, g, k, mu = np.broadcast_arrays(
        *(np.asarray(a, dtype=float) for a in (prompts, generated, kept, iterations))
    )
    per_stage = n / world.stages
    gain = (g / k) ** rd.selection
    drive = {t: k * gain * _reuse(world.reuse_decay[t], mu) * rd.signal[t] for t in TARGETS}
    skill = {t: np.full(n.shape, caps[t].base) for t in TARGETS}
    for _ in range(world.stages):
        p = skill["native"]
        tied = p**g + (1.0 - p) ** g
        phi = 1.0 - (1.0 - rd.graded) * tied
        for t in TARGETS:
            x = drive[t] * phi
            cap = world.prompt_cap[t]
            if cap > 0:
                x = -cap * np.expm1(-x / cap)
            c = caps[t]
            skill[t] = skill[t] - (c.ceiling - skill[t]) * np.expm1(-per_stage * x / c.scale)
    skill["native"] = skill["native"] + rd.native_lift * (1.0 - skill["native"])
    return skill


def base_metrics(world: World, model: str, reward: str) -> dict[str, float]:
    """Metrics of the base policy (before RL), with the native reward's partial credit."""
    out = {t: world.capacity(model, t).base for t in TARGETS}
    lift = world.reward(reward).native_lift
    out["native"] = out["native"] + lift * (1.0 - out["native"])
    return out
