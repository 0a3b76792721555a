"""Max-variance down-sampling of GRPO rollout groups (Xu et al. 2025, "Not All Rollouts are
Useful": PODS).

Generate ``G`` completions per prompt, train on the ``K`` whose rewards have the largest
variance. For scalar rewards the best size-``K`` subset is always the ``i`` highest plus the
``K - i`` lowest rewards for some ``i`` (PODS, Lemma 1), so a sort and ``K + 1`` candidate
variances find it exactly. Pure Python: no torch needed to call or test it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

__all__ = ["max_variance_indices", "max_variance_subset"]


def _variance(xs: Sequence[float]) -> float:
    m = sum(xs) / len(xs)
    return sum((x - m) ** 2 for x in xs) / len(xs)


def max_variance_subset(rewards: Sequence[float], k: int) -> list[int]:
    """Indices (ascending) of the ``k`` rewards with the largest variance.

    NaN rewards (unscorable completions; TRL gives them zero advantage) are kept only when
    fewer than ``k`` completions have a reward. Among subsets of equal variance the one
    with the most high rewards wins, and among equal rewards the earliest index, so the
    result is deterministic.
    """
    g = len(rewards)
    if not 1 <= k <= g:
        raise ValueError(f"k must be in [1, {g}], got {k}")
    scored = [i for i in range(g) if not math.isnan(rewards[i])]
    if len(scored) <= k:
        unscored = [i for i in range(g) if math.isnan(rewards[i])]
        return sorted(scored + unscored[: k - len(scored)])
    values = sorted(float(rewards[i]) for i in scored)
    n = len(values)
    best: list[float] = []
    best_var = -1.0
    # i = how many of the highest rewards join the (k - i) lowest.
    for i in range(k, -1, -1):
        chosen = values[: k - i] + values[n - i :]
        var = _variance(chosen)
        if var > best_var + 1e-12:
            best, best_var = chosen, var
    need = Counter(best)
    out = []
    for i in scored:  # earliest index first for each value needed
        v = float(rewards[i])
        if need[v] > 0:
            need[v] -= 1
            out.append(i)
    return out


def max_variance_indices(grouped: Sequence[Sequence[float]], k: int) -> list[int]:
    """Flat row indices to keep from consecutive groups (row ``j`` of group ``n`` is
    ``n * G + j``), group order and within-group order preserved: GRPO's advantage code
    reshapes the kept rows to ``(-1, k)``, so each group must stay contiguous."""
    out: list[int] = []
    for n, group in enumerate(grouped):
        base = n * len(group)
        out.extend(base + j for j in max_variance_subset(group, k))
    return out
