"""Baseline strategies (grid, random, optuna) through the ask/tell interface."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from planner.errors import ConfigError
from planner.frontier import Setting
from planner.schema import ComputeCard, Metrics, Proposal, RunPlan, RunRecord, run_id_for
from planner.strategies import STRATEGIES, RaceProblem, make_strategy
from planner.strategies.quadratic import quadratic_call

S = Setting("qwen2.5-1.5b", "sparse")
P = Setting("qwen2.5-1.5b", "prm")
PROBLEM = RaceProblem((S, P), budget=1e16, pilot_budget=1e15)


def bump(rho: float, peak: float) -> float:
    return 0.6 - 2.0 * (rho - peak) ** 2


def run(p: Proposal, peak: dict[Setting, float], seed: int = 0) -> RunRecord:
    plan = p.plan
    return RunRecord(
        run_id=run_id_for(p.id, seed), proposal_id=p.id, status="ok", engine="fake", simulated=True,
        model=plan.model, model_params=1.5e9, reward=plan.reward, budget=plan.budget,
        rho_planned=plan.rho, seed=seed, plan=plan, card=ComputeCard(flops=plan.flops, rho=plan.rho),
        metrics=Metrics(native=bump(plan.rho, peak[Setting(plan.model, plan.reward)])),
    )


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
    lo, hi = call.rho_star_ci
    assert (0.5 <= lo <= hi) if call.regime == "update-heavy" else (lo <= hi < 0.5)


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
    """The vertex 0.5005 (update-heavy for a rule reward) was labelled search-heavy, the
    bootstrap refits' majority (P 0.51). The call keeps the majority and, as ours' does,
    takes the fit's best rho within it: rho* and regime agree."""
    call = quadratic_call(S, PROBLEM, [0.178, 0.356, 0.535, 0.713, 0.891], [0.5026, 0.5851, 0.6117, 0.5471, 0.464])
    assert call.regime == max(call.probabilities, key=call.probabilities.__getitem__)
    assert (call.rho_star > 0.5) == (call.regime == "update-heavy")
    assert call.rho_star == pytest.approx(0.5, abs=2e-3)


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
    labels = regime_labels(allocation_shares(S.model, S.reward, g, PROBLEM.opts))
    inside = g[labels == LABELS.index(prior.regime)]
    assert prior.optimum_ci == pytest.approx((np.quantile(g, 0.05), np.quantile(g, 0.95)))
    assert prior.rho_star_ci == pytest.approx((np.quantile(inside, 0.05), np.quantile(inside, 0.95)))
    assert inside.min() <= prior.rho_star_ci[0] < prior.rho_star_ci[1] <= inside.max()
    assert prior.rho_star_ci != prior.optimum_ci  # the regime is a strict part of the range


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
    """The mirror of the case above: the vertex 0.4995 is search-heavy, most refits'
    vertices update-heavy; rho* is the fit's best rho within update-heavy, just above 0.5
    (not the window's far end)."""
    r = [1 - x for x in (0.178, 0.356, 0.535, 0.713, 0.891)]
    call = quadratic_call(S, PROBLEM, r, [0.5026, 0.5851, 0.6117, 0.5471, 0.464])
    assert call.regime == "update-heavy" == max(call.probabilities, key=call.probabilities.__getitem__)
    assert 0.5 < call.rho_star < 0.502


def test_quadratic_call_interval_is_the_central_level_of_the_refits() -> None:
    """optimum_ci is the central ``level`` interval of the bootstrap refits' vertices, whose
    regime shares are the probabilities: with k of n = 200 vertices search-heavy (below
    0.5), a lower tail of (k - 1.5) / 199 ends below 0.5 and one of (k + 0.5) / 199 at or
    above it (numpy's linear quantiles over the sorted vertices). rho_star_ci is the same
    over the vertices in the called regime only."""
    r = np.repeat(np.linspace(0.3, 0.7, 5), 3)
    y = [bump(x, 0.51) + e for x, e in zip(r, [0.04, -0.05, 0.01] * 5, strict=True)]
    base = quadratic_call(S, PROBLEM, r, y, n_boot=200)
    assert base.level == 0.9
    k = round(base.probabilities["search-heavy"] * 200)
    assert 10 < k < 190
    below = quadratic_call(S, PROBLEM, r, y, n_boot=200, level=1 - 2 * (k - 1.5) / 199)
    above = quadratic_call(S, PROBLEM, r, y, n_boot=200, level=1 - 2 * (k + 0.5) / 199)
    assert below.optimum_ci is not None and above.optimum_ci is not None
    assert below.optimum_ci[0] < 0.5 <= above.optimum_ci[0]
    for call in (base, below, above):
        assert call.optimum_ci is not None and call.optimum_ci[0] <= call.optimum_ci[1]
        lo, hi = call.rho_star_ci
        assert lo <= hi and ((lo >= 0.5) if call.regime == "update-heavy" else (hi < 0.5))
    assert below.optimum_ci[1] >= above.optimum_ci[1]  # a larger level, a wider interval


def test_quadratic_call_names_a_non_finite_metric() -> None:
    with pytest.raises(ConfigError, match=r"^y: qwen2.5-1.5b/sparse's runs include a non-finite value \(nan\)"):
        quadratic_call(S, PROBLEM, [0.2, 0.5, 0.8], [0.4, float("nan"), 0.5])


def test_grid_proposes_its_design_once_and_calls_each_setting() -> None:
    g = make_strategy("grid", PROBLEM, n_points=5)
    props = g.ask()
    assert len(props) == 10
    assert {p.budget for p in props} == {1e15}
    peaks = {S: 0.72, P: 0.3}
    g.tell([run(p, peaks) for p in props])
    assert g.ask() == []  # the whole grid is recorded: exhausted
    calls = g.decide()
    assert calls[S].regime == "update-heavy" and abs(calls[S].rho_star - 0.72) < 0.05
    assert calls[P].rho_star < 0.4 and calls[P].regime != "update-heavy"
    assert g.stops_on_confidence is False


