"""The grid protocol's local quadratic call (planner/strategies/quadratic.py) and the
prior's call where runs say nothing."""

from __future__ import annotations

import numpy as np
import pytest

from planner.errors import ConfigError
from planner.schema import Metrics
from planner.strategies import RaceProblem, make_strategy
from planner.strategies.quadratic import quadratic_call
from tests.planner.fake_runs import PROBLEM, S, bump, run


def _label(rho: float) -> str:
    """The regime of the plan a request for ``rho`` compiles to at PROBLEM's budget: what a
    call labels by (the levers are discrete, so it is not always rho's own)."""
    from planner.frontier import allocation_shares
    from planner.regime import LABELS, regime_labels

    return LABELS[int(regime_labels(allocation_shares(S.model, S.reward, [rho], PROBLEM.opts, PROBLEM.budget))[0])]


# The least request whose plan is update-heavy: 0.5044 for 1.5b sparse at 1e16, where
# requests from 0.4945 compile to a plan metering 0.4993.
EDGE = next(float(x) for x in np.round(np.arange(0.49, 0.52, 1e-4), 4) if _label(x) == "update-heavy")
SHIFT = EDGE - 0.5  # moves the cases built around the rho = 0.5 boundary onto the plans' one


def test_quadratic_call_finds_the_vertex_of_an_exact_parabola() -> None:
    r = np.linspace(0.2, 0.9, 8)
    call = quadratic_call(S, PROBLEM, r, [bump(x, 0.66) for x in r])
    assert call.rho_star == pytest.approx(0.66, abs=1e-6)
    assert call.regime == "update-heavy" and call.confidence == 1.0


def test_quadratic_call_bootstrap_spreads_probability_near_the_boundary() -> None:
    # Peak exactly at 0.5 with symmetric scatter: the fit's vertex is 0.5 and the bootstrap
    # puts it on either side of the boundary about equally often.
    r = np.repeat(np.linspace(0.3, 0.7, 5), 3)
    y = [bump(x, 0.5) + e for x, e in zip(r, [0.05, -0.05, 0.0] * 5, strict=True)]
    call = quadratic_call(S, PROBLEM, r, y)
    assert 0.2 < call.probabilities["update-heavy"] < 0.8
    # The optimum's interval straddles the boundary; the interval of rho* given the call
    # stays inside the called regime (RegimeCall's definitions, as ours' calls use them).
    assert call.optimum_ci is not None and call.optimum_ci[0] < 0.5 < call.optimum_ci[1]
    # Inside as the plans they compile to at the target budget are labelled: a request for
    # 0.5 meters 0.4993 there, search-heavy.
    lo, hi = call.rho_star_ci
    assert lo <= call.rho_star <= hi and {_label(lo), _label(call.rho_star), _label(hi)} == {call.regime}


def test_quadratic_call_marks_a_fit_with_no_residual_as_exact() -> None:
    # The best rho at the grid's edge: a 3-point window, one seed: every refit is the fit.
    r = np.linspace(0.1, 0.9, 5)
    edge = quadratic_call(S, PROBLEM, r, [0.60, 0.59, 0.50, 0.45, 0.40])
    assert edge.confidence == 1.0 and edge.extra["exact_fit"] is True
    # Replicates give residuals to resample: a confidence, not an exact fit.
    rr = np.repeat(r, 2)
    noisy = quadratic_call(S, PROBLEM, rr, [y + e for y, e in zip(np.repeat([0.60, 0.59, 0.50, 0.45, 0.40], 2),
                                                                    [0.02, -0.02] * 5, strict=True)])
    assert noisy.extra["exact_fit"] is False


@pytest.mark.parametrize("y", [0.0, 0.25])
def test_quadratic_call_on_a_metric_without_trend_is_the_open_prior(y: float) -> None:
    """pass@1 of a policy that never solves a problem: a flat fit "peaked" at an end of
    the window and called that end's regime with P 1 (exact_fit), decided at the decision
    budget. No trend is the prior's open call, as ours'."""
    from planner.strategies import decision_state, flat_prior_call

    r = np.linspace(0.1, 0.9, 5)
    call = quadratic_call(S, PROBLEM, r, [y] * 5)
    prior = flat_prior_call(S, PROBLEM)
    assert call.probabilities == prior.probabilities and call.extra["no_trend"] is True
    at_target = RaceProblem((S,), budget=1e16, pilot_budget=1e15)
    g = make_strategy("grid", at_target, n_points=5, budget=1e16)
    g.tell([run(p, {S: 0.7}).model_copy(update={"metrics": Metrics(native=y)}) for p in g.ask()])
    assert decision_state(g.decide()[S], at_target) == "open"


