"""BudgetGuard's round logic on a scripted meter: where it stops, and how many groups it
lets a round have. (Real trainers under the guard: tests/runners/test_meter.py.)"""

from __future__ import annotations

from types import SimpleNamespace

from runners.meter import BudgetGuard


class Meter:
    total = 0.0


def _state() -> tuple[SimpleNamespace, SimpleNamespace]:
    return SimpleNamespace(global_step=0), SimpleNamespace(should_training_stop=False)


def test_a_stock_trainers_round_is_finished_once_started() -> None:
    # mu = 2: a group costs 0.3 search + 2 x 0.35 learning. After 9 groups 0.6 is left,
    # over half a group, so the guard runs a 10th round; it must not cut it after one pass.
    m = Meter()
    g = BudgetGuard(m, 9.6, steps_per_round=2, groups_per_round=1, group_cost=1.0, partial_rounds=False)
    st, ctl = _state()
    g.on_train_begin(None, st, ctl)
    while not ctl.should_training_stop and st.global_step < 40:
        m.total += 0.65 if st.global_step % 2 == 0 else 0.35
        st.global_step += 1
        g.on_step_end(None, st, ctl)
    assert st.global_step % 2 == 0 and st.global_step == 20 and m.total == 10.0


def test_a_round_far_costlier_than_estimated_is_still_stopped_mid_way() -> None:
    m = Meter()
    g = BudgetGuard(m, 9.6, steps_per_round=2, groups_per_round=1, group_cost=1.0, partial_rounds=False)
    st, ctl = _state()
    # Rounds so far cost 1.0 a group (the guard learns that from the last one, 8 -> 9).
    m.total, st.global_step = 8.0, 16
    g.on_train_begin(None, st, ctl)
    m.total, st.global_step = 9.0, 18
    g.on_step_end(None, st, ctl)  # boundary: 0.6 left, over half a group: the round runs
    assert not ctl.should_training_stop and g.group_cost() == 1.0
    m.total, st.global_step = 12.0, 19  # its first pass alone cost 3 groups
    g.on_step_end(None, st, ctl)
    assert ctl.should_training_stop and g.stop_reason == "budget"


def test_rounds_that_must_run_in_multiples_stop_when_a_multiple_is_not_affordable() -> None:
    # Micro-batches make the trainer run rounds of a multiple of 2 groups. With 2.6 groups'
    # worth left after two rounds of 4, a round of 2 fits; after it 0.6 is left: a round
    # would have to be 2 groups (1.4 over budget), so the guard stops instead.
    m = Meter()
    g = BudgetGuard(m, 10.6, steps_per_round=1, groups_per_round=4, group_cost=1.0, partial_rounds=True)
    st, ctl = _state()
    g.on_train_begin(None, st, ctl)
    ran = []
    while not ctl.should_training_stop and len(ran) < 10:
        n = g.groups_for_round(4, 2)
        ran.append(max(n, 2))  # RaceGRPOTrainer: inputs[: max(n, multiple) * G]
        m.total += ran[-1] * 1.0
        st.global_step += 1
        g.on_step_end(None, st, ctl)
    assert ran == [4, 4, 2] and g.rounds == ran and m.total <= 10.6


def test_round_ends_are_read_off_grpo_args() -> None:
    """A GRPO round is spg x mu micro-batches and a step GA of them: a step end is a round
    end every lcm(GA, spg x mu) / GA steps."""
    from runners.meter import round_steps

    def args(ga: int, spg: int | None, mu: int) -> SimpleNamespace:
        return SimpleNamespace(gradient_accumulation_steps=ga, steps_per_generation=spg, num_iterations=mu)

    assert round_steps(args(4, None, 2)) == 2  # TRL's default spg = GA: mu steps
    assert round_steps(args(2, 4, 2)) == 4  # the 7B example recipe: 4 steps per round
    assert round_steps(args(4, 2, 1)) == 1  # two rounds per step: every step ends one
    assert round_steps(args(4, 6, 1)) == 3  # 1.5 steps per round: every third step ends one
    assert round_steps(SimpleNamespace(gradient_accumulation_steps=8)) == 1  # no GRPO fields


