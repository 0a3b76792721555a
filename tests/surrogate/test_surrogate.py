"""The frontier surrogate: fit/predict/sample shapes, replicate noise, LOO-CV on sim data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from surrogate import FrontierSurrogate, NotFittedError, extract, group_replicates
from tests.surrogate.toy_rows import PARAMS, REWARDS, rows, toy


@pytest.fixture(scope="module")
def fitted() -> FrontierSurrogate:
    return FrontierSurrogate(rewards=REWARDS, budget_range=(1e14, 1e16)).fit(rows(budgets=(1e15, 1e16)))


def test_predict_and_sample_shapes(fitted: FrontierSurrogate) -> None:
    grid = np.linspace(0.1, 0.95, 30)
    X = fitted.encode("small", "prm", grid, 1e15)
    assert X.shape == (30, 5)
    mean, std = fitted.predict(X)
    assert mean.shape == std.shape == (30,) and np.all(std > 0)
    s1 = fitted.sample_frontier("small", "prm", 1e15, grid, n_samples=64, seed=3)
    s2 = fitted.sample_frontier(1.5e9, "prm", 1e15, grid, n_samples=64, seed=3)
    assert s1.shape == (64, 30)
    np.testing.assert_allclose(s1, s2)  # by name or by parameter count; seeded
    # The fitted frontier peaks where the toy does.
    assert abs(grid[np.argmax(mean)] - 0.44) < 0.08
    m2, _ = fitted.frontier("big", "sparse", 1e15, grid)
    assert abs(grid[np.argmax(m2)] - 0.72) < 0.08


def test_lookahead_and_condition(fitted: FrontierSurrogate) -> None:
    grid = np.linspace(0.1, 0.95, 20)
    Xg = fitted.encode("small", "sparse", grid, 1e16)
    Xc = fitted.encode("small", "sparse", [0.3, 0.7], 1e15)
    la = fitted.lookahead_samples(Xc, Xg, n_fantasies=4, n_samples=16, seed=0)
    assert la.shape == (4, 2, 16, 20)
    cond = fitted.condition_on(Xc[:1], [0.5])
    _, before = fitted.predict(Xc[:1])
    _, after = cond.predict(Xc[:1])
    assert after[0] < before[0]


def test_replicates_set_the_noise() -> None:
    data = group_replicates(extract(rows(n_rho=4, seeds=3, noise=0.02), "native"), REWARDS)
    assert data.X.shape[0] == 16 and data.noise_dof == 32
    assert np.all(data.counts == 3)
    per_run = data.yvar * data.counts  # pooled per-run variance, near 0.02**2
    assert 0.5 * 0.02**2 < per_run.mean() < 2 * 0.02**2
    sur = FrontierSurrogate(rewards=REWARDS).fit(rows(n_rho=4, seeds=3, noise=0.02))
    assert sur.data_.yvar is not None
    # 2 policies x 4 plans x (3 seeds - 1) each; none without replicates
    assert sur.replicate_dof("sparse") == sur.replicate_dof("prm") == 16
    assert FrontierSurrogate(rewards=REWARDS).fit(rows(n_rho=4)).replicate_dof("sparse") == 0


def test_replicates_that_agree_exactly_leave_the_noise_to_the_fit() -> None:
    # A metric coarser than the noise (pass@1 on a few problems) can give seeds that agree
    # to the last digit: that is no evidence of zero noise, and a zero-noise fit would
    # interpolate every run.
    same = rows(n_rho=4, seeds=2, noise=0.0)
    data = group_replicates(extract(same, "native"), REWARDS)
    assert data.yvar is None and data.identical_rewards == REWARDS
    assert len(data.y) == len(same) // 2 and np.all(data.counts == 2)  # one row per plan
    sur = FrontierSurrogate(rewards=REWARDS).fit(same)
    assert sur.noise_source("sparse") == "identical replicates"
    assert sur.run_noise_variance("sparse") > 3e-8  # the floor was 1e-8; the fit's noise is bounded below
    nearly = [dict(r, native=r["native"] + 1e-12 * r["seed"]) for r in same]  # float dust is no noise either
    assert group_replicates(extract(nearly, "native"), REWARDS).yvar is None
    assert group_replicates(extract(rows(n_rho=4), "native"), REWARDS).identical_rewards == ()


def test_copies_of_runs_do_not_shrink_the_inferred_noise() -> None:
    # Each run a row, copies of one value read as evidence of no noise: a race's runs,
    # each duplicated, fitted noise sd 0.0012 against 0.0094, and P 0.80 became 0.99.
    once = rows(n_rho=4, noise=0.02)
    twice = once + [dict(r, seed=r["seed"] + 1) for r in once]
    a = FrontierSurrogate(rewards=REWARDS).fit(once)
    b = FrontierSurrogate(rewards=REWARDS).fit(twice)
    assert b.noise_source("sparse") == "identical replicates"
    assert b.run_noise_variance("sparse") == pytest.approx(a.run_noise_variance("sparse"), rel=0.05)


def test_one_plan_and_seed_under_two_run_ids_is_one_run() -> None:
    """A run recorded again under another id (another target's, or a request compiling to
    its levers), with the same numbers, was read as two replicates that agreed: the noise
    became "identical replicates" with no replicate ever run. Two plans whose rho agrees to
    4 digits (qwen2.5-7b sparse at 1e16, mu 2 and 3) stay two runs."""
    import numpy as np

    from planner.compiler import compile_plan
    from planner.errors import RaceError
    from planner.proposals import make_proposal
    from planner.strategies.base import plan_key
    from runners.engines.sim import SimEngine

    plans: dict = {}
    for x in np.round(np.linspace(0.79, 0.815, 126), 6):
        try:
            p = compile_plan("qwen2.5-7b", "sparse", float(x), 1e16)
        except RaceError:
            continue
        if round(p.rho, 4) == 0.8030:
            plans.setdefault(plan_key(p), []).append(p)
    (a, twin_plan, *_), (b, *_) = list(plans.values())[:2]  # two requests of one plan; another plan
    assert a.rho_target != twin_plan.rho_target and a.num_iterations != b.num_iterations
    eng = SimEngine()
    ra, rb = eng.run(make_proposal(a), 0), eng.run(make_proposal(b), 0)
    twin = eng.run(make_proposal(twin_plan), 0)
    assert twin.run_id != ra.run_id and twin.metrics.native == ra.metrics.native
    assert len(extract([ra, rb], "native")) == 2  # distinct plans, one rounded rho
    assert len(extract([ra, twin, rb], "native")) == 2  # the twin is ra's run
    assert len(extract([ra, eng.run(make_proposal(a), 1), rb], "native")) == 3  # a seed replicate is one


def test_a_group_of_identical_replicates_is_one_row_beside_groups_that_differ() -> None:
    # Too few replicate degrees of freedom (2): the noise is inferred, each run a row, but
    # copies of one value are one row, also where another group of the same reward system
    # differs (so the reward system as a whole is not "identical"): as two rows they read
    # as evidence of no noise.
    once = rows(n_rho=4, noise=0.02)
    same, other = once[0], once[1]  # two sparse plans of the small policy
    assert (same["reward"], other["reward"]) == ("sparse", "sparse") and same["rho_planned"] != other["rho_planned"]
    data = group_replicates(extract([*once, dict(same, seed=1), dict(other, seed=1, native=other["native"] + 0.03)],
                                    "native"), REWARDS)
    assert data.yvar is None and data.identical_rewards == ()
    assert len(data.y) == len(once) + 1  # the differing pair is two rows, the copies one
    assert sorted(data.counts.tolist()) == [1] * len(once) + [2]
    assert data.y[data.counts == 2] == pytest.approx([same["native"]])


def test_a_reward_whose_replicates_agree_takes_the_others_noise() -> None:
    # prm's seeds scatter, sparse's agree exactly: sparse's noise is prm's pooled level,
    # not its own zero shrunk toward it, and it says so.
    mixed = [dict(r) for r in rows(n_rho=4, seeds=2, noise=0.02)]
    first = {}
    for r in mixed:
        if r["reward"] == "sparse":
            r["native"] = first.setdefault((r["model"], r["rho_planned"]), r["native"])
    data = group_replicates(extract(mixed, "native"), REWARDS)
    assert data.yvar is not None and data.identical_rewards == ("sparse",) and data.noise_dof == 8
    sur = FrontierSurrogate(rewards=REWARDS).fit(mixed)
    assert sur.noise_source("sparse") == "other replicates" and sur.noise_source("prm") == "replicates"
    assert sur.run_noise_variance("sparse") == pytest.approx(sur.run_noise_variance("prm"))


def test_no_replicates_infers_noise_and_skips_bad_records() -> None:
    rs = rows(n_rho=4)
    rs.append({**rs[0], "status": "failed"})
    rs.append({**rs[0], "native": None})
    obs = extract(rs, "native")
    assert len(obs) == 16
    assert group_replicates(obs, REWARDS).yvar is None


def test_loo_cv_fields(fitted: FrontierSurrogate) -> None:
    cv = fitted.loo_cv()
    n = fitted.data_.X.shape[0]
    assert cv.mean.shape == cv.std.shape == cv.observed.shape == (n,)
    assert cv.rmse > 0 and 0 <= cv.coverage90 <= 1 and math.isfinite(cv.loglik)
    assert set(cv.to_dict()) >= {"rmse", "coverage90", "loglik", "mean", "std", "observed"}


def test_errors() -> None:
    with pytest.raises(NotFittedError):
        FrontierSurrogate().fit(rows(n_rho=1)[:1])
    # Seed replicates of one plan: once fitted with a signal variance of ~0, so the posterior
    # claimed certainty (std ~1e-5) at every rho, model and budget.
    one_plan = [r for r in rows(n_rho=1, seeds=4) if r["model"] == "small" and r["reward"] == "sparse"]
    with pytest.raises(NotFittedError, match="replicates of one plan"):
        FrontierSurrogate().fit(one_plan)
    # Every plan measured the same (pass1 of a policy that never solves one): the fit said
    # std 1e-5 everywhere, whatever the metric's scale.
    flat = [{**r, "native": 0.0} for r in rows(n_rho=4)]
    with pytest.raises(NotFittedError, match="the same native"):
        FrontierSurrogate().fit(flat)
    FrontierSurrogate().fit([*flat[:-1], {**flat[-1], "native": 0.25}])  # one other value: a fit
    with pytest.raises(NotFittedError):
        FrontierSurrogate().predict(np.zeros((1, 5)))
    sur = FrontierSurrogate(rewards=REWARDS).fit(rows(n_rho=3))
    with pytest.raises(KeyError, match="unknown model"):
        sur.encode("nope", "prm", [0.5], 1e15)
    with pytest.raises(KeyError, match="reward"):
        sur.encode("small", "dense", [0.5], 1e15)


def test_warm_start_reuses_hyperparameters() -> None:
    """A refit also starts from the previous optimum: on the same data that start is
    already there, so it scores what the previous fit did; without warm_start only the
    fresh start runs."""
    data = rows(n_rho=4)
    sur = FrontierSurrogate(rewards=REWARDS, warm_start=True).fit(data)
    assert set(sur.start_posteriors_) == {"fresh"}  # nothing to start from yet
    first = sur.log_posterior_
    sur.fit(data)
    assert set(sur.start_posteriors_) == {"fresh", "warm"}
    assert sur.start_posteriors_["warm"] == pytest.approx(first, abs=1e-4)
    assert sur.log_posterior_ == max(sur.start_posteriors_.values())
    sur.fit(rows(n_rho=5))
    assert sur.n_records_ == 20
    cold = FrontierSurrogate(rewards=REWARDS, warm_start=False).fit(data).fit(data)
    assert set(cold.start_posteriors_) == {"fresh"}


def test_a_refit_that_raises_leaves_the_previous_fit_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """The refit replaced the data, domain and reward order before its optimiser ran; when
    that raised, the old model_ sat beside the new data and predicted on another encoding."""
    sur = FrontierSurrogate(rewards=REWARDS).fit(rows(n_rho=4))
    X = sur.encode("small", "prm", np.linspace(0.2, 0.8, 5), 1e15)
    mean, std = sur.predict(X)
    data, domain, n = sur.data_, sur.domain_, sur.n_records_

    def boom(*_: object, **__: object) -> float:
        raise RuntimeError("optimiser failed")

    monkeypatch.setattr(FrontierSurrogate, "_fit_hyperparameters", staticmethod(boom))
    with pytest.raises(RuntimeError, match="optimiser failed"):
        sur.fit(rows(n_rho=6, budgets=(1e15, 1e16)))
    assert sur.data_ is data and sur.domain_ == domain and sur.n_records_ == n
    m2, s2 = sur.predict(X)
    np.testing.assert_allclose(m2, mean)
    np.testing.assert_allclose(s2, std)
    fresh = FrontierSurrogate(rewards=REWARDS)
    with pytest.raises(RuntimeError):
        fresh.fit(rows(n_rho=4))
    assert not any(hasattr(fresh, k) for k in ("data_", "domain_", "rewards_", "model_"))


def test_lookahead_matches_conditioning(fitted: FrontierSurrogate) -> None:
    """The rank-one look-ahead equals refitting-free conditioning on the fantasised outcome."""
    grid = np.linspace(0.2, 0.9, 8)
    Xg = fitted.encode("big", "prm", grid, 1e16)
    Xc = fitted.encode("big", "prm", [0.5], 1e15)
    la = fitted.lookahead_samples(Xc, Xg, n_fantasies=2, n_samples=1024, seed=0)  # (2, 1, S, G)
    mean_c, sd_c = fitted.predict(Xc)
    from botorch.utils.sampling import draw_sobol_normal_samples

    w = draw_sobol_normal_samples(d=1, n=2, seed=1).double()[:, 0].numpy()
    var_y = sd_c[0] ** 2 + fitted.run_noise_variance()
    for f in range(2):
        y = mean_c[0] + np.sqrt(var_y) * w[f]
        cond_mean, cond_sd = fitted.condition_on(Xc, [y]).frontier("big", "prm", 1e16, grid)
        np.testing.assert_allclose(la[f, 0].mean(0), cond_mean, atol=3e-3)
        np.testing.assert_allclose(la[f, 0].std(0), cond_sd, rtol=0.15, atol=1e-3)


def test_pilots_alone_inform_the_target_budget_shape() -> None:
    """With every run at one (pilot) budget the data say nothing about the budget
    lengthscale, so the MAP fit sits at the prior's mode; that mode must be the stated
    one (0.4 unit widths), not e times shorter, or pilots 10x below the target tell the
    target nothing and its frontier comes out flat."""
    import torch

    from surrogate.data import B
    from surrogate.kernel import LENGTHSCALE_PRIOR

    sur = FrontierSurrogate(rewards=REWARDS, budget_range=(1e14, 1e16)).fit(rows(n_rho=8, budgets=(1e15,)))
    shape = sur.model_.covar_module.kernels[1].base_kernel.kernels[0]
    prior = shape.lengthscale_prior
    mode = torch.exp(prior.loc - prior.scale**2)
    assert torch.allclose(mode[2], torch.tensor(LENGTHSCALE_PRIOR[B], dtype=mode.dtype))
    assert float(shape.lengthscale[..., 2]) > 0.3
    # The toy frontier peaks at 0.72 (sparse) at every budget: the target's mean must show it.
    grid = np.linspace(0.15, 0.9, 31)
    mean, _ = sur.frontier("small", "sparse", 1e16, grid)
    assert abs(grid[int(np.argmax(mean))] - 0.72) < 0.1
    assert float(mean.max() - mean.min()) > 0.02


def test_warm_refit_escapes_a_collapsed_shape_term() -> None:
    """A warm start alone stays where the last fit was, and a shape term whose outputscale
    collapsed to ~1e-8 has no gradient left: every frontier would stay flat for good. The
    refit also starts fresh and keeps the better optimum."""
    import torch

    data = rows(budgets=(1e15, 1e16))
    sur = FrontierSurrogate(rewards=REWARDS, budget_range=(1e14, 1e16), warm_start=True).fit(data)
    shape = sur.model_.covar_module.kernels[1]
    healthy = float(shape.outputscale)
    with torch.no_grad():
        shape.raw_outputscale.fill_(-16.0)  # softplus(-16) ~ 1e-7: the collapsed optimum
    sur.fit(data)
    assert float(sur.model_.covar_module.kernels[1].outputscale) > 0.1 * healthy
    grid = np.linspace(0.15, 0.9, 16)
    mean, _ = sur.frontier("small", "sparse", 1e16, grid)
    assert np.ptp(mean) > 0.05 and abs(grid[np.argmax(mean)] - 0.72) < 0.1
    assert math.isfinite(sur.log_posterior_)


def test_reuse_feature_separates_interleaved_branches() -> None:
    """Neighbouring rho values bought with different update passes per batch (mu) lie on
    different branches; with mu as an input the frontier's argmax lands on the better
    branch's peak instead of the average of both."""
    rng = np.random.default_rng(1)
    data = []
    for m in PARAMS:
        for i, rho in enumerate(np.linspace(0.15, 0.9, 16)):
            mu = 1 if i % 2 == 0 else 2  # interleaved, as the compiler's choices are
            y = toy(m, "sparse", rho, 1e16) + (0.02 if mu == 1 else 0.0) + rng.normal(0, 0.003)
            data.append(dict(model=m, model_params=PARAMS[m], reward="sparse", budget=1e16, rho_planned=rho,
                             rho=rho, flops_total=1e16, seed=0, status="ok", native=y, num_iterations=mu))
    grid = np.linspace(0.15, 0.9, 16)
    which = np.where(np.arange(16) % 2 == 0, 1.0, 2.0)
    sur = FrontierSurrogate(rewards=("sparse",), budget_range=(1e15, 1e16),
                            reuse=lambda model, reward, rho, budget: np.interp(rho, grid, which)).fit(data)
    assert sur.data_.X.shape[1] == 5 and set(sur.data_.X[:, 4]) == {0.0, 1.0}  # log2 mu
    mean, _ = sur.frontier("small", "sparse", 1e16, grid)
    # The plug puts every other grid point on the mu = 1 branch: 0.02 higher there.
    assert float(np.mean(mean[which == 1]) - np.mean(mean[which == 2])) > 0.012
    assert which[int(np.argmax(mean))] == 1
    # An explicit reuse overrides the plug: the same rho on the other branch.
    lo = sur.predict(sur.encode("small", "sparse", [grid[8]], 1e16, reuse=[2]))[0][0]
    hi = sur.predict(sur.encode("small", "sparse", [grid[8]], 1e16, reuse=[1]))[0][0]
    assert hi - lo > 0.012


