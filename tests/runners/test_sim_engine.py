"""The sim engine: records, determinism by seed, noise scale, agreement with the vectorised API."""

from __future__ import annotations

import numpy as np
import pytest

from planner.compiler import compile_plan
from planner.errors import InfeasibleError
from planner.proposals import make_proposal
from runners.engines.sim import SimEngine
from runners.sim.levers import lever_table
from runners.sim.simulate import simulate
from runners.sim.world import load_world

M15 = "qwen2.5-1.5b"


def _proposal(reward: str = "sparse", rho: float = 0.7, budget: float = 1e16, model: str = M15):
    return make_proposal(compile_plan(model, reward, rho, budget))


def test_record_is_simulated_and_matches_plan() -> None:
    p = _proposal("prm", 0.45)
    rec = SimEngine().run(p, seed=3)
    assert rec.engine == "sim" and rec.simulated and rec.status == "ok"
    assert rec.card.flops == p.plan.flops
    assert rec.provenance["simulated"] is True
    assert rec.provenance["world_path"].endswith("paper.toml")
    assert len(rec.provenance["world_sha256"]) == 64
    assert rec.card.tokens["reward_scored"] > 0
    assert rec.card.tokens["trained"] == (
        p.plan.total_prompts * p.plan.completions_kept * p.plan.num_iterations
        * (p.plan.prompt_len + p.plan.completion_len)
    )
    m = rec.metrics
    assert m.native_base is not None and m.native is not None


def test_determinism_by_seed() -> None:
    p = _proposal()
    a, b, c = (SimEngine().run(p, s).metrics for s in (1, 1, 2))
    assert a == b
    assert a.native != c.native
    rho, budget = np.full(50, 0.7), np.full(50, 1e16)
    x1 = simulate("paper", M15, "sparse", rho, budget, "pass1", seed=7)
    x2 = simulate("paper", M15, "sparse", rho, budget, "pass1", seed=7)
    x3 = simulate("paper", M15, "sparse", rho, budget, "pass1", seed=8)
    assert np.array_equal(x1, x2) and not np.array_equal(x1, x3)


@pytest.mark.parametrize("target", ["native", "pass1", "judge"])
def test_noise_scale_matches_world(target: str) -> None:
    w = load_world("paper")
    n = 4000
    x = simulate(w, M15, "dense", np.full(n, 0.6), np.full(n, 1e16), target, seed=0)
    truth = simulate(w, M15, "dense", 0.6, 1e16, target)
    sd = w.noise[target]
    assert abs(x.std() - sd) < 0.1 * sd
    assert abs(x.mean() - float(truth)) < 4 * sd / np.sqrt(n)


def test_engine_truth_equals_vectorised_on_the_grid() -> None:
    table = lever_table(M15, "prm")
    engine = SimEngine(truth=True)
    for budget in (1e16, 3e14):  # the small budget exercises the compiler's fallback ranking
        for r in table.grid[::25]:
            try:
                plan = compile_plan(M15, "prm", float(r), budget)
            except InfeasibleError:
                assert np.isnan(simulate("paper", M15, "prm", r, budget))
                continue
            rec = engine.run(make_proposal(plan), seed=0)
            for t in ("native", "pass1", "judge"):
                v = float(simulate("paper", M15, "prm", r, budget, t))
                assert getattr(rec.metrics, t) == pytest.approx(v, rel=1e-12), (r, budget, t)


def test_more_budget_helps_and_worlds_differ() -> None:
    lo, hi = simulate("paper", M15, "sparse", 0.7, np.array([1e15, 1e17]))
    assert hi > lo
    a = SimEngine("paper", truth=True).run(_proposal(), 0).metrics
    b = SimEngine("noisy", truth=False).run(_proposal(), 0).metrics
    assert a != b


def test_out_of_reach_rho_is_infeasible() -> None:
    with pytest.raises(InfeasibleError, match="rho"):
        simulate("paper", M15, "prm", np.array([0.5, 0.99]), 1e16)


def test_one_seed_draws_independently_across_settings_and_targets() -> None:
    rho, budget = np.full(200, 0.6), np.full(200, 1e16)
    draws = [simulate("paper", M15, r, rho, budget, t, seed=0) - simulate("paper", M15, r, rho, budget, t)
             for r, t in (("sparse", "native"), ("prm", "native"), ("sparse", "pass1"))]
    for a, b in ((0, 1), (0, 2)):
        assert abs(np.corrcoef(draws[a], draws[b])[0, 1]) < 0.3  # were identical z-scores


