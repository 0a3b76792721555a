"""benchmarks/noise_prior.py: the swapped prior reaches the fits without replicates, only them."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np
import pytest


def _runs(seeds: int) -> list[dict]:
    """A flat frontier under noise sd 0.01: its spread is all noise."""
    rng = np.random.default_rng(0)
    return [dict(model="m", model_params=1.5e9, reward="sparse", budget=1e15, rho_planned=rho, rho=rho,
                 flops_total=1e15, seed=s, status="ok", native=0.5 + rng.normal(0, 0.01))
            for rho in np.linspace(0.1, 0.9, 8) for s in range(seeds)]


def test_a_wider_prior_infers_more_noise_and_leaves_replicates_alone(
    load_script: Callable[..., ModuleType], monkeypatch: pytest.MonkeyPatch,
) -> None:
    import surrogate.model as sm
    from surrogate import FrontierSurrogate

    def fit(runs: list[dict]) -> FrontierSurrogate:
        return FrontierSurrogate(rewards=["sparse"], budget_range=(1e14, 1e16)).fit(runs)

    base, base_rep = fit(_runs(1)), fit(_runs(2))
    monkeypatch.setattr(sm.FrontierSurrogate, "_build", sm.FrontierSurrogate._build)  # restored after
    load_script("noise_prior", "noise_prior_t").use_noise_prior(-2.0)
    wide, wide_rep = fit(_runs(1)), fit(_runs(2))
    assert wide.noise_source("sparse") == "inferred"
    assert wide.run_noise_variance("sparse") > 2 * base.run_noise_variance("sparse")
    assert wide_rep.run_noise_variance("sparse") == pytest.approx(base_rep.run_noise_variance("sparse"))
