"""Acceptance: LOO-CV 90% interval coverage lies in [0.80, 0.97] on simulator data."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("runners.sim.simulate")


def test_loo_coverage_on_sim_data() -> None:
    from planner.compiler import achievable_rho_range
    from planner.registry import REWARD_SYSTEMS, get_model
    from runners.sim.simulate import simulate
    from surrogate import FrontierSurrogate

    rng = np.random.default_rng(0)
    rows = []
    for m in ("qwen2.5-1.5b", "qwen2.5-7b"):
        for r in REWARD_SYSTEMS:
            lo, hi = achievable_rho_range(m, r)
            for b, n in ((2e15, 8), (1e16, 4)):
                rho = lo + (hi - lo) * (np.arange(n) + rng.uniform(0.2, 0.8)) / n
                y = simulate("paper", m, r, rho, b, "native", seed=int(rng.integers(1 << 30)))
                rows += [dict(model=m, model_params=float(get_model(m).num_parameters), reward=r, budget=b,
                              rho_planned=x, rho=x, flops_total=b, native=v, seed=0, status="ok")
                         for x, v in zip(rho, y, strict=True) if np.isfinite(v)]
    assert len(rows) >= 110
    cv = FrontierSurrogate(rewards=REWARD_SYSTEMS, budget_range=(1e14, 1e16)).fit(rows).loo_cv()
    assert 0.80 <= cv.coverage90 <= 0.97, cv.coverage90
    assert cv.rmse < 0.02  # the world's noise is 0.01