def test_worlds_draw_their_own_noise() -> None:
    # noisy.toml is paper.toml with 4x the noise: with the world out of the noise key its
    # runs were paper's standard-normal draws scaled by 4 (correlation 1).
    rho, budget = np.full(200, 0.6), np.full(200, 1e16)
    z = [(simulate(w, M15, "sparse", rho, budget, seed=0) - simulate(w, M15, "sparse", rho, budget))
         / load_world(w).noise["native"] for w in ("paper", "noisy")]
    assert abs(np.corrcoef(z[0], z[1])[0, 1]) < 0.3
    plan = compile_plan(M15, "sparse", 0.6, 1e16)  # the engine's draws, seed by seed
    runs = [[SimEngine(world=w).metrics(plan, s).native for s in range(60)] for w in ("paper", "noisy")]
    assert abs(np.corrcoef(runs[0], runs[1])[0, 1]) < 0.4


def test_budgets_draw_their_own_noise() -> None:
    # With the budget out of the key a pilot call and a target-budget call with one seed
    # drew the same standard-normal vector (correlation 1).
    rho = np.full(200, 0.6)
    z = [(simulate("paper", M15, "sparse", rho, np.full(200, b), seed=0)
          - simulate("paper", M15, "sparse", rho, np.full(200, b))) for b in (1e15, 1e16)]
    assert abs(np.corrcoef(z[0], z[1])[0, 1]) < 0.3
    again = simulate("paper", M15, "sparse", rho, 1e15, seed=0)  # a scalar budget broadcasts
    assert np.array_equal(again, simulate("paper", M15, "sparse", rho, np.full(200, 1e15), seed=0))


def test_a_saturated_budget_says_its_regime_is_a_tie() -> None:
    from runners.sim.truth import frontier

    assert len(frontier("paper", M15, "sparse", 1e22).tied_regimes) > 1
    assert frontier("paper", M15, "sparse", 1e16).tied_regimes == ("update-heavy",)


def test_a_sim_card_has_the_token_keys_of_a_metered_one() -> None:
    from runners.engines.sim import tokens_of_plan
    from runners.meter import TOKEN_KEYS

    plan = compile_plan("qwen2.5-1.5b", "sparse", 0.8, 1e16)  # mu > 1: old log-probs are recomputed
    tok = tokens_of_plan(plan)
    assert set(tok) == set(TOKEN_KEYS)
    seq = plan.prompt_len + plan.completion_len
    assert plan.num_iterations > 1 and tok["logprob_forward"] == plan.total_prompts * plan.completions_kept * seq
    one = compile_plan("qwen2.5-1.5b", "sparse", 0.3, 1e16)
    assert one.num_iterations == 1 and tokens_of_plan(one)["logprob_forward"] == 0


@pytest.mark.parametrize(("model", "reward"), [(M15, "prm"), ("qwen2.5-3b", "prm"), ("qwen2.5-7b", "sparse")])
def test_no_request_beats_the_truth(model: str, reward: str) -> None:
    """The truth ranges over every plan a request can buy: before it took only the plans
    of a 0.005 grid of requests, and a request at 0.3957 (paper 1.5b prm) ran 0.763976
    where its rho* 0.4603 promised 0.763914, in another regime."""
    from runners.sim.truth import frontier

    f = frontier("paper", model, reward, 1e16)
    engine = SimEngine(truth=True)
    rng = np.random.default_rng(3)
    for rho in [0.3957, *np.round(rng.uniform(0.05, 0.95, 60), 6)]:
        try:
            plan = compile_plan(model, reward, float(rho), 1e16)
        except InfeasibleError:
            continue
        assert engine.run(make_proposal(plan), seed=0).metrics.native <= f.value_star + 1e-12, rho


def test_simulate_takes_every_plan_and_refuses_rho_outside_0_1() -> None:
    table = lever_table(M15, "prm")
    top = float(table.hi)  # the candidate of highest rho: a grid of requests never reached it
    plan = compile_plan(M15, "prm", top, 1e16)
    rec = SimEngine(truth=True).run(make_proposal(plan), seed=0)
    assert float(simulate("paper", M15, "prm", top, 1e16)) == pytest.approx(rec.metrics.native, rel=1e-12)
    for bad in (1.0, 1.02, 0.0, -0.03):
        with pytest.raises(InfeasibleError, match="out of reach"):
            simulate("paper", M15, "prm", bad, 1e16)