def test_quadratic_calls_the_regime_its_rho_star_lies_in() -> None:
    """A vertex just above the boundary (update-heavy) was labelled search-heavy, the
    bootstrap refits' majority (or tie). The call keeps the majority and, as ours' does,
    takes the fit's best rho within it: rho* and regime agree."""
    call = quadratic_call(S, PROBLEM, [x + SHIFT for x in (0.178, 0.356, 0.535, 0.713, 0.891)],
                          [0.5026, 0.5851, 0.6117, 0.5471, 0.464])
    assert call.regime == max(call.probabilities, key=call.probabilities.__getitem__) == "search-heavy"
    assert call.optimum_ci is not None and call.optimum_ci[0] < EDGE < call.optimum_ci[1]
    assert _label(call.rho_star) == call.regime
    assert call.rho_star == pytest.approx(EDGE, abs=2e-3)


def test_quadratic_call_with_fewer_than_three_rho_values_is_the_best_observed() -> None:
    """No curvature to fit below three distinct rho values: rho* is the best observed rho
    (replicates averaged), a point call (exact_fit); one run, or none, is the prior's call."""
    from planner.strategies import flat_prior_call

    two = quadratic_call(S, PROBLEM, [0.3, 0.3, 0.7, 0.7], [0.50, 0.60, 0.56, 0.56])  # means 0.55 < 0.56
    assert two.rho_star == 0.7 and two.rho_star_ci == (0.7, 0.7)
    assert two.regime == "update-heavy" and two.confidence == 1.0 and two.extra["exact_fit"] is True
    low = quadratic_call(S, PROBLEM, [0.3, 0.7], [0.6, 0.5])
    assert low.rho_star == 0.3 and low.regime == "search-heavy"
    prior = flat_prior_call(S, PROBLEM)
    one = quadratic_call(S, PROBLEM, [0.6], [0.55])
    assert one.probabilities == prior.probabilities and one.extra["no_trend"] is True
    none = quadratic_call(S, PROBLEM, [], [])
    assert none.probabilities == prior.probabilities and "no_trend" not in none.extra


def test_the_prior_call_bounds_rho_star_within_its_regime_and_the_optimum_over_the_range() -> None:
    """Before any data rho* is uniform over the reachable range: optimum_ci is that range's
    central 90%, rho_star_ci the same within the called regime (RegimeCall's definitions)."""
    from planner.frontier import allocation_shares, rho_grid
    from planner.regime import LABELS, regime_labels
    from planner.strategies import flat_prior_call

    prior = flat_prior_call(S, PROBLEM)
    g = rho_grid(S.model, S.reward, 201, PROBLEM.opts)
    labels = regime_labels(allocation_shares(S.model, S.reward, g, PROBLEM.opts, PROBLEM.budget))
    inside = g[labels == LABELS.index(prior.regime)]
    assert prior.optimum_ci == pytest.approx((np.quantile(g, 0.05), np.quantile(g, 0.95)))
    assert prior.rho_star_ci == pytest.approx((np.quantile(inside, 0.05), np.quantile(inside, 0.95)))
    assert inside.min() <= prior.rho_star_ci[0] < prior.rho_star_ci[1] <= inside.max()
    assert prior.rho_star_ci != prior.optimum_ci  # the regime is a strict part of the range


@pytest.mark.parametrize(("model", "reward"), [("qwen2.5-1.5b", "prm"), ("qwen2.5-7b", "sparse"),
                                               ("tiny-s", "sparse"), ("tiny-m", "dense"), ("tiny-m", "structured")])
def test_the_prior_calls_rho_star_lies_in_its_own_interval(model: str, reward: str) -> None:
    """rho* is the recommendation within the called regime: the whole range's median was
    given instead, and for 1.5b/prm read 0.46 beside an interval of [0.47, 0.88] in the
    regimes.json of a setting no run reached."""
    from planner.frontier import Setting
    from planner.strategies import flat_prior_call

    s = Setting(model, reward)
    prior = flat_prior_call(s, RaceProblem((s,), budget=1e16, pilot_budget=1e15))
    assert prior.rho_star_ci[0] <= prior.rho_star <= prior.rho_star_ci[1]


def test_quadratic_call_fits_three_rho_values() -> None:
    """Three distinct rho values are enough to fit: rho* is the parabola's vertex (0.7 for
    0.6 - 2 (rho - 0.7)^2), not the best observed rho (0.6)."""
    r = [0.3, 0.6, 0.9]
    call = quadratic_call(S, PROBLEM, r, [bump(x, 0.7) for x in r])
    assert call.rho_star == pytest.approx(0.7, abs=1e-9) and call.extra["exact_fit"] is True