def test_grid_retries_a_failed_point_until_the_loop_gives_it_up_and_resumes_a_trimmed_batch() -> None:
    from planner.strategies.base import MAX_ATTEMPTS

    peaks = {S: 0.72, P: 0.3}
    g = make_strategy("grid", PROBLEM, n_points=5)
    first = g.ask(4)  # a batch a cap (or --batch) cut short
    assert len(first) == 4
    bad = run(first[0], peaks).model_copy(update={"status": "failed", "metrics": Metrics(), "error": "oom"})
    g.tell([bad, *(run(p, peaks) for p in first[1:])])
    rest = g.ask()
    assert len(rest) == 10 - 3 and first[0].id in {p.id for p in rest}  # the rest, and the failed point again
    for attempt in range(2, MAX_ATTEMPTS + 1):
        g.tell([bad.model_copy(update={"attempt": attempt})])
    g.tell([run(p, peaks) for p in rest if p.id != first[0].id])
    assert g.ask() == []  # failed twice: given up, as the loop will not run it again


def test_a_resumed_grid_calls_from_its_stored_runs_before_it_asks() -> None:
    """At a cap a resumed race calls without asking: the grid's budget must be its own
    from the start, or every stored run falls outside the IsoFLOP filter."""
    s7 = Setting("qwen2.5-7b", "sparse")
    problem = RaceProblem((s7,), budget=1e16, pilot_budget=3e14)
    first = make_strategy("grid", problem, n_points=5)
    stored = [run(p, {s7: 0.7}) for p in first.ask()]
    first.tell(stored)
    resumed = make_strategy("grid", problem, n_points=5)
    resumed.tell(stored)
    got, want = resumed.decide()[s7], first.decide()[s7]
    assert got.rho_star == pytest.approx(want.rho_star) and got.probabilities == pytest.approx(want.probabilities)
    assert abs(got.rho_star - 0.7) < 0.1  # the stored runs' call, not the flat prior's


@pytest.mark.parametrize("off", [1.06, 0.5, 10.0])
def test_grid_calls_from_its_isoflop_budget_only(off: float) -> None:
    """The paper's protocol is an IsoFLOP fit: runs of the setting at another budget (6%
    off and beyond; a target-budget anchor of another strategy in the same store) do not
    enter the quadratic, however they would pull it; runs within 5% do."""
    from planner.design import compile_feasible
    from planner.proposals import make_proposal

    g = make_strategy("grid", RaceProblem((S,), budget=1e16, pilot_budget=1e15), n_points=5)
    grid = [run(p, {S: 0.72}) for p in g.ask()]
    g.tell(grid)
    alone = g.decide()[S]

    def at(budget: float, rho: float, seed: int) -> RunRecord:
        plan = compile_feasible(S, rho, budget, None)[0]
        assert plan is not None
        rec = run(make_proposal(plan, target="native", reason="elsewhere"), {S: 0.2}, seed)
        return rec.model_copy(update={"metrics": Metrics(native=0.9 - abs(plan.rho - 0.2))})

    far = [at(1e15 * off, r, i) for i, r in enumerate((0.15, 0.2, 0.25, 0.3))]
    g.tell(far)
    call = g.decide()[S]
    assert call.rho_star == pytest.approx(alone.rho_star) and call.probabilities == alone.probabilities
    near = [at(g.budget_for(S) * 1.04, r, 10 + i) for i, r in enumerate((0.15, 0.2, 0.25, 0.3))]
    g.tell(near)
    assert g.decide()[S].rho_star < 0.5  # within 5%: they count, and their higher values win


def test_random_is_seeded_and_round_robin() -> None:
    a, b = make_strategy("random", PROBLEM, seed=3), make_strategy("random", PROBLEM, seed=3)
    pa, pb = a.ask(4), b.ask(4)
    assert [p.id for p in pa] == [p.id for p in pb]
    assert [p.reward for p in pa] == ["sparse", "prm", "sparse", "prm"]


@pytest.mark.parametrize("name", ["optuna-tpe", "optuna-gp"])
def test_optuna_ask_tell_recommends_the_best_trial(name: str) -> None:
    st = make_strategy(name, RaceProblem((S,), budget=1e16, pilot_budget=1e15), seed=0)
    peaks = {S: 0.7}
    told = []
    for _ in range(4):
        props = st.ask(2)
        told += [run(p, peaks) for p in props]
        st.tell(told[-len(props):])
    call = st.decide()[S]
    trials = st._studies[S].trials
    best = max(trials, key=lambda t: t.value)
    # The rho its run metered, as grid and random call from, not the trial's request
    # (the compiler meets it to within 0.05): rho* and regime are the run's.
    ran = max(told, key=lambda r: r.metrics.native)
    assert best.value == ran.metrics.native and ran.card.rho != pytest.approx(best.params["rho"])
    assert call.rho_star == ran.card.rho
    assert call.regime == ("update-heavy" if ran.card.rho > 0.5 else "search-heavy")
    assert sum(call.probabilities.values()) == pytest.approx(1.0)


@pytest.mark.parametrize("name", ["optuna-tpe", "optuna-gp"])
def test_optuna_fails_the_trial_of_a_failed_run_and_answers_it_from_a_good_seed(name: str) -> None:
    from optuna.trial import TrialState

    st = make_strategy(name, RaceProblem((S,), budget=1e16, pilot_budget=1e15), seed=0)
    peaks = {S: 0.7}
    a, b = st.ask(2)
    bad = run(a, peaks).model_copy(update={"status": "failed", "metrics": Metrics(), "error": "oom"})
    # b: seed 0 failed, seed 1 ok, told in that order: the good seed answers the trial.
    b_bad = run(b, peaks).model_copy(update={"status": "failed", "metrics": Metrics(), "error": "oom"})
    st.tell([bad, b_bad, run(b, peaks, seed=1)])
    states = [t.state for t in st._studies[S].trials]
    assert states == [TrialState.FAIL, TrialState.COMPLETE]  # none left RUNNING
    assert not st._waiting