def test_a_bad_budget_is_refused_when_the_callback_is_built() -> None:
    """``FlopMeterCallback.attach(trainer, budget=...)`` checked the budget only when
    ``train()`` began (a ValueError from inside the training loop), and a string budget
    failed there as a bare ``TypeError: must be real number, not str``."""
    import pytest

    from runners.meter import FlopMeterCallback

    for bad in ("1e17", float("nan"), -1.0, 0, True, float("inf")):
        with pytest.raises(ValueError, match=r"^budget: must be a positive finite number of FLOPs"):
            FlopMeterCallback(budget=bad)
        with pytest.raises(ValueError, match=r"^budget: "):
            BudgetGuard(Meter(), bad)  # type: ignore[arg-type]
    assert FlopMeterCallback(budget=1e17).budget == 1e17
    assert FlopMeterCallback().budget is None


def test_the_cost_of_a_group_is_the_mean_of_the_last_three_rounds() -> None:
    m = Meter()
    g = BudgetGuard(m, 100.0, groups_per_round=2, group_cost=1.0)
    st, ctl = _state()
    g.on_train_begin(None, st, ctl)
    assert g.group_cost() == 1.0  # the estimate, before any round ran
    for per_group in (1.0, 2.0, 3.0, 4.0):
        m.total += 2 * per_group
        st.global_step += 1
        g.on_step_end(None, st, ctl)
    assert g.group_cost() == 3.0 and not ctl.should_training_stop


def test_no_budget_left_buys_no_round_whatever_the_estimate() -> None:
    for cost in (None, 1.0):
        for partial in (False, True):
            m = Meter()
            m.total = 10.0
            g = BudgetGuard(m, 10.0, group_cost=cost, partial_rounds=partial)
            assert g.groups_for_round(4) == 0 and g.rounds == [], (cost, partial)


def test_without_an_estimate_a_round_gets_what_it_asks() -> None:
    g = BudgetGuard(Meter(), 10.0)
    assert g.groups_for_round(4) == 4 and g.groups_for_round(1) == 1 and g.rounds == [4, 1]
    # A zero estimate is no estimate (not a division by zero).
    assert BudgetGuard(Meter(), 10.0, group_cost=0.0, partial_rounds=True).groups_for_round(4) == 4


def test_a_stock_trainer_runs_a_whole_round_if_half_of_it_fits() -> None:
    # All or nothing by default: 2.5 groups' worth left runs a round of 4 (the total lands
    # 1.5 past the budget, closer than stopping 2.5 short); 1.9 left does not.
    m = Meter()
    m.total = 7.5
    assert BudgetGuard(m, 10.0, group_cost=1.0).groups_for_round(4) == 4
    m.total = 8.1
    assert BudgetGuard(m, 10.0, group_cost=1.0).groups_for_round(4) == 0
    m.total = 4.8  # shrinkable rounds get the nearest whole number of groups instead: 5.2 / 2
    assert BudgetGuard(m, 10.0, group_cost=2.0, partial_rounds=True).groups_for_round(4) == 3


def test_partial_rounds_stop_at_the_step_that_crosses_the_budget() -> None:
    m = Meter()
    g = BudgetGuard(m, 10.0, steps_per_round=2, groups_per_round=2, group_cost=1.0, partial_rounds=True)
    st, ctl = _state()
    m.total = 6.0
    g.on_train_begin(None, st, ctl)
    m.total, st.global_step = 8.0, 2
    g.on_step_end(None, st, ctl)  # a round boundary, 1.0 a group, 2 left: the next round runs
    assert not ctl.should_training_stop
    m.total, st.global_step = 10.1, 3  # mid-round, just past the budget
    g.on_step_end(None, st, ctl)
    assert ctl.should_training_stop and g.stop_reason == "budget"


def test_without_partial_rounds_a_round_may_run_half_a_round_past_the_budget() -> None:
    def check(groups_per_round: int | None, within: float, past: float) -> None:
        m = Meter()
        g = BudgetGuard(m, 10.0, steps_per_round=2, groups_per_round=groups_per_round, group_cost=1.0)
        st, ctl = _state()
        g.on_train_begin(None, st, ctl)
        m.total, st.global_step = within, 1
        g.on_step_end(None, st, ctl)
        assert not ctl.should_training_stop
        m.total, st.global_step = past, 3
        g.on_step_end(None, st, ctl)
        assert ctl.should_training_stop

    # No groups_per_round: a round is one group; at 1.0 a group the ceiling is 10.5.
    check(None, 10.3, 10.6)
    # Rounds of 2 groups may run a group past it.
    check(2, 10.8, 11.1)
