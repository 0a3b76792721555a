"""Baseline strategies (grid, random, optuna) through the ask/tell interface."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from planner.errors import ConfigError
from planner.frontier import Setting
from planner.schema import Metrics, Proposal, RunPlan, RunRecord
from planner.strategies import STRATEGIES, RaceProblem, make_strategy
from tests.planner.fake_runs import PROBLEM, P, S, run


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


def test_a_rotation_carries_its_turn_across_batches_and_a_setting_without_a_plan_adds_nothing() -> None:
    from planner.strategies.base import Rotation

    a, b, c = Setting("qwen2.5-1.5b", "sparse"), Setting("qwen2.5-3b", "sparse"), Setting("qwen2.5-7b", "sparse")
    prop = {s: make_strategy("random", RaceProblem((s,), budget=1e16, pilot_budget=1e15), 0).ask(1)[0]
            for s in (a, b, c)}
    turns = Rotation((a, b, c))
    asked: list[Setting] = []

    def new(s: Setting) -> Proposal | None:
        asked.append(s)
        return None if s == b else prop[s]

    assert turns.batch(2, new) == [prop[a]]  # b's turn is used though it had nothing
    assert turns.batch(None, new) == [prop[c], prop[a]]  # one turn each, starting where it left off
    assert asked == [a, b, c, a, b]
    with pytest.raises(ConfigError, match="n: proposals per batch"):
        turns.batch(0, new)