@pytest.mark.parametrize("name", ["optuna-tpe", "optuna-gp"])
def test_a_resumed_optuna_race_learns_the_runs_already_recorded(name: str) -> None:
    """A new process has no trials waiting: the stored runs the caps already count must
    reach the studies as finished trials, or the calls rest on the new runs alone."""
    problem = RaceProblem((S,), budget=1e16, pilot_budget=1e15)
    first = make_strategy(name, problem, seed=0)
    peaks = {S: 0.7}
    stored = [run(p, peaks) for _ in range(3) for p in first.ask(2)]
    first.tell(stored)
    resumed = make_strategy(name, problem, seed=0)
    resumed.tell(stored)
    trials = resumed._studies[S].trials
    assert len(trials) == len({r.proposal_id for r in stored}) and all(t.value is not None for t in trials)
    assert resumed.decide()[S].rho_star == pytest.approx(first.decide()[S].rho_star, abs=1e-6)
    resumed.tell(stored)  # told again (the loop tells every round's records): no new trials
    assert len(resumed._studies[S].trials) == len(trials)


def test_an_optuna_trial_that_repeats_a_recorded_plan_is_answered() -> None:
    """The sampler may ask for a rho whose plan ran already; the loop hands back that
    record, which must answer the new trial too (RUNNING for good otherwise)."""
    from optuna.trial import TrialState

    st = make_strategy("optuna-tpe", RaceProblem((S,), budget=1e16, pilot_budget=1e15), seed=0)
    peaks = {S: 0.7}
    (a,) = st.ask(1)
    rec = run(a, peaks)
    st.tell([rec])
    study = st._studies[S]
    again = study.ask({"rho": st._dist[S]})  # a second trial waiting on the same plan
    st._waiting.setdefault(a.id, []).append((S, again))
    st.tell([rec])
    assert [t.state for t in study.trials] == [TrialState.COMPLETE, TrialState.COMPLETE]


def ran_as(plan: RunPlan) -> tuple[object, ...]:
    """What an engine runs (the sim keys its noise by these and the seed), rho_target aside."""
    return (plan.model, plan.reward, plan.budget, plan.total_prompts, plan.completions_per_prompt,
            plan.completions_kept, plan.num_iterations)


S7 = (Setting("qwen2.5-7b", "sparse"), Setting("qwen2.5-7b", "prm"))


@pytest.mark.parametrize("name", ["random", "optuna-tpe", "optuna-gp"])
def test_baselines_never_propose_a_plan_run_in_flight_or_in_the_batch(name: str) -> None:
    """The compiler meets a band of rho with one plan and the id keeps the request, so one
    plan came back under new ids: a run with the same levers and seed, at full cost, that
    taught nothing."""
    problem = RaceProblem(S7, budget=1e16, pilot_budget=1e14)
    st = make_strategy(name, problem, seed=0)
    peaks = {S7[0]: 0.9, S7[1]: 0.9}  # optima at the upper bound: GPSampler asks for it again and again
    seen: list[tuple[object, ...]] = []
    for _ in range(8):
        props = st.ask(3)
        seen += [ran_as(p.plan) for p in props]
        st.tell([run(p, peaks) for p in props])
    pending = st.ask(2)  # asked, not told: in flight
    seen += [ran_as(p.plan) for p in pending + st.ask(2)]
    assert len(seen) == 28 and len(set(seen)) == len(seen)


def test_plan_key_is_every_lever_of_a_plan_but_the_request() -> None:
    from planner.compiler import compile_plan
    from planner.strategies.base import plan_key

    plan = compile_plan(S.model, S.reward, 0.6, 1e15)
    assert plan_key(plan.model_copy(update={"rho_target": 0.62})) == plan_key(plan)
    derived = {"rho_target", "rho", "flops", "flops_per_prompt"}  # the request, and what the levers give
    bumped = {"old_logprobs": not plan.old_logprobs, "gradient_checkpointing": not plan.gradient_checkpointing,
              "lm_head_positions": "all" if plan.lm_head_positions == "completion" else "completion",
              "lora_targets": ("q_proj",), "model": "qwen2.5-7b", "reward": "prm", "beta": plan.beta + 0.01}
    for f in set(RunPlan.model_fields) - derived:  # a lever added to RunPlan must join the key
        v = bumped.get(f, getattr(plan, f) * 2 if not isinstance(getattr(plan, f), str) else None)
        assert plan_key(plan.model_copy(update={f: v})) != plan_key(plan), f


def _every_new_plan(s: Setting, budget: float) -> set[object]:
    """The plan keys new_plan_rho hands out, one after another, until it says none is left
    (each one new)."""
    from planner.design import compile_feasible
    from planner.strategies.base import new_plan_rho, plan_key

    taken: set[object] = set()
    rng = np.random.default_rng(0)
    while (r := new_plan_rho(s, budget, None, lambda p: plan_key(p) in taken, rng)) is not None:
        key = plan_key(compile_feasible(s, r, budget, None)[0])
        assert key not in taken
        taken.add(key)
    return taken


@pytest.mark.parametrize(("model", "reward", "budget"), [("qwen2.5-1.5b", "prm", 1e16), ("tiny-s", "sparse", 1e11)])
def test_new_plan_rho_reaches_every_plan_a_request_can_and_then_none(model: str, reward: str, budget: float) -> None:
    from planner.compiler import achievable_rho_range
    from planner.design import compile_feasible
    from planner.reach import request_map
    from planner.strategies.base import plan_key

    s = Setting(model, reward)
    lo, hi = achievable_rho_range(model, reward, None)
    rm = request_map(model, reward, None, budget)
    # Every plan some request in [lo, hi] compiles to (one request inside each interval).
    inside = (rm.midpoints > lo) & (rm.midpoints < hi) & (rm.winner >= 0) & (np.diff(rm.edges) > 1e-6)
    reachable = {plan_key(compile_feasible(s, float(r), budget, None)[0]) for r in rm.midpoints[inside]}
    assert _every_new_plan(s, budget) == reachable


