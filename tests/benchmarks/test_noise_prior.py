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


def test_short_races_state_the_noise_to_ours(load_script: Callable[..., ModuleType],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import planner.strategies

    told: list[object] = []

    class Told(Exception):
        pass

    def capture(name: str, problem: object, seed: int, **opts: object) -> None:
        told.append(opts.get("noise_sd"))
        raise Told

    monkeypatch.setattr(planner.strategies, "make_strategy", capture)
    script = load_script("noise_prior", "noise_prior_short_t")
    for sd in (0.01, None):
        with pytest.raises(Told):
            script.short_races(1, noise_sd=sd)
    assert told == [0.01, None]


def test_the_stored_short_races_are_the_documented_table() -> None:
    """docs/planner.md ("A stated noise"): confident calls right, per noise the fit used."""
    import json
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "noise_stated_1204"
    got = {}
    for f in sorted(folder.glob("*.json")):
        s = json.loads(f.read_text())["summary"]
        got[f.stem] = (s["right"], s["sure_right"], s["sure"])
    assert got == {"stated_none": (38, 32, 40), "stated_0.005": (37, 23, 26), "stated_0.010": (40, 10, 10),
                   "stated_0.020": (43, 1, 1), "seeds2": (40, 11, 11)}
