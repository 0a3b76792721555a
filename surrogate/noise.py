"""One run's noise, as the surrogate uses it: where it comes from and how large it is.

The noise of a run is the standard deviation of the target between seeds of one plan.
Three things can set it, per reward system (a PRM's graded score is not a 0/1 success):
seed replicates (:func:`surrogate.data.group_replicates` pools and shrinks them), a value
stated from elsewhere (``noise_sd``: earlier campaigns, an eval set's binomial error), or,
with neither, the GP's own inferred level, which over a few runs sits near its prior's
mode, a small fraction of the runs' spread: too small wherever that spread is mostly noise
(a 10-run race: 0.0009 against the world's 0.010; docs/planner.md, "Run noise").

Pure functions of the training arrays (:class:`~surrogate.data.TrainingData`), the reward
order and the stated variances; no torch. :class:`surrogate.FrontierSurrogate` calls them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from surrogate.data import _MIN_DOF, TrainingData

__all__ = ["MIN_REPLICATE_DOF", "check_noise_sd", "noise_source", "replicate_dof", "replicate_noise_variance", "stated_variances"]

NoiseSd = float | dict[str, float]

# The replicate degrees of freedom at which a reward system's noise is its own measurement:
# below it group_replicates shrinks it mostly toward the statement or the others' pool.
MIN_REPLICATE_DOF = _MIN_DOF


def _positive(v: Any, name: str, what: str) -> float:
    ok = isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool) and 0 < float(v) < math.inf
    if not ok:
        raise ValueError(f"{name}: {what} must be a positive finite number, got {v!r}")
    return float(v)


def check_noise_sd(v: Any) -> NoiseSd | None:
    """A stated run noise: None, one positive sd, or a non-empty {reward: positive sd};
    anything else is a one-line ValueError naming ``noise_sd``."""
    if v is None:
        return None
    if isinstance(v, Mapping):
        if not v or not all(isinstance(k, str) for k in v):
            raise ValueError(f"noise_sd: {{reward system: sd}} with at least one entry, e.g. {{'sparse': 0.01}}; got {v!r}")
        return {k: _positive(x, f"noise_sd[{k!r}]", "a run noise sd") for k, x in v.items()}
    return _positive(v, "noise_sd", "a run noise sd (or a {reward: sd} mapping)")


def stated_variances(noise_sd: NoiseSd | None, rewards: Sequence[str]) -> dict[str, float] | None:
    """The stated noise as one run's variance per reward system: a mapping's own keys, one
    sd for each of ``rewards`` (None: nothing stated)."""
    if noise_sd is None:
        return None
    if isinstance(noise_sd, Mapping):
        return {r: float(v) ** 2 for r, v in noise_sd.items()}
    return {r: float(noise_sd) ** 2 for r in rewards}


def _rows_of(data: TrainingData, rewards: Sequence[str], reward: str) -> np.ndarray:
    return data.X[:, 1] == float(rewards.index(reward))


def replicate_dof(data: TrainingData, rewards: Sequence[str], reward: str) -> int:
    """Seed-replicate degrees of freedom behind ``reward``'s own noise estimate (sum over its
    replicate groups of runs - 1); 0 where replicates did not set it (too few in all, all
    agreeing, none of its own): :func:`noise_source` says what did."""
    if data.yvar is None or reward not in rewards or reward in data.identical_rewards:
        return 0
    return int((data.counts[_rows_of(data, rewards, reward)] - 1).sum())


def replicate_noise_variance(data: TrainingData, rewards: Sequence[str], stated: Mapping[str, float] | None,
                             reward: str | None) -> float | None:
    """One run's noise variance of ``reward`` where the training data fix it (replicates or
    a statement), in the target's units: the median per-run variance over its rows, over
    all rows where it has none (its stated value, if any, where it has no rows yet); None
    where the GP infers the noise (:func:`noise_source` ``"inferred"``)."""
    if data.yvar is None:
        return None
    per_run = data.yvar * data.counts
    if reward is not None and reward in rewards:
        mine = _rows_of(data, rewards, reward)
        if mine.any():
            return float(np.median(per_run[mine]))
        if stated is not None and reward in stated:  # no runs of it yet: what was stated for it
            return float(stated[reward])
    return float(np.median(per_run))


def noise_source(data: TrainingData, rewards: Sequence[str], stated: Mapping[str, float] | None,
                 reward: str | None) -> str:
    """Where the noise of ``reward`` comes from.

    Without a statement: ``"replicates"`` (its seed replicates), ``"other replicates"`` (the
    pooled replicates of other reward systems, where this one has none or its own all
    agreed), ``"identical replicates"`` (its replicates agreed to within the conditioning
    floor, a metric coarser than the noise, and no other reward system's measured it: the
    fit's level stands in) or ``"inferred"`` (the fit's level).

    With one: ``"replicates"`` only where the reward system's own replicates carry at least
    :data:`MIN_REPLICATE_DOF` degrees of freedom (they shrink toward the statement), else ``"stated"``
    (the value stated for it, blended with the few replicates it has), ``"other
    replicates"`` (stated only for others: the pooled replicates) or ``"other stated"``
    (stated only for others and no replicates anywhere: the mean of their variances).
    """
    same = data.identical_rewards
    if data.yvar is None:
        if reward is None:
            return "identical replicates" if same else "inferred"
        return "identical replicates" if reward in same else "inferred"
    if stated is not None:
        # Replicates name the source once they could set it without a statement
        # (MIN_REPLICATE_DOF of the reward system's own); below that its value is mostly stated.
        if reward is None or reward not in rewards:
            return "replicates" if data.noise_dof >= MIN_REPLICATE_DOF else "stated"
        if replicate_dof(data, rewards, reward) >= MIN_REPLICATE_DOF:
            return "replicates"
        if reward in stated:
            return "stated"
        return "other replicates" if data.noise_dof else "other stated"
    if reward is None or reward not in rewards:
        return "replicates"
    if reward in same:
        return "other replicates"
    return "replicates" if (data.counts[_rows_of(data, rewards, reward)] > 1).any() else "other replicates"