def test_new_plan_rho_reaches_the_plans_a_clamped_request_compiles_to() -> None:
    """qwen2.5-7b proxy-prm at 1e15: the requests in [0.074, 0.081] land no plan at the
    budget as asked, and compile_feasible raises the budget for them; uniform draws reach
    three plans there, so new_plan_rho must not call the search space spent before them."""
    from planner.compiler import achievable_rho_range
    from planner.design import compile_feasible
    from planner.strategies.base import plan_key

    s, budget = Setting("qwen2.5-7b", "proxy-prm"), 1e15
    lo, hi = achievable_rho_range(s.model, s.reward, None)
    uniform = {plan_key(p) for r in np.linspace(lo, hi, 20001)
               if (p := compile_feasible(s, float(r), budget, None)[0]) is not None}
    taken = _every_new_plan(s, budget)
    assert uniform <= taken, len(uniform - taken)


def test_new_plan_rho_draws_plans_as_uniform_requests_would() -> None:
    from planner.compiler import achievable_rho_range
    from planner.design import compile_feasible
    from planner.strategies.base import new_plan_rho, plan_key

    s, budget, n = Setting("qwen2.5-7b", "prm"), 1e15, 3000
    lo, hi = achievable_rho_range(s.model, s.reward, None)
    rng = np.random.default_rng(1)
    drawn = [plan_key(compile_feasible(s, new_plan_rho(s, budget, None, lambda p: False, rng), budget, None)[0])
             for _ in range(n)]
    uniform = [plan_key(compile_feasible(s, float(r), budget, None)[0]) for r in rng.uniform(lo, hi, n)]
    keys = set(drawn) | set(uniform)
    tv = 0.5 * sum(abs(drawn.count(k) - uniform.count(k)) / n for k in keys)
    # ~45 plans, 3000 draws each: sampling alone gives a total variation near 0.06; drawing
    # the new plans with equal probability instead gives 0.25.
    assert tv < 0.12


def test_an_optuna_trial_that_repeats_a_measured_plan_is_told_its_value_and_another_asked() -> None:
    """Optuna's usual answer to a duplicate: the trial gets the run's value, and the
    proposal is the next trial's, a plan not run yet."""
    from optuna.trial import TrialState

    st = make_strategy("optuna-tpe", RaceProblem((S,), budget=1e16, pilot_budget=1e15), seed=0)
    (a,) = st.ask(1)
    rec = run(a, {S: 0.7})
    st.tell([rec])
    study = st._studies[S]
    study.enqueue_trial({"rho": a.plan.rho_target + 1e-3})  # the sampler's next ask: a's plan again
    (b,) = st.ask(1)
    assert ran_as(b.plan) != ran_as(a.plan)
    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert [t.value for t in done] == [rec.metrics.native] * 2
    # One still in flight: the repeat waits for that run's value instead.
    study.enqueue_trial({"rho": b.plan.rho_target})
    (c,) = st.ask(1)
    assert ran_as(c.plan) not in {ran_as(a.plan), ran_as(b.plan)}
    st.tell([run(b, {S: 0.7})])
    assert [t.state for t in study.trials].count(TrialState.COMPLETE) == 4 and len(st._waiting) == 1


@pytest.mark.parametrize("name", ["random", "optuna-tpe"])
def test_a_baseline_proposes_nothing_only_when_no_new_plan_is_left(name: str) -> None:
    """optuna-gp ended races "exhausted" long before their cap (a round without a new run
    id ends a race). Every plan of the setting's budget runs once, and only then is the ask
    empty."""
    from planner.compiler import achievable_rho_range
    from planner.design import compile_feasible

    s = S7[1]
    st = make_strategy(name, RaceProblem((s,), budget=1e16, pilot_budget=1e14), seed=0)
    b = st.pilot_budgets()[s]
    plans = {ran_as(p) for r in np.linspace(*achievable_rho_range(s.model, s.reward), 2001)
             if (p := compile_feasible(s, float(r), b)[0]) is not None}
    seen: list[tuple[object, ...]] = []
    for _ in range(len(plans)):  # bounded: a strategy that repeats plans would ask forever
        if not (props := st.ask(2)):
            break
        seen += [ran_as(p.plan) for p in props]
        st.tell([run(p, {s: 0.9}) for p in props])
    assert len(seen) == len(set(seen)) and set(seen) == plans and st.ask(2) == []


def test_grid_skips_a_plan_recorded_under_another_id() -> None:
    """Another strategy's run in the store (another rho_target, the same plan) is the grid's
    point: run again under the grid's id it would only repeat that run."""
    from planner.proposals import make_proposal

    g = make_strategy("grid", PROBLEM, n_points=5)
    first = g.ask()
    other = make_proposal(first[0].plan.model_copy(update={"rho_target": first[0].plan.rho_target + 1e-3}))
    assert other.id != first[0].id
    g.tell([run(other, {S: 0.7, P: 0.3})])
    assert [p.id for p in g.ask()] == [p.id for p in first[1:]]


def test_unknown_strategy_names_the_choices() -> None:
    with pytest.raises(ConfigError, match="optuna-tpe"):
        make_strategy("bogus", PROBLEM)
    assert STRATEGIES == ("ours", "grid", "random", "optuna-tpe", "optuna-gp")


