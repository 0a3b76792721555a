"""Predictions say nothing on stderr about variance round-off they clamp anyway."""

from __future__ import annotations

import warnings

import numpy as np

from planner.compiler import compile_plan
from planner.proposals import make_proposal
from runners.engines.sim import SimEngine
from surrogate import FrontierSurrogate


def test_a_frontier_near_replicated_runs_warns_of_no_negative_variance() -> None:
    # qwen2.5-7b prm at 5e14 with two seeds a plan: gpytorch rounded a variance a hair below
    # 0 up and warned, six times a race on stderr (a user's race log).
    eng = SimEngine()
    recs = [eng.run(make_proposal(compile_plan("qwen2.5-7b", "prm", rho, 5e14)), seed)
            for rho in (0.4, 0.6, 0.8) for seed in (0, 1)]
    s = FrontierSurrogate(target="native").fit(recs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for r in recs:
            mean, std = s.frontier(r.model, r.reward, r.budget, np.linspace(0.01, 0.99, 97))
    assert np.isfinite(mean).all() and (std >= 0).all()
    assert not [w for w in caught if "Negative variance" in str(w.message)]