def test_seeds_past_32_bits_draw_their_own_noise_and_in_range_ones_keep_theirs() -> None:
    """The seed was masked to 32 bits: 0, 2**32 and 2**64 drew the same noise."""
    import zlib

    from runners.sim.simulate import seed_entropy

    p = _proposal("sparse", 0.7)
    eng = SimEngine()
    draws = {s: eng.run(p, seed=s).metrics.native for s in (0, 2**32, 2**64, 2**32 - 1, -1)}
    assert len(set(draws.values())) == len(draws)
    key = zlib.crc32(b"x")
    assert seed_entropy(5, key) == [5, key]  # the draws of every stored run stay as they were
    assert float(simulate("paper", M15, "sparse", 0.7, 1e16, seed=2**32)) != float(
        simulate("paper", M15, "sparse", 0.7, 1e16, seed=0))


def test_rho_and_budget_that_do_not_broadcast_are_named() -> None:
    """simulate() runs (rho, budget) "broadcast together": arrays that do not broadcast
    failed in levers_at as numpy's 'shape mismatch: objects cannot be broadcast', naming
    neither argument."""
    from planner.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^budget: .*\(5,\).*got shape \(3,\)"):
        simulate("paper", "qwen2.5-1.5b", "sparse", np.linspace(0.2, 0.8, 5), np.full(3, 1e16))
    assert simulate("paper", "qwen2.5-1.5b", "sparse", np.linspace(0.2, 0.8, 5), np.full(5, 1e16)).shape == (5,)


def test_seed_entropy_words_past_32_bits_are_fixed() -> None:
    """Seeds past 32 bits split into 32-bit words plus a sign word (1 negative, 2 not): a
    fixed list, so such a seed replays its draws (a missing list would seed from the OS,
    and two runs of one seed would differ)."""
    from runners.sim.simulate import seed_entropy

    assert seed_entropy(2**32, 7) == [0, 7, 1, 2]
    assert seed_entropy(2**64 + 5, 7) == [5, 7, 0, 1, 2]
    assert seed_entropy(-1, 7) == [1, 7, 1]
    assert seed_entropy(2**32 - 1, 7) == [2**32 - 1, 7]
    assert seed_entropy(0, 7) == [0, 7]
    big = [float(simulate("paper", M15, "sparse", 0.7, 1e16, seed=2**40)) for _ in range(2)]
    assert big[0] == big[1]
    assert SimEngine().run(_proposal(), seed=-5).metrics == SimEngine().run(_proposal(), seed=-5).metrics


@pytest.mark.parametrize("bad", [0.0, -1e16, float("nan"), float("inf")])
def test_a_budget_that_is_not_positive_and_finite_is_named(bad: float) -> None:
    """A budget <= 0 or non-finite is a one-line ConfigError naming the budget, not a NaN
    metric (no prompt bought) or a numpy warning."""
    from planner.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^budget: FLOP budgets must be positive and finite"):
        simulate("paper", M15, "sparse", np.array([0.5, 0.6]), np.array([1e16, bad]))
    # A positive budget too small to buy one prompt group is a run that learns nothing: NaN.
    tiny = simulate("paper", M15, "sparse", np.array([0.5, 0.6]), np.array([1e16, 1.0]))
    assert np.isfinite(tiny[0]) and np.isnan(tiny[1])


def test_noise_is_the_generators_draw_added_and_clipped_to_0_1() -> None:
    """add_noise is ``clip(value + N(0, sd^2), 0, 1)`` with the generator's own draws: a
    subtracted draw has the same distribution but other records for every stored seed."""
    from dataclasses import replace

    from runners.sim.simulate import add_noise

    w = replace(load_world("paper"), noise={"native": 0.3, "pass1": 0.01, "judge": 0.01})
    values = np.tile([0.0, 0.5, 1.0], 200)
    got = add_noise(w, "native", values, np.random.default_rng(11))
    z = np.random.default_rng(11).normal(0.0, 1.0, size=values.shape)
    want = np.minimum(np.maximum(values + 0.3 * z, 0.0), 1.0)
    assert np.allclose(got, want, rtol=0, atol=1e-15)
    assert got.min() == 0.0 and got.max() == 1.0  # clipped exactly at the ends of [0, 1]