def test_ours_anchors_the_target_budget_after_the_pilot_design() -> None:
    """After its pilot design, ours measures each setting at the target budget at
    ``n_anchor`` stratified rho values before the acquisition takes over."""
    peak = {S: 0.72, P: 0.44}
    st = make_strategy("ours", PROBLEM, 0, n_anchor=3)
    pilots = st.ask()
    assert {p.budget for p in pilots} == {1e15} and len(pilots) == 8
    st.tell([run(p, peak) for p in pilots])
    anchors = st.ask()
    assert len(anchors) == 6 and all(p.budget == 1e16 and "anchor" in p.reason for p in anchors)
    for s in (S, P):
        rhos = sorted(p.rho for p in anchors if (p.model, p.reward) == s)
        assert len(rhos) == 3 and rhos[0] < 0.35 and rhos[-1] > 0.65  # spread over the range
        assert all(p.prediction is not None for p in anchors)
    st.tell([run(p, peak) for p in anchors])
    after = st.ask()
    assert after and not any("anchor" in p.reason for p in after)
    # n_anchor=0: straight from the pilots to the acquisition.
    st0 = make_strategy("ours", PROBLEM, 0, n_anchor=0)
    st0.tell([run(p, peak) for p in pilots])
    assert not any("anchor" in p.reason for p in st0.ask())
    # The default: 2 per setting (measured against 3 in docs/planner.md).
    st2 = make_strategy("ours", PROBLEM, 0)
    st2.tell([run(p, peak) for p in pilots])
    assert sum("anchor" in p.reason for p in st2.ask()) == 2 * 2


def test_ours_keeps_a_half_done_settings_design_when_another_setting_finishes() -> None:
    """A setting's pilots are fixed by its place among all settings: when the other
    setting's pilots are done and one of this one's is missing (failed, or cut by a
    batch), the next ask proposes exactly the missing point, not a shifted design."""
    peak = {S: 0.72, P: 0.44}
    st = make_strategy("ours", PROBLEM, 0)
    pilots = st.ask()
    assert len(pilots) == 8
    missing = [p for p in pilots if (p.model, p.reward) == P][1]
    st.tell([run(p, peak) for p in pilots if p.id != missing.id])
    assert [p.id for p in st.ask()] == [missing.id]
    # and a batch of 3 gets three points of the same design (which three: the cut's test)
    st3 = make_strategy("ours", PROBLEM, 0)
    batch = [p.id for p in st3.ask(3)]
    assert len(batch) == 3 and set(batch) < {p.id for p in pilots}


def test_ours_pilots_of_a_setting_share_one_budget() -> None:
    """Where the pilot budget buys a few prompt groups (7B at 3e14), each design point
    would land a budget of its own; ours raises the setting's pilot budget instead."""
    s7, s15 = Setting("qwen2.5-7b", "sparse"), Setting("qwen2.5-1.5b", "dense")
    st = make_strategy("ours", RaceProblem((s7, s15), budget=1e16, pilot_budget=3e14), 0)
    pilots = st.ask()
    by = {s: {p.budget for p in pilots if (p.model, p.reward) == s} for s in (s7, s15)}
    assert len(by[s7]) == 1 and next(iter(by[s7])) > 3e14
    assert by[s15] == {3e14}
    assert all("pilot budget raised" in p.reason for p in pilots if (p.model, p.reward) == s7)
    assert not any("pilot budget raised" in p.reason for p in pilots if (p.model, p.reward) == s15)


@pytest.mark.parametrize("name", ["grid", "random", "optuna-tpe"])
def test_baselines_keep_each_settings_runs_on_one_budget(name: str) -> None:
    """At a pilot budget of about one 7B prompt group the baselines' runs used to land a
    budget per rho, and the IsoFLOP fit (grid, random) dropped those off its budget."""
    s7, s15 = Setting("qwen2.5-7b", "sparse"), Setting("qwen2.5-1.5b", "dense")
    st = make_strategy(name, RaceProblem((s7, s15), budget=1e16, pilot_budget=3e14), 0)
    props = [p for _ in range(3) for p in st.ask(6 if name != "grid" else None)]
    budgets = {s: {p.budget for p in props if (p.model, p.reward) == s} for s in (s7, s15)}
    assert len(budgets[s7]) == 1 and next(iter(budgets[s7])) > 3e14
    assert budgets[s15] == {3e14}
    if name != "optuna-tpe":  # every run counts in the IsoFLOP fit: its vertex is the peak
        peak = {s7: 0.6, s15: 0.5}
        st.tell([run(p, peak) for p in props])
        assert st.decide()[s7].rho_star == pytest.approx(0.6, abs=0.01)


def test_ours_duel_anchors_aim_at_the_call_and_its_runner_up() -> None:
    """``anchor="duel"``: the first target-budget runs go to the current call's rho* and to
    the best rho of another regime, which then also counts as the call's validation."""
    from planner.frontier import allocation_shares
    from planner.regime import LABELS, regime_labels

    peak = {S: 0.72, P: 0.44}
    st = make_strategy("ours", PROBLEM, 0, n_anchor=2, anchor="duel")
    st.tell([run(p, peak) for p in st.ask()])
    calls = st.decide()
    anchors = st.ask()
    assert len(anchors) == 4 and all(p.budget == 1e16 and "duel" in p.reason for p in anchors)
    for s in (S, P):
        mine = [p for p in anchors if (p.model, p.reward) == s]
        near_star = [p for p in mine if abs(p.rho - calls[s].rho_star) <= 0.05]
        assert near_star, (s, calls[s].rho_star, [p.rho for p in mine])
        labels = regime_labels(allocation_shares(s.model, s.reward, np.array([p.rho for p in mine])))
        assert {LABELS[i] for i in labels} - {calls[s].regime}  # one run in another regime
    st.tell([run(p, peak) for p in anchors])
    assert not any("anchor" in p.reason for p in st.ask())
    with pytest.raises(ConfigError, match="anchor"):
        make_strategy("ours", PROBLEM, 0, anchor="middle")


