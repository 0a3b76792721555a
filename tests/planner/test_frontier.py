"""planner.frontier: what a request for each rho buys, as the surrogate's reuse plug sees it."""

from __future__ import annotations

import numpy as np
import pytest

from planner.compiler import compile_plan
from planner.errors import ConfigError
from planner.frontier import reuse_at, rho_grid


def test_reuse_at_is_the_compilers_choice_and_switches_between_neighbours() -> None:
    m, r = "qwen2.5-1.5b", "sparse"
    grid = rho_grid(m, r, 121)
    mu = reuse_at(m, r, grid, 1e16)
    assert mu.shape == grid.shape
    for rho in grid[::10]:
        assert reuse_at(m, r, np.array([rho]), 1e16)[0] == compile_plan(m, r, float(rho), 1e16).num_iterations
    # The compiler does switch mu between neighbouring rho values: the frontier over rho
    # is several branches (why the surrogate needs mu as an input).
    assert len(set(mu.tolist())) >= 2 and np.count_nonzero(np.diff(mu)) >= 3
    # Out of the levers' reach: no plan, treated as mu = 1.
    assert reuse_at(m, r, np.array([1.2]), 1e16)[0] == 1


def test_reuse_at_reads_the_exact_budget() -> None:
    # Below ~20 prompt groups the levers change within 1% of budget: no rounding of the budget.
    import numpy as np

    from planner.compiler import compile_plan
    from planner.frontier import reuse_at

    for b in (1.13296e16, 1.13e16):
        want = compile_plan("qwen2.5-7b", "sparse", 0.5694, b).num_iterations
        assert reuse_at("qwen2.5-7b", "sparse", np.array([0.5694]), b)[0] == want


def test_a_frontier_band_takes_any_central_level() -> None:
    import pytest

    from planner.frontier import FrontierBand

    f = FrontierBand("m", "r", "native", 1e16, np.array([0.3, 0.6]), np.array([0.5, 0.6]), np.array([0.1, 0.2]))
    lo, hi = f.band(0.9)
    assert np.allclose(hi - f.mean, 1.6448536 * f.std)
    lo8, hi8 = f.band(0.8)  # was a KeyError: only 0.5 and 0.9 were tabled
    assert np.allclose(hi8 - f.mean, 1.2815516 * f.std) and np.all(lo8 > lo)
    for bad in (0.0, 1.0, 90):
        with pytest.raises(ValueError, match="level"):
            f.band(bad)


def test_grid_and_reuse_refuse_what_they_cannot_answer() -> None:
    import pytest

    from planner.errors import ConfigError

    for n in (0, 1, -3):  # an empty grid failed in the Sobol engine; one point is no range
        with pytest.raises(ConfigError, match=r"^n: "):
            rho_grid("qwen2.5-1.5b", "prm", n)
    # reuse_at answered mu = 1 for anything it could not compile, a typo'd model included.
    with pytest.raises(ConfigError, match=r"^model: "):
        reuse_at("nope", "prm", np.array([0.2]), 1e16)
    for b in (0.0, float("nan")):
        with pytest.raises(ConfigError, match=r"^budget: "):
            reuse_at("qwen2.5-1.5b", "prm", np.array([0.2]), b)


def test_a_setting_is_keyed_model_slash_reward() -> None:
    from planner.frontier import Setting

    assert Setting("qwen2.5-1.5b", "prm").key == "qwen2.5-1.5b/prm"


def test_a_two_point_grid_is_the_ends_of_the_reachable_range() -> None:
    from planner.compiler import achievable_rho_range

    lo, hi = achievable_rho_range("qwen2.5-1.5b", "prm")
    assert rho_grid("qwen2.5-1.5b", "prm", 2).tolist() == [lo, hi]
    assert len(rho_grid("qwen2.5-1.5b", "prm", 3)) == 3


def test_an_infinite_budget_is_refused_too() -> None:
    import pytest

    from planner.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^budget: "):
        reuse_at("qwen2.5-1.5b", "prm", np.array([0.2]), float("inf"))


def test_reward_fraction_is_the_compilers_split_of_non_learning_flops() -> None:
    """reward / (search + reward) of compiled plans, the same at every rho and budget."""
    from planner.frontier import allocation_shares, reward_fraction

    assert reward_fraction("qwen2.5-1.5b", "sparse") == 0.0  # rule rewards cost nothing
    f = reward_fraction("qwen2.5-1.5b", "prm")
    for rho, budget in ((0.3, 1e16), (0.7, 3e16)):
        p = compile_plan("qwen2.5-1.5b", "prm", rho, budget).flops
        assert f == pytest.approx(p.reward / (p.search + p.reward), rel=1e-9)
        shares = allocation_shares("qwen2.5-1.5b", "prm", np.array([p.rho]))[0]
        assert shares == pytest.approx([p.search / p.total, p.learning / p.total, p.reward / p.total], rel=1e-9)