def test_reuse_is_read_from_records_rows_and_plan_json() -> None:
    base = dict(model="small", model_params=PARAMS["small"], reward="sparse", budget=1e15, rho_planned=0.5,
                rho=0.5, flops_total=1e15, seed=0, status="ok", native=0.4)
    assert extract([base], "native")[0].reuse == 1
    assert extract([{**base, "num_iterations": 4}], "native")[0].reuse == 4
    assert extract([{**base, "plan_json": '{"num_iterations": 3}'}], "native")[0].reuse == 3


def test_a_run_copied_twice_is_one_run_not_a_replicate() -> None:
    rs = [r | {"run_id": f"run{i}"} for i, r in enumerate(rows(n_rho=4, seeds=3, noise=0.02))]
    once = group_replicates(extract(rs, "native"), REWARDS)
    twice = group_replicates(extract(rs + rs, "native"), REWARDS)
    assert twice.noise_dof == once.noise_dof == 32
    np.testing.assert_allclose(twice.yvar, once.yvar)  # copies would shrink the noise towards 0


def test_observation_noise_adds_one_runs_noise(fitted: FrontierSurrogate) -> None:
    X = fitted.encode("small", "prm", [0.3, 0.5], 1e15)
    mean, latent = fitted.predict(X)
    mean2, run = fitted.predict(X, observation_noise=True)
    np.testing.assert_allclose(mean, mean2)
    np.testing.assert_allclose(run**2, latent**2 + fitted.run_noise_variance(), rtol=1e-9)


