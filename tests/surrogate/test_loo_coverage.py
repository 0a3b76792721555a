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


def test_loo_summaries_of_known_predictions(monkeypatch: pytest.MonkeyPatch) -> None:
    """rmse, 90% coverage (|z| <= 1.6449) and the mean Gaussian log density
    -z^2 / 2 - log(std) - log(2 pi) / 2, from BoTorch's LOO posterior as given."""
    import math
    import types

    import botorch.cross_validation
    import torch

    from surrogate.cv import loo_cv

    obs, std = torch.tensor([0.0, 3.3, 6.0]), 2.0  # z = 0, 1.65 (just outside 90%), 3
    fake = types.SimpleNamespace(
        posterior=types.SimpleNamespace(mean=torch.zeros(3, 1), variance=torch.full((3, 1), std**2)),
        observed_Y=obs.reshape(3, 1),
    )
    monkeypatch.setattr(botorch.cross_validation, "loo_cv", lambda model, observation_noise: fake)
    X = np.arange(15.0).reshape(3, 5)
    cv = loo_cv(types.SimpleNamespace(model_=None, data_=types.SimpleNamespace(X=X)))
    z = np.array([0.0, 1.65, 3.0])
    assert cv.n == 3 and cv.to_dict()["n"] == 3 and cv.X.tolist() == X.tolist()
    assert cv.rmse == pytest.approx(math.sqrt((0 + 3.3**2 + 36) / 3))
    assert cv.coverage90 == pytest.approx(1 / 3)
    assert cv.loglik == pytest.approx(float(np.mean(-z**2 / 2 - math.log(2.0) - math.log(2 * math.pi) / 2)))
    assert cv.std.tolist() == pytest.approx([2.0] * 3) and cv.mean.tolist() == [0.0] * 3