def test_ours_validates_a_call_whose_rho_star_lies_outside_its_interval() -> None:
    """rho* is held to allocations measured at the target budget; when the samples put
    the called regime's optimum elsewhere (rho* outside rho_star_ci), the call is not
    accepted until a target-budget run tests the posterior mean's best rho there."""
    import dataclasses

    from planner.frontier import allocation_shares, rho_grid
    from planner.regime import LABELS, regime_labels

    peak = {S: 0.72, P: 0.44}
    st = make_strategy("ours", PROBLEM, 0)
    for _ in range(2):  # pilots, then anchors
        st.tell([run(p, peak) for p in st.ask()])
    call = st.decide()[S]
    roles = dict(st._duel(S, call))
    inside = call.rho_star_ci[0] <= call.rho_star <= call.rho_star_ci[1]
    assert ("posterior best" in roles) == (not inside)
    # Move rho* out of its interval: the duel gains a run at the posterior's best rho
    # within the called regime, and the call is not validated until it exists.
    lo, hi = call.rho_star_ci
    outside = dataclasses.replace(call, rho_star=lo - 0.1 if lo - 0.1 > 0.5 else hi + 0.05)
    roles = dict(st._duel(S, outside))
    best = roles["posterior best"]
    grid = rho_grid(S.model, S.reward)
    mine = regime_labels(allocation_shares(S.model, S.reward, grid)) == LABELS.index(call.regime)
    mean, _ = st.surrogate().frontier(S.model, S.reward, PROBLEM.budget, grid)
    assert best == pytest.approx(float(grid[mine][np.argmax(mean[mine])]))
    # The gate: with target-budget runs at rho* and the runner-up (added to the records
    # without a refit, so the duel stays put), the call still waits for the posterior best.
    from planner.compiler import compile_plan
    from planner.proposals import make_proposal

    def at_target(rho: float) -> RunRecord:
        return run(make_proposal(compile_plan(S.model, S.reward, rho, PROBLEM.budget)), peak)

    others = [rho for role, rho in roles.items() if role != "posterior best"]
    assert all(abs(rho - best) > 0.1 for rho in others)  # else one run would cover two roles
    st.records_ = [r for r in st.records_ if (r.model, r.reward) != S or r.budget < PROBLEM.budget / 1.5]
    st.records_.extend(at_target(rho) for rho in others)
    assert not st._validated(S, outside)
    st.records_.append(at_target(best))
    assert st._validated(S, outside)


def test_ours_validation_near_an_end_of_the_range_does_not_step_past_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """With rho* at the top of the range and the plan there unusable (run, or abandoned),
    the search for the nearest untried plan stepped to rho 1.0007: a ConfigError that
    stopped the race, and every resume of it, before any run."""
    import dataclasses

    peak = {S: 0.72, P: 0.44}
    st = make_strategy("ours", PROBLEM, 0)
    for _ in range(2):  # pilots, then anchors
        st.tell([run(p, peak) for p in st.ask()])
    call = dataclasses.replace(st.decide()[S], rho_star=0.99)
    call.extra["needs_validation"] = True
    monkeypatch.setattr(st, "_would_decide", lambda c: True)
    monkeypatch.setattr(st, "_duel", lambda s, c: [("rho*", 0.99)])
    monkeypatch.setattr(st, "_near_target_run", lambda s, rho, tol: False)
    import planner.strategies.ours as ours

    real = ours.compile_feasible
    asked: list[float] = []

    def only_below(s: Setting, rho: float, *a: object, **k: object) -> object:
        asked.append(rho)
        return (None, "") if 0.985 <= rho < 1 else real(s, rho, *a, **k)  # past 1: the real refusal

    monkeypatch.setattr(ours, "compile_feasible", only_below)
    props = st._validation({S: call})
    assert asked == [pytest.approx(0.99), pytest.approx(0.97)]  # 1.01 skipped, not compiled
    assert [round(p.rho, 2) for p in props] == [0.97]


def test_ours_min_batch_fills_a_round_that_holds_only_validation() -> None:
    """With workers to keep busy (``planner race --workers N`` sets ``min_batch``), a round
    whose only proposal is a validation run gets the acquisition's next best picks for the
    same setting; the pilot and anchor rounds do not change."""
    one = RaceProblem((S,), budget=1e16, pilot_budget=1e15)
    peak = {S: 0.72}
    rounds: dict[int, list[list[Proposal]]] = {}
    for mb in (1, 3):
        st = make_strategy("ours", one, 0, min_batch=mb)
        rounds[mb] = []
        for _ in range(3):
            props = st.ask()
            rounds[mb].append(props)
            st.tell([run(p, peak) for p in props])
    assert [[p.id for p in r] for r in rounds[1][:2]] == [[p.id for p in r] for r in rounds[3][:2]]
    only, filled = rounds[1][2], rounds[3][2]
    assert len(only) == 1 and "validation" in only[0].reason  # this world's third round
    assert len(filled) == 3 and filled[0].id == only[0].id
    assert all("acquisition" in p.reason for p in filled[1:])
    assert len({p.id for p in filled}) == 3  # no run proposed twice
    with pytest.raises(ConfigError, match="min_batch"):
        make_strategy("ours", one, 0, min_batch=0)