def test_encode_reads_each_rows_budget_for_the_update_passes() -> None:
    seen = []

    def reuse(model: str, reward: str, rho: np.ndarray, budget: float) -> np.ndarray:
        seen.append(budget)
        return np.full(np.shape(rho), 7.0 if budget < 5e15 else 1.0)

    sur = FrontierSurrogate(rewards=REWARDS, reuse=reuse).fit(rows(n_rho=4))
    X = sur.encode("small", "sparse", [0.42, 0.42], [1e15, 1e16])
    np.testing.assert_allclose(2.0 ** X[:, 4], [7.0, 1.0])  # the mu column is log2(mu)


def test_the_fit_does_not_depend_on_the_order_of_the_records() -> None:
    """A resumed race reads its runs from the store in another order than it told them,
    and a report reads them in file order: all must fit the same model (the rounding of a
    permuted sum moved the optimum enough to flip a call's P from 0.95 to 0.85)."""
    import random

    data = rows(n_rho=4)
    shuffled = data[:]
    random.Random(3).shuffle(shuffled)
    a = FrontierSurrogate(rewards=REWARDS).fit(data)
    b = FrontierSurrogate(rewards=REWARDS).fit(shuffled)
    assert a.log_posterior_ == b.log_posterior_
    grid = np.linspace(0.15, 0.9, 16)
    for m in PARAMS:
        np.testing.assert_array_equal(a.frontier(m, "sparse", 1e16, grid)[0], b.frontier(m, "sparse", 1e16, grid)[0])