def test_levers_at_are_the_compiled_plans_levers_and_shares() -> None:
    """levers_at gives what compile_plan buys, the fallback plans of a small budget included:
    their rho, prompts, (G, K, mu) and the shares of C_total that the truth labels the
    regime by (those were not checked: only the metrics were)."""
    from runners.sim.levers import levers_at

    table = lever_table(M15, "prm")
    fallback = 0
    for budget in (1e16, 3e14):  # 3e14: the table's first-ranked levers miss the budget
        for r in table.grid[::10]:
            try:
                plan = compile_plan(M15, "prm", float(r), budget)
            except InfeasibleError:
                continue
            lv = levers_at(M15, "prm", r, budget)
            f = plan.flops
            assert lv.rho[0] == pytest.approx(plan.rho, rel=1e-12)
            assert (lv.prompts[0], lv.generated[0], lv.kept[0], lv.iterations[0]) == (
                plan.total_prompts, plan.completions_per_prompt, plan.completions_kept, plan.num_iterations)
            assert lv.shares[0] == pytest.approx([f.search / f.total, f.learning / f.total, f.reward / f.total],
                                                 rel=1e-12)
            i = int(table.index(np.array([r]))[0])
            fallback += budget < 1e15 and plan.completions_per_prompt != table.generated[i]
    assert fallback > 0
    # index: the table's entry of any request is the plan compile_plan picks for it
    for r in np.random.default_rng(0).uniform(table.lo, table.hi, 30):
        i = int(table.index(np.array([r]))[0])
        plan = compile_plan(M15, "prm", float(r), 1e30)
        assert (plan.completions_per_prompt, plan.completions_kept, plan.num_iterations) == (
            table.generated[i], table.kept[i], table.iterations[i]), r


def test_a_rho_below_the_compilers_reach_is_out_of_reach() -> None:
    """1.5b sparse's lowest plan is at rho 0.089: a request of 0.02, beyond the compiler's
    0.05 tolerance of it, is out of reach, and the error names the reachable end."""
    lo = float(lever_table(M15, "sparse").lo)
    assert 0.07 < lo < 0.1
    with pytest.raises(InfeasibleError, match="out of reach") as err:
        simulate("paper", M15, "sparse", np.array([0.5, 0.02]), 1e16)
    assert err.value.nearest == pytest.approx(lo)
    with pytest.raises(InfeasibleError):
        compile_plan(M15, "sparse", 0.02, 1e16)  # as the compiler itself says


def test_levers_at_compiles_nothing_where_the_table_lands_the_budget() -> None:
    """docs/sim.md: the vectorised path scales N in numpy and calls compile_plan only where
    that N misses the budget by more than 2% (1e16 buys 1.5b sparse 26 or more prompts up
    to rho 0.9, so rounding N misses it by at most 0.5 / 26 < 2% there: nowhere)."""
    from runners.sim.levers import _compiled, levers_at

    table = lever_table(M15, "sparse")
    _compiled.cache_clear()
    assert levers_at(M15, "sparse", np.linspace(table.lo, 0.9, 500), 1e16).prompts.min() >= 26
    assert _compiled.cache_info().misses == 0
    levers_at(M15, "sparse", table.grid[::20], 3e13)  # tiny: the compiler walks its ranking
    assert _compiled.cache_info().misses > 0


def test_simulate_returns_an_array_with_or_without_noise() -> None:
    """``simulate(...) -> ndarray`` for scalar rho and budget too: the truth was a 0-d array
    but a seeded call a numpy scalar (np.clip of a 0-d sum), which has no ``.shape`` setter,
    no in-place ops, and fails ``isinstance(v, np.ndarray)``."""
    truth = simulate("paper", M15, "sparse", 0.7, 1e16)
    noisy = simulate("paper", M15, "sparse", 0.7, 1e16, seed=3)
    assert isinstance(truth, np.ndarray) and truth.shape == ()
    assert isinstance(noisy, np.ndarray) and noisy.shape == ()
    many = simulate("paper", M15, "sparse", np.array([0.4, 0.7]), 1e16, seed=3)
    assert isinstance(many, np.ndarray) and many.shape == (2,)