def test_both_ends_of_every_band_are_normal_quantiles_of_the_std() -> None:
    from planner.frontier import FrontierBand

    mean, std = np.array([0.5, 0.6]), np.array([0.1, 0.2])
    d = FrontierBand("m", "r", "native", 1e16, np.array([0.3, 0.6]), mean, std).to_dict()
    # z of a central 50% interval: 0.67449 (the quartiles); of a 90% one: 1.64485.
    assert d["lo50"] == pytest.approx(mean - 0.6744898 * std) and d["hi50"] == pytest.approx(mean + 0.6744898 * std)
    assert d["lo90"] == pytest.approx(mean - 1.6448536 * std) and d["hi90"] == pytest.approx(mean + 1.6448536 * std)


def test_a_run_counts_at_the_budget_within_a_factor_of_one_and_a_half() -> None:
    from planner.frontier import at_budget

    b = 1e16
    assert at_budget(b, b) and at_budget(1.5 * b, b) and at_budget(b / 1.5, b)
    assert not at_budget(1.51 * b, b) and not at_budget(b / 1.51, b)


class _Stub:
    """A fitted surrogate as the frontier code reads it: every sample path peaks at 0.7;
    feature rows are (model, reward, rho, log10 budget, mu)."""

    target = "accuracy"
    MODELS, REWARDS = {"qwen2.5-1.5b": 1.5, "qwen2.5-7b": 7.0}, {"sparse": 0.0, "prm": 1.0}

    def __init__(self, runs: list[tuple[str, str, float, float]] | None, variance: float = 4e-4,
                 peak: float = 0.7) -> None:
        self.peak = peak
        if runs is not None:
            import types

            self.data_ = types.SimpleNamespace(X=np.array([self.encode(m, r, [rho], b)[0] for m, r, rho, b in runs]))
        self.variance = variance
        self.asked: list[np.ndarray] = []

    def encode(self, model, reward, rho, budget):  # type: ignore[no-untyped-def]
        return np.array([[self.MODELS[model], self.REWARDS[reward], rho[0], np.log10(budget), 1.0]])

    def frontier(self, model, reward, budget, g):  # type: ignore[no-untyped-def]
        self.asked.append(np.asarray(g))
        return -((g - self.peak) ** 2), np.full(g.shape, 0.01)

    def sample_frontier(self, model, reward, budget, g, n_samples, seed):  # type: ignore[no-untyped-def]
        return np.tile(-((g - self.peak) ** 2), (n_samples, 1))

    def run_noise_variance(self, reward):  # type: ignore[no-untyped-def]
        return self.variance

    def noise_source(self, reward):  # type: ignore[no-untyped-def]
        return "replicates"


GRID = np.round(np.linspace(0.1, 0.9, 81), 10)  # 0.01 apart


def test_measured_points_are_those_near_runs_of_this_setting_at_this_budget() -> None:
    from planner.frontier import _measured_near

    m, r, b = "qwen2.5-1.5b", "sparse", 1e16
    runs = [(m, r, 0.3, b), (m, r, 0.45, 1.5 * b),  # both count (at_budget is inclusive)
            (m, r, 0.6, 2 * b), (m, r, 0.62, b / 2),  # another budget
            (m, "prm", 0.8, b), ("qwen2.5-7b", r, 0.85, b)]  # another setting
    near = _measured_near(_Stub(runs), m, r, b, GRID, 0.025)
    want = (np.abs(GRID - 0.3) <= 0.025) | (np.abs(GRID - 0.45) <= 0.025)
    assert near.tolist() == want.tolist() and near.sum() == 10
    assert not _measured_near(_Stub(runs), m, r, b, GRID, 0.0).any()
    assert not _measured_near(_Stub(None), m, r, b, GRID, 0.05).any()  # nothing fitted
    assert not _measured_near(_Stub(runs[2:]), m, r, b, GRID, 0.05).any()


def test_classify_setting_recommends_a_measured_rho_where_there_is_one() -> None:
    from planner.frontier import classify_setting

    m, r, b = "qwen2.5-1.5b", "sparse", 1e16
    # The mean peaks at 0.7, but this budget's run is at 0.615: rho* is the best grid point
    # within the default support (0.05) of it.
    call = classify_setting(_Stub([(m, r, 0.615, b)]), m, r, b, grid=GRID)
    assert call.regime == "update-heavy" and call.rho_star == pytest.approx(0.66)
    assert call.extra["rho_star_support"] == "measured" and call.level == 0.9
    assert call.extra["noise_sd"] == pytest.approx(0.02) and call.extra["noise_source"] == "replicates"
    free = classify_setting(_Stub(None, variance=-1e-6), m, r, b, grid=GRID)
    assert free.rho_star == pytest.approx(0.7) and free.extra["rho_star_support"] == "posterior-mean"
    assert free.extra["noise_sd"] == 0.0
    # Given shares win over the registry's: every point reward-heavy.
    own = classify_setting(_Stub(None), m, r, b, grid=GRID, shares=np.tile([0.1, 0.2, 0.7], (GRID.size, 1)))
    assert own.regime == "reward-heavy"