def test_quadratic_call_of_a_convex_window_takes_its_better_end() -> None:
    """A convex fit has no maximum inside the window: rho* is the end of higher value. For
    0.1 (rho - 0.45)^2 the best run is 0.7, the window 0.5-0.7, and f(0.7) > f(0.5)."""
    r = [0.3, 0.4, 0.5, 0.6, 0.7]
    call = quadratic_call(S, PROBLEM, r, [0.1 * (x - 0.45) ** 2 for x in r])
    assert call.rho_star == pytest.approx(0.7, abs=1e-12)
    assert call.regime == "update-heavy"
    # and mirrored: the lower end when it is the better one (best run 0.3, window 0.3-0.5)
    low = quadratic_call(S, PROBLEM, r, [0.1 * (x - 0.55) ** 2 for x in r])
    assert low.rho_star == pytest.approx(0.3, abs=1e-12) and low.regime == "search-heavy"


def test_quadratic_call_fits_the_best_rho_and_two_neighbours_each_side() -> None:
    """The window is the best observed rho and up to two distinct rho values on each side
    (rounded to 4 digits: 0.39996 is 0.4 and 0.70004 is 0.7, both inside): farther runs,
    off the local curve here, do not move the fit. Expected: numpy's least-squares parabola
    through the four window runs."""
    r = np.array([0.1, 0.2, 0.3, 0.39996, 0.5, 0.6, 0.70004])
    y = np.array([bump(x, 0.62) for x in r]) + np.array([-0.1, -0.1, -0.1, 0.01, -0.01, 0.0, 0.01])
    assert int(np.argmax(y)) == 5
    c = np.polyfit(r[3:], y[3:], 2)
    vertex = -c[1] / (2 * c[0])
    assert 0.55 < vertex < 0.7
    call = quadratic_call(S, PROBLEM, r, y)
    assert call.rho_star == pytest.approx(vertex, abs=1e-9)
    assert call.extra["exact_fit"] is False  # four runs, three coefficients: residuals


def test_quadratic_call_below_the_boundary_takes_the_best_rho_of_the_called_regime() -> None:
    """The mirror of the case above: the vertex just below the boundary is search-heavy,
    most refits' vertices update-heavy; rho* is the fit's best rho within update-heavy,
    just above the boundary (not the window's far end)."""
    r = [1 - x + SHIFT for x in (0.178, 0.356, 0.535, 0.713, 0.891)]
    call = quadratic_call(S, PROBLEM, r, [0.5026, 0.5851, 0.6117, 0.5471, 0.464])
    assert call.regime == "update-heavy" == max(call.probabilities, key=call.probabilities.__getitem__)
    assert EDGE - 1e-9 <= call.rho_star < EDGE + 0.002 and _label(call.rho_star) == "update-heavy"


def test_quadratic_call_interval_is_the_central_level_of_the_refits() -> None:
    """optimum_ci is the central ``level`` interval of the bootstrap refits' vertices, whose
    regime shares are the probabilities: with k of n = 200 vertices search-heavy (below
    EDGE), a lower tail of (k - 1.5) / 199 ends below EDGE and one of (k + 0.5) / 199 at or
    above it (numpy's linear quantiles over the sorted vertices). rho_star_ci is the same
    over the vertices in the called regime only."""
    r = np.repeat(np.linspace(0.3, 0.7, 5), 3) + SHIFT
    y = [bump(x, 0.51 + SHIFT) + e for x, e in zip(r, [0.04, -0.05, 0.01] * 5, strict=True)]
    base = quadratic_call(S, PROBLEM, r, y, n_boot=200)
    assert base.level == 0.9
    k = round(base.probabilities["search-heavy"] * 200)
    assert 10 < k < 190
    below = quadratic_call(S, PROBLEM, r, y, n_boot=200, level=1 - 2 * (k - 1.5) / 199)
    above = quadratic_call(S, PROBLEM, r, y, n_boot=200, level=1 - 2 * (k + 0.5) / 199)
    assert below.optimum_ci is not None and above.optimum_ci is not None
    assert below.optimum_ci[0] < EDGE - 1e-9 <= above.optimum_ci[0]
    for call in (base, below, above):
        assert call.optimum_ci is not None and call.optimum_ci[0] <= call.optimum_ci[1]
        lo, hi = call.rho_star_ci
        assert lo <= hi and ((lo >= EDGE - 1e-9) if call.regime == "update-heavy" else (hi < EDGE))
    assert below.optimum_ci[1] >= above.optimum_ci[1]  # a larger level, a wider interval


def test_quadratic_call_names_a_non_finite_metric() -> None:
    with pytest.raises(ConfigError, match=r"^y: qwen2.5-1.5b/sparse's runs include a non-finite value \(nan\)"):
        quadratic_call(S, PROBLEM, [0.2, 0.5, 0.8], [0.4, float("nan"), 0.5])