def test_ours_does_not_propose_or_condition_on_a_pending_validation_run_twice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The round that holds only a validation run (as above), asked again with that run
    pending: it is not proposed again, and the acquisition conditions on it once."""
    import planner.strategies.ours as ours_mod

    one = RaceProblem((S,), budget=1e16, pilot_budget=1e15)
    peak = {S: 0.72}
    st = make_strategy("ours", one, 0, min_batch=3)
    for _ in range(2):
        st.tell([run(p, peak) for p in st.ask()])
    check = st.ask()[0]
    assert "validation" in check.reason
    seen: list[list] = []
    real = ours_mod.select_batch

    def spy(*args, **kw):  # type: ignore[no-untyped-def]
        seen.append(list(kw["pending"]))
        return real(*args, **kw)

    monkeypatch.setattr(ours_mod, "select_batch", spy)
    again = st.ask(pending=[check])
    assert check.id not in {p.id for p in again} and again
    assert [round(x[1], 6) for x in seen[-1]] == [round(check.plan.rho, 6)]


@pytest.mark.parametrize("name", ["random", "optuna-tpe", "grid"])
def test_baselines_never_run_above_the_decision_budget(name: str) -> None:
    """At 5e14 a 7b run lands every rho only at 6.7e14: the IsoFLOP raise took the baselines'
    runs 33% above the budget their calls are scored at (ours caps its pilots there)."""
    from planner.design import iso_range_budget

    s = Setting("qwen2.5-7b", "sparse")
    one = RaceProblem((s,), budget=5e14, pilot_budget=5e12)
    assert iso_range_budget(s, 5e14) > 6e14
    st = make_strategy(name, one, 0) if name == "grid" else make_strategy(name, one, 0, budget=5e14)
    props = st.ask(4)
    assert props and all(p.budget <= one.budget for p in props)


def test_ours_with_only_its_validation_pending_proposes_nothing_new() -> None:
    """The validation round in flight decides the calls: with min_batch 1 (suggest) the
    next round waits for it, as the initial design and the anchors do, rather than
    proposing an acquisition batch over settings about to be decided."""
    one = RaceProblem((S,), budget=1e16, pilot_budget=1e15)
    peak = {S: 0.72}
    st = make_strategy("ours", one, 0)
    for _ in range(2):
        st.tell([run(p, peak) for p in st.ask()])
    (check,) = st.ask()
    assert "validation" in check.reason
    assert st.ask(pending=[check]) == []


def test_runs_at_a_much_larger_budget_are_no_anchors_of_a_smaller_decision() -> None:
    """A race at 1e15 in a store that holds a 1e16 race: the 10x dearer runs measured another
    frontier, so they neither stand in for its target-budget anchors nor check its calls
    (they made a race call sparse confident with no run at 1e15)."""
    from planner.frontier import at_budget

    peak = {S: 0.72, P: 0.44}
    big = make_strategy("ours", RaceProblem((S, P), budget=1e16, pilot_budget=1e14), 0)
    pilots = big.ask()
    big.tell([run(p, peak) for p in pilots])
    dear = big.ask()  # the 1e16 race's anchors
    assert dear and all(p.budget == 1e16 for p in dear)
    small = make_strategy("ours", RaceProblem((S, P), budget=1e15, pilot_budget=1e14), 0)
    small.tell([run(p, peak) for p in [*pilots, *dear]])
    assert small._target_runs(S) == 0 and not small._near_target_run(S, dear[0].rho, 1.0)
    assert any(at_budget(p.budget, 1e15) for p in small.ask())  # it anchors its own budget
    assert not at_budget(1e16, 1e15) and at_budget(1.4e15, 1e15) and at_budget(0.7e15, 1e15)


def test_ours_fits_and_calls_on_one_thread_as_the_report_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """The report refits under one thread; the race's fits and calls must too, or the two
    disagree on the same runs (and a call depends on the machine's core count)."""
    import torch

    from surrogate import FrontierSurrogate

    seen: list[tuple[str, int]] = []
    for name in ("fit", "sample_frontier"):
        orig = getattr(FrontierSurrogate, name)

        def spy(self: object, *a: object, _orig: object = orig, _name: str = name, **k: object) -> object:
            seen.append((_name, torch.get_num_threads()))
            return _orig(self, *a, **k)  # type: ignore[operator]

        monkeypatch.setattr(FrontierSurrogate, name, spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        st = make_strategy("ours", PROBLEM, 0)
        st.tell([run(p, {S: 0.72, P: 0.44}) for p in st.ask()])
        st.decide()
        assert st.ask() and torch.get_num_threads() == 2  # restored after
    finally:
        torch.set_num_threads(before)
    assert {n for n, _ in seen} == {"fit", "sample_frontier"} and {t for _, t in seen} == {1}


def test_a_race_problem_checks_what_the_cli_used_to_check_alone() -> None:
    """Benchmarks and scripts build RaceProblem directly: the checks live there."""
    with pytest.raises(ConfigError, match="reward model, not a policy"):
        RaceProblem((Setting("qwen2.5-math-prm-7b", "sparse"),), budget=1e16, pilot_budget=1e14)
    with pytest.raises(ConfigError, match=r"budget: 1e\+05 FLOPs buys no qwen2.5-1.5b/sparse run"):
        RaceProblem((S,), budget=1e5, pilot_budget=1e3)
    with pytest.raises(ConfigError, match=r"indifference: must lie in \[0, 1\)"):
        RaceProblem((S,), budget=1e16, pilot_budget=1e14, indifference=2.0)
    with pytest.raises(ConfigError, match="reward"):
        RaceProblem((Setting("qwen2.5-1.5b", "nope"),), budget=1e16, pilot_budget=1e14)


def test_a_target_request_the_compiler_raised_still_counts_as_at_the_target() -> None:
    """At 1e14 a 1.5b/prm request at rho 0.018 compiles only at 2.2e14, past the 1.5x band:
    that anchor or duel run is the target's all the same, or the call could never be
    checked (the race would run on to a cap); a run 10x dearer is not."""
    from planner.compiler import compile_plan
    from planner.design import compile_feasible
    from planner.proposals import make_proposal

    problem = RaceProblem((P,), budget=1e14, pilot_budget=1e12)
    st = make_strategy("ours", problem, 0)
    raised, _ = compile_feasible(P, 0.018, 1e14, None)
    assert raised is not None and raised.budget > 1.5e14
    dear = compile_plan(P.model, P.reward, 0.3, 1e15)
    st.tell([run(make_proposal(raised), {P: 0.4}), run(make_proposal(dear), {P: 0.4})])
    assert st._target_runs(P) == 1
    assert st._near_target_run(P, raised.rho, 0.01) and not st._near_target_run(P, dear.rho, 0.01)


def test_a_problem_takes_plain_pairs_and_numpy_numbers() -> None:
    p = RaceProblem((("qwen2.5-1.5b", "prm"),), budget=np.float32(1e16), pilot_budget=np.float64(1e15))
    assert p.settings == (Setting("qwen2.5-1.5b", "prm"),) and isinstance(p.budget, float)
    with pytest.raises(ConfigError, match=r"^settings: "):
        RaceProblem(("qwen2.5-1.5b",), budget=1e16, pilot_budget=1e15)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_ask_refuses_a_batch_below_one(name: str) -> None:
    p = RaceProblem((Setting("qwen2.5-1.5b", "prm"),), budget=1e16, pilot_budget=1e15)
    strat = make_strategy(name, p, seed=0)
    for n in (0, -1):  # -1 sliced the batch from its end and returned all but one
        with pytest.raises(ConfigError, match=r"^n: "):
            strat.ask(n)


def test_a_problem_takes_a_generator_of_settings_and_refuses_an_empty_one() -> None:
    # The checks spent a generator before it was stored: settings () slipped past them.
    p = RaceProblem(((m, "prm") for m in ("qwen2.5-1.5b", "qwen2.5-7b")), budget=1e16, pilot_budget=1e15)
    assert [s.model for s in p.settings] == ["qwen2.5-1.5b", "qwen2.5-7b"]
    with pytest.raises(ConfigError, match=r"^settings: no "):
        RaceProblem((s for s in ()), budget=1e16, pilot_budget=1e15)
    from planner.strategies.ours import RaceStrategy

    with pytest.raises(ConfigError, match=r"^batch_size: "):
        RaceStrategy(p, 0, batch_size=0)


@pytest.mark.parametrize("name", ["grid", "random", "optuna-tpe"])
@pytest.mark.parametrize("at", ["pilot", "target"])
def test_a_baseline_call_from_runs_at_another_budget_is_open_however_sure(name: str, at: str) -> None:
    """The grid protocol calls from pilots: nothing has checked the call at the budget it is
    about, so its summary must not read "decided" (ours holds such calls open the same way)."""
    from planner.strategies import decision_state

    budget = 1e15 if at == "pilot" else 1e16
    st = make_strategy(name, RaceProblem((S,), budget=1e16, pilot_budget=1e15), seed=0, budget=budget)
    peaks = {S: 0.72}
    for _ in range(6):
        props = st.ask(3)
        if not props:
            break
        st.tell([run(p, peaks) for p in props])
    call = st.decide()[S]
    assert call.confidence >= PROBLEM.confidence  # an exact parabola: sure of its regime
    assert decision_state(call, PROBLEM) == ("open" if at == "pilot" else "confident")


def test_ours_keeps_linear_operators_jitter_note_off_the_races_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """Predictions and the acquisition's posteriors reach the jitter note too; its two lines
    tore through a race's output. Other warnings still pass."""
    import warnings

    import planner.strategies.ours as ours

    real = ours.classify_setting

    def noisy(*a, **k):  # type: ignore[no-untyped-def]
        warnings.warn("A not p.d., added jitter of 1.0e-08 to the diagonal", RuntimeWarning, stacklevel=1)
        return real(*a, **k)

    monkeypatch.setattr(ours, "classify_setting", noisy)
    st = make_strategy("ours", RaceProblem((S,), budget=1e16, pilot_budget=1e15), seed=0)
    st.tell([run(p, {S: 0.7}) for p in st.ask()])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        st.decide()
    assert not [w for w in caught if "added jitter" in str(w.message)]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6])