def test_a_call_names_the_regime_of_the_plan_its_rho_star_compiles_to() -> None:
    """The levers are discrete: qwen2.5-3b proxy-prm's grid rho 0.4113 at 1e16 compiles to a
    plan metering 0.4065, search-heavy, though the request's own allocation is update-heavy.
    The call labels by the plan (as ``runners truth`` does), so it recommends a plan of the
    regime it names."""
    from planner.compiler import compile_plan
    from planner.frontier import allocation_shares, classify_setting
    from planner.regime import LABELS, regime_labels

    m, r, b = "qwen2.5-3b", "proxy-prm", 1e16
    g = rho_grid(m, r)
    i = int(np.argmin(np.abs(g - 0.4113)))
    assert LABELS[regime_labels(allocation_shares(m, r, g[i:i + 1]))[0]] == "update-heavy"
    call = classify_setting(_Stub(None, peak=float(g[i])), m, r, b)
    f = compile_plan(m, r, round(call.rho_star, 6), b).flops
    assert call.rho_star == pytest.approx(g[i])
    assert call.regime == LABELS[int(np.argmax([f.search, f.learning, f.reward]))] == "search-heavy"
    assert call.probabilities["search-heavy"] == 1.0


def test_shares_at_a_budget_are_the_compiled_plans_and_the_requests_where_none_compiles() -> None:
    from planner.compiler import compile_plan
    from planner.frontier import allocation_shares

    m, r, b = "qwen2.5-1.5b", "proxy-prm", 1e16
    g = rho_grid(m, r, 41)
    got = allocation_shares(m, r, g, budget=b)
    for rho, row in zip(g, got, strict=True):
        f = compile_plan(m, r, round(float(rho), 6), b).flops
        assert row == pytest.approx(np.array([f.search, f.learning, f.reward]) / f.total, abs=1e-9)
    assert not np.allclose(got, allocation_shares(m, r, g))  # the levers move some points
    # Far below any plan's cost nothing compiles: the allocation at the requested rho.
    assert allocation_shares(m, r, g, budget=1.0) == pytest.approx(allocation_shares(m, r, g))
    with pytest.raises(ConfigError, match="budget"):
        allocation_shares(m, r, g, budget=-1.0)


def test_without_a_grid_the_frontier_is_read_on_the_settings_rho_grid() -> None:
    from planner.frontier import classify_setting, frontier_band

    m, r, b = "qwen2.5-1.5b", "sparse", 1e16
    stub = _Stub(None)
    band = frontier_band(stub, m, r, b)
    assert band.rho.tolist() == rho_grid(m, r).tolist() == stub.asked[-1].tolist()
    assert band.mean == pytest.approx(-((band.rho - 0.7) ** 2)) and band.target == "accuracy" and band.budget == b
    assert frontier_band(stub, m, r, b, grid=GRID).rho.tolist() == GRID.tolist()
    classify_setting(stub, m, r, b)
    assert stub.asked[-1].tolist() == rho_grid(m, r).tolist()


def test_the_shipped_surrogate_is_a_frontier_model() -> None:
    """FrontierModel is the surrogate plug point the planner drives (classify_setting,
    frontier_band, the acquisition): the shipped FrontierSurrogate, fitted, satisfies it at
    run time, with the Protocol's parameters and defaults (mypy checks the types where
    ours stores its fit), and its conditioned copy is one too."""
    import inspect

    from planner.design import compile_feasible
    from planner.frontier import FrontierModel, Setting
    from planner.proposals import make_proposal
    from runners.engines.sim import SimEngine
    from surrogate import FrontierSurrogate

    s, engine = Setting("qwen2.5-1.5b", "sparse"), SimEngine(world="paper")
    records = []
    for i, rho in enumerate((0.2, 0.4, 0.6, 0.8)):
        plan, _ = compile_feasible(s, rho, 1e15)
        assert plan is not None
        records.append(engine.run(make_proposal(plan, target="native", reason="test"), i))
    sur = FrontierSurrogate("native", rewards=["sparse"], models={s.model: 1.5e9},
                            budget_range=(1e14, 1e16)).fit(records)
    assert isinstance(sur, FrontierModel) and sur.target == "native"
    members = [n for n in vars(FrontierModel) if not n.startswith("_") and callable(getattr(FrontierModel, n))]
    assert set(members) == {"encode", "predict", "frontier", "sample_frontier", "lookahead_samples",
                            "run_noise_variance", "condition_on"}
    for name in members:
        mine = [(p.name, p.kind, p.default) for p in inspect.signature(getattr(sur, name)).parameters.values()]
        theirs = [(p.name, p.kind, p.default)
                  for p in list(inspect.signature(getattr(FrontierModel, name)).parameters.values())[1:]]
        assert mine == theirs, name
    X = sur.encode(s.model, s.reward, [0.5], 1e16)
    assert X.ndim == 2 and X.shape[0] == 1
    assert isinstance(sur.condition_on(X, [0.5]), FrontierModel)
    assert not isinstance(object(), FrontierModel)
