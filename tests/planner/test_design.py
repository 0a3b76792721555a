"""planner.design: stratified designs, clamped compilation and IsoFLOP pilot budgets
(more in test_acquisition.py, which predates this file)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.compiler import achievable_rho_range
from planner.design import (
    ISO_RAISED,
    SCATTERED,
    compile_feasible,
    initial_design,
    iso_note,
    iso_pilot_budget,
    iso_range_budget,
    scattered_note,
    space_filling_rho,
)
from planner.frontier import Setting

SEVEN = Setting("qwen2.5-7b", "sparse")


def test_an_empty_design_is_an_empty_array() -> None:
    assert space_filling_rho(0.1, 0.9, 0).shape == (0,)


def test_initial_design_pads_the_range_and_shifts_each_setting_within_the_strata() -> None:
    """One point per stratum of the range less its outer 4% at each end, at the same spot
    in every stratum, inside the middle half of it, and another spot for each setting."""
    settings = [Setting("qwen2.5-1.5b", "sparse"), Setting("qwen2.5-7b", "prm"), Setting("qwen2.5-3b", "dense")]
    design = initial_design(settings, 1e16, 5)
    assert len(design) == 15 and {d.budget for d in design} == {1e16}
    spots = []
    for s in settings:
        lo, hi = achievable_rho_range(s.model, s.reward)
        a, b = lo + 0.04 * (hi - lo), hi - 0.04 * (hi - lo)
        pos = (np.array([d.rho for d in design if d.setting == s]) - a) / (b - a) * 5  # in strata
        assert np.floor(pos).tolist() == [0, 1, 2, 3, 4]
        frac = pos - np.arange(5)
        assert frac == pytest.approx(np.full(5, frac[0])) and 0.25 <= frac[0] <= 0.75
        spots.append(round(float(frac[0]), 9))
    assert len(set(spots)) == 3


def test_a_request_at_the_target_budget_is_no_pilot() -> None:
    # Only a request below the target is a pilot (which is refused when the nearest budget
    # passes the target); at it, the budget is raised as for any plain request.
    s = Setting("qwen2.5-7b", "prm")
    plan, note = compile_feasible(s, 0.5, 1e12, target_budget=1e12)
    assert plan is not None and plan.budget > 1e12 and "budget raised" in note
    assert (plan, note) == compile_feasible(s, 0.5, 1e12)


def test_iso_budgets_are_eighth_decade_steps_and_never_past_the_target() -> None:
    rhos = [d.rho for d in initial_design([SEVEN], 1e14, 4)]
    b = iso_pilot_budget(SEVEN, rhos, 1e14, target_budget=1e16)
    steps = 8 * np.log10(b / 1e14)
    assert b > 1e14 and steps == pytest.approx(round(steps), abs=1e-9)
    assert iso_pilot_budget(SEVEN, rhos, 1e14) == b  # no target: up to 100x
    # A target below that budget: none up to it lands every point, so the request stands.
    assert b > 2e14 and iso_pilot_budget(SEVEN, rhos, 1e14, target_budget=2e14) == 1e14


def test_a_range_budget_is_an_eighth_decade_step_capped_by_the_ceiling() -> None:
    free = iso_range_budget(SEVEN, 1e14)
    steps = 8 * np.log10(free / 1e14)
    assert free > 1.5e14 and steps == pytest.approx(round(steps), abs=1e-9)
    assert iso_range_budget(SEVEN, 1e14, ceiling=1.5e14) == 1.5e14


def test_notes_start_with_what_the_cli_looks_for() -> None:
    assert iso_note(1e14, 4.2e14).startswith(f"{ISO_RAISED} 1e+14 -> 4.2e+14")
    some = scattered_note(3, 4, 1e14, 3e14, 1e16)
    assert some.startswith(f"{SCATTERED} over 1e+14-3e+14") and "1 of 4 design points has no pilot" in some
    assert "no pilot" not in scattered_note(4, 4, 1e14, 3e14, 1e16)


def test_a_pilot_budget_far_below_any_run_searches_from_the_dearest_runs_budget() -> None:
    rhos = [d.rho for d in initial_design([SEVEN], 1e14, 4)]
    b = iso_pilot_budget(SEVEN, rhos, 1.0, target_budget=1e16)
    assert 1e13 < b <= 1e16
    assert all(compile_feasible(SEVEN, r, b, target_budget=1e16)[0].budget == b for r in rhos)  # type: ignore[union-attr]