def test_ours_cut_of_a_phase_takes_every_setting_in_turn_spread_over_rho(n: int) -> None:
    """``ask(n)`` below a phase's size: ``--n 4`` of two settings' initial designs gave all
    four to the first setting, at its lowest rho values."""
    settings = [Setting("qwen2.5-1.5b", "sparse"), Setting("qwen2.5-1.5b", "prm")]
    st = make_strategy("ours", RaceProblem(settings, budget=1e16, pilot_budget=1e15), 0)
    whole = st.ask()
    cut = st.ask(n)
    assert len(whole) == 8 and len(cut) == n
    assert [x.id for x in cut] == [x.id for x in whole if x in cut]  # the phase's order kept
    per = {s: sorted(x.rho for x in cut if Setting(x.model, x.reward) == s) for s in settings}
    assert sorted(len(v) for v in per.values()) == [n // 2, n - n // 2]
    for s, rhos in per.items():
        mine = sorted(x.rho for x in whole if Setting(x.model, x.reward) == s)
        if len(rhos) >= 2:  # the setting's range, ends first
            assert (rhos[0], rhos[-1]) == (mine[0], mine[-1])


def _signature(fn: Callable[..., object]) -> list[tuple[str, object, object]]:
    import inspect

    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("name", STRATEGIES)
def test_every_strategy_satisfies_the_strategy_protocol(name: str) -> None:
    """The contract the loop drives (``planner.strategies.base.Strategy``): the attributes
    it reads and ask/tell/decide with the Protocol's parameters and defaults (more only
    with defaults), so a call written against the Protocol works on every strategy
    ``make_strategy`` builds."""
    import inspect

    from planner.strategies.base import Strategy

    strategy = make_strategy(name, PROBLEM, seed=0)
    assert isinstance(strategy, Strategy)
    assert strategy.name == name and strategy.problem is PROBLEM
    assert isinstance(strategy.stops_on_confidence, bool)
    for method in ("ask", "tell", "decide"):
        mine, theirs = _signature(getattr(strategy, method)), _signature(getattr(Strategy, method))[1:]
        assert mine[:len(theirs)] == theirs, method
        assert all(default is not inspect.Parameter.empty for _, _, default in mine[len(theirs):]), method  # extras optional
    assert set(strategy.decide()) == set(PROBLEM.settings)
