"""Acceptance: LOO-CV 90% interval coverage lies in [0.80, 0.97] on simulator data."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("runners.sim.simulate")


def test_loo_coverage_on_sim_data() -> None:
    """On the records a race fits: the sim engine's runs of compiled plans (their achieved
    rho and update passes mu, each with its own seed), not the simulator's mean at the
    requested rho, which no run ever measures exactly."""
    from planner.compiler import achievable_rho_range, compile_plan
    from planner.engine import load_engine
    from planner.errors import InfeasibleError
    from planner.proposals import make_proposal
    from planner.registry import REWARD_SYSTEMS
    from surrogate import FrontierSurrogate

    rng = np.random.default_rng(0)
    engine = load_engine("sim", world="paper")
    records = []
    for m in ("qwen2.5-1.5b", "qwen2.5-7b"):
        for r in REWARD_SYSTEMS:
            lo, hi = achievable_rho_range(m, r)
            for b, n in ((2e15, 8), (1e16, 4)):
                for x in lo + (hi - lo) * (np.arange(n) + rng.uniform(0.2, 0.8)) / n:
                    try:
                        prop = make_proposal(compile_plan(m, r, float(x), b))
                    except InfeasibleError:
                        continue
                    rec = engine.run(prop, int(rng.integers(1 << 20)))
                    if rec.status == "ok" and rec.metrics.native is not None:
                        records.append(rec)
    assert len(records) >= 110
    assert len({(r.plan.num_iterations, r.reward) for r in records}) > len(REWARD_SYSTEMS)  # mu varies
    cv = FrontierSurrogate(rewards=REWARD_SYSTEMS, budget_range=(1e14, 1e16)).fit(records).loo_cv()
    assert cv.n == len(records)
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
