"""Our strategy (planner/strategies/ours.py) through ask/tell: its pilot design, anchors,
validation duels, pending runs and threads (what marks a prediction a guess: test_guess.py)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.errors import ConfigError
from planner.frontier import Setting
from planner.schema import Proposal, RunRecord
from planner.strategies import RaceProblem, make_strategy
from tests.planner.fake_runs import PROBLEM, P, S, run


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