def test_samples_on_a_fine_grid_do_not_warn_about_the_jitter_they_need(
        fitted: FrontierSurrogate, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fine rho grid's joint covariance is near-singular: the Cholesky adds jitter and
    linear_operator warns, every call. The surrogate handles it, so both samplers stay
    quiet; with the handler taken out, each of them warns, so the condition is real."""
    import warnings
    from contextlib import nullcontext

    import surrogate.model as model

    grid = np.linspace(0.1, 0.95, 121)
    X = fitted.encode("small", "sparse", grid, 1e16)

    def both() -> tuple[np.ndarray, np.ndarray]:
        return (fitted.sample_frontier("small", "sparse", 1e16, grid, n_samples=16),
                fitted.lookahead_samples(X[[30, 90]], X, n_fantasies=2, n_samples=8))

    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*added jitter")
        s, la = both()
    assert s.shape == (16, 121) and np.isfinite(s).all()
    assert la.shape == (2, 2, 8, 121) and np.isfinite(la).all()
    monkeypatch.setattr(model, "_jitter_handled", nullcontext)
    with pytest.warns(Warning, match="added jitter"):
        fitted.sample_frontier("small", "sparse", 1e16, grid, n_samples=16)
    with pytest.warns(Warning, match="added jitter"):
        fitted.lookahead_samples(X[[30, 90]], X, n_fantasies=2, n_samples=8)


def test_replicate_noise_is_each_reward_systems_own() -> None:
    rng = np.random.default_rng(1)
    sd = {"sparse": 0.003, "prm": 0.03}
    recs = [dict(model="small", model_params=PARAMS["small"], reward=r, budget=1e15, rho_planned=rho, rho=rho,
                 flops_total=1e15, seed=s, status="ok", native=toy("small", r, rho, 1e15) + rng.normal(0, sd[r]))
            for r in REWARDS for rho in np.linspace(0.15, 0.9, 6) for s in range(4)]
    sur = FrontierSurrogate(rewards=REWARDS, budget_range=(1e14, 1e16)).fit(recs)
    quiet, loud = sur.run_noise_variance("sparse"), sur.run_noise_variance("prm")
    # Each reward's estimate is shrunk toward the pool (group_replicates), yet stays its own:
    # one median for both gave the sparse runs prm's noise or the reverse.
    assert quiet < loud / 4
    per_run = sur.data_.yvar * sur.data_.counts
    assert quiet == pytest.approx(np.median(per_run[sur.data_.X[:, 1] == REWARDS.index("sparse")]))
    assert sur.noise_source("sparse") == sur.noise_source("prm") == "replicates"
    one_seed = FrontierSurrogate(rewards=REWARDS, budget_range=(1e14, 1e16)).fit([r for r in recs if r["seed"] == 0])
    assert one_seed.noise_source("sparse") == "inferred"  # the fit's guess: the race marks its stake so
    # prm without replicates of its own borrows sparse's: said so, not "replicates".
    mixed = FrontierSurrogate(rewards=REWARDS, budget_range=(1e14, 1e16)).fit(
        [r for r in recs if r["reward"] == "sparse" or r["seed"] == 0])
    assert (mixed.noise_source("sparse"), mixed.noise_source("prm")) == ("replicates", "other replicates")
    X = np.concatenate([sur.encode("small", "sparse", [0.5], 1e15), sur.encode("small", "prm", [0.5], 1e15)])
    _, latent = sur.predict(X)
    _, run = sur.predict(X, observation_noise=True)
    np.testing.assert_allclose(run**2 - latent**2, [quiet, loud], rtol=1e-9)


def test_a_conditioned_copy_holds_the_data_its_model_holds(fitted: FrontierSurrogate) -> None:
    Xc = fitted.encode("small", "sparse", [0.3, 0.7], 1e15)
    cond = fitted.condition_on(Xc, [0.41, 0.43])
    n = len(fitted.data_.y)
    assert len(cond.data_.y) == len(cond.data_.X) == len(cond.data_.counts) == n + 2
    assert len(fitted.data_.y) == n  # the original is untouched
    cv = cond.loo_cv()
    assert np.shape(cv.mean) == (n + 2,)


def test_a_retried_fit_is_seeded_and_leaves_the_global_generator_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """When L-BFGS reports an abnormal stop, fit_gpytorch_mll retries from hyperparameters
    drawn from their priors. Those draws are the fit's own: the same data give the same
    model whatever torch's global generator holds, and the generator is not advanced."""
    from dataclasses import replace

    import botorch.optim.fit as optim_fit
    import torch
    from botorch.optim.core import OptimizationStatus

    real = optim_fit.scipy_minimize
    calls = {"n": 0}

    def first_fails(*args: object, **kwargs: object) -> object:
        res = real(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] % 2 == 1:  # each fit's first attempt: a stop the fallback retries
            res = replace(res, status=OptimizationStatus.FAILURE, message="ABNORMAL: test")
        return res

    monkeypatch.setattr(optim_fit, "scipy_minimize", first_fails)
    data = rows(n_rho=4)
    params = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        state = torch.get_rng_state()
        model = FrontierSurrogate(rewards=REWARDS, max_iter=30).fit(data)
        assert torch.equal(torch.get_rng_state(), state)
        params.append({k: v.detach().clone() for k, v in model.model_.named_parameters()})
    assert calls["n"] == 4  # two attempts per fit: the retry happened
    for name, value in params[0].items():
        assert torch.equal(value, params[1][name]), name


def test_constructor_arguments_are_checked_where_given() -> None:
    # A list of names failed as "dictionary update sequence element #0 has length 10", an
    # inverted budget range was taken, and (0, hi) failed later as "math domain error".
    with pytest.raises(TypeError, match="models: a mapping"):
        FrontierSurrogate(models=["qwen2.5-7b"])  # type: ignore[arg-type]
    for bad in ((1e16, 1e13), (0.0, 1e16), (1e13, float("inf"))):
        with pytest.raises(ValueError, match="budget_range"):
            FrontierSurrogate(budget_range=bad)
    FrontierSurrogate(models={"qwen2.5-7b": 7.6e9}, budget_range=(1e13, 1e16))
