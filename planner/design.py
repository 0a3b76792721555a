"""Initial space-filling designs and feasible compilation of (setting, rho, budget) requests.

With no data the planner cannot aim anywhere, so it spreads ``n`` pilot runs per setting
evenly over the rho range the compiler's levers reach. Settings get shifted copies of
the same stratified design (a Cranley-Patterson rotation by setting index), so that
the GP, which shares strength across settings, sees many distinct rho values overall.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from planner.compiler import (
    RHO_DIGITS,
    CompileOptions,
    achievable_rho_range,
    compile_pilot,
    compile_plan,
)
from planner.errors import InfeasibleError
from planner.frontier import Setting
from planner.schema import RunPlan

__all__ = [
    "ISO_POINTS",
    "ISO_RAISED",
    "SCATTERED",
    "DesignPoint",
    "compile_feasible",
    "initial_design",
    "iso_note",
    "iso_pilot_budget",
    "iso_range_budget",
    "scattered_note",
    "space_filling_rho",
]


@dataclass(frozen=True)
class DesignPoint:
    """One run of a design: a setting's run at update fraction ``rho`` and ``budget`` FLOPs."""
    setting: Setting
    rho: float
    budget: float


def space_filling_rho(lo: float, hi: float, n: int, shift: float = 0.5) -> NDArray[np.float64]:
    """``n`` stratified points ``(n,)`` in [lo, hi]: one per equal-width stratum, at relative
    position ``shift`` in [0, 1) within it (0.5 = stratum centres, a midpoint design)."""
    if n < 1:
        return np.empty(0)
    return lo + (hi - lo) * (np.arange(n) + shift % 1.0) / n


def initial_design(
    settings: Sequence[Setting],
    budget: float,
    n_per_setting: int = 4,
    opts: CompileOptions | None = None,
) -> list[DesignPoint]:
    """A space-filling rho design of ``n_per_setting`` points for each setting at ``budget``.

    The outer 4% of the reachable range is left out at each end: the extreme lever
    settings (one update pass over 64 completions, or 16 passes) are rarely optimal and
    a design point there teaches the GP little about where the maximum is.
    """
    out = []
    k = max(1, len(settings))
    for i, s in enumerate(settings):
        lo, hi = achievable_rho_range(s.model, s.reward, opts)
        pad = 0.04 * (hi - lo)
        shift = 0.5 + (i / k - 0.5) * 0.5  # centres, jittered within the middle of strata
        for r in space_filling_rho(lo + pad, hi - pad, n_per_setting, shift):
            out.append(DesignPoint(s, float(r), float(budget)))
    return out


def compile_feasible(
    setting: Setting,
    rho: float,
    budget: float,
    opts: CompileOptions | None = None,
    target_budget: float | None = None,
) -> tuple[RunPlan | None, str]:
    """Compile a request, clamping to the compiler's nearest feasible rho or budget.

    Returns (plan, note): ``note`` says what was clamped ("" when nothing was); the plan is
    None when no feasible neighbour exists (the caller skips the request). With
    ``target_budget`` a request below it is a pilot that keeps the target plan's mu where
    it can (:func:`planner.compiler.compile_pilot`). Cached: the acquisition compiles the
    same candidate grid every batch.
    """
    tb = None if target_budget is None else float(target_budget)
    return _compile_feasible(Setting(*setting), round(float(rho), RHO_DIGITS), float(budget), opts, tb)


@lru_cache(maxsize=65536)
def _compile_feasible(
    setting: Setting, rho: float, budget: float, opts: CompileOptions | None, target_budget: float | None
) -> tuple[RunPlan | None, str]:
    note = ""
    for _ in range(3):  # at most: clamp rho, then clamp budget
        try:
            if target_budget is not None and budget < target_budget:
                plan = compile_pilot(setting.model, setting.reward, rho, budget, target_budget, opts)
                mu = _target_mu(setting, rho, target_budget, opts)
                if mu is not None and plan.num_iterations != mu:
                    note += (f"mu {plan.num_iterations}, not the target plan's {mu}: no levers with "
                             f"{mu} passes land this budget; ")
            else:
                plan = compile_plan(setting.model, setting.reward, rho, budget, opts)
            return plan, note
        except InfeasibleError as exc:
            if exc.nearest is None:
                return None, str(exc)
            if exc.field == "rho":
                note += f"rho clamped {rho:.3f} -> {exc.nearest:.3f}; "
                rho = float(exc.nearest)
            elif exc.field == "budget":
                if target_budget is not None and budget < target_budget < exc.nearest:
                    # A pilot dearer than the decision it informs is no pilot: skip the request.
                    return None, (f"no pilot of {setting.key} at rho {rho:.3f} below the target budget "
                                  f"{target_budget:.3g}: the nearest feasible budget is {exc.nearest:.3g}")
                moved = "raised" if exc.nearest > budget else "lowered"
                note += f"budget {moved} {budget:.3g} -> {exc.nearest:.3g} (nearest feasible); "
                budget = float(exc.nearest) * 1.001
            else:
                return None, str(exc)
    return None, note + "no feasible plan"


def _target_mu(setting: Setting, rho: float, target_budget: float, opts: CompileOptions | None) -> int | None:
    """The update passes of the target-budget plan at ``rho``; None where the target budget
    buys no plan there (its error is the target's, not the pilot's)."""
    try:
        return compile_plan(setting.model, setting.reward, rho, target_budget, opts).num_iterations
    except InfeasibleError:
        return None


# How a proposal's reason starts its note when its setting's budget was raised (the CLI
# looks for it).
ISO_RAISED = "pilot budget raised"


def iso_note(requested: float, budget: float) -> str:
    """The reason note of a run whose setting's budget was raised from ``requested``."""
    return (f"{ISO_RAISED} {requested:.3g} -> {budget:.3g} for this setting: the smallest at which "
            f"all its runs land one budget; ")


# How a proposal's reason notes that its setting's pilots could not share one budget (the
# CLI looks for it).
SCATTERED = "pilots scattered"


def scattered_note(kept: int, n: int, lo: float, hi: float, target_budget: float) -> str:
    """The reason note of a pilot whose setting has no budget up to ``target_budget`` that
    compiles all ``n`` design points: each of the ``kept`` runs at its own nearest budget."""
    dropped = (f"; {n - kept} of {n} design points {'has' if n - kept == 1 else 'have'} no pilot below the target"
               if kept < n else "")
    return (f"{SCATTERED} over {lo:.3g}-{hi:.3g}: no budget up to the target {target_budget:.3g} lands "
            f"all {n} design points, so each runs at its own nearest feasible budget{dropped}; ")


# Budgets tried above a requested pilot budget: eighth-decade steps up to 100x.
_ISO_STEPS = 10.0 ** (np.arange(17) / 8)


def iso_pilot_budget(
    setting: Setting,
    rhos: Sequence[float] | NDArray[np.float64],
    budget: float,
    opts: CompileOptions | None = None,
    target_budget: float | None = None,
) -> float:
    """The smallest budget >= ``budget`` (eighth-decade steps, at most 100x and not above
    ``target_budget``) at which every rho of ``rhos`` compiles *at* that budget, so that a
    setting's pilots form one IsoFLOP set; ``budget`` itself when none does. Where even the
    dearest of those runs costs more than ``budget`` (a pilot budget far below what any
    run costs), the 100x search starts from that run's nearest feasible budget instead.

    Below a few prompt groups per run the compiler can only land a budget to 2% with some
    levers, and :func:`compile_feasible` moves each infeasible request to its own nearest
    budget (qwen2.5-7b sparse at 1e14: 8.8e13 to 3.0e14 over a 4-point design), which
    scatters the pilots over budgets the surrogate must then tell apart.
    """
    found = _iso_search(setting, rhos, float(budget), opts, target_budget)
    if found is not None:
        return found
    # Far below what these runs can cost (a pilot budget of 1 FLOP): search again from where
    # the dearest of them becomes feasible, rather than scatter the design over budgets.
    start = float(budget)
    for r in rhos:
        plan = compile_feasible(setting, r, start, opts, target_budget)[0]
        if plan is not None and plan.budget > start:
            start = plan.budget
    found = _iso_search(setting, rhos, start, opts, target_budget) if start > budget else None
    return float(budget) if found is None else found


def _iso_search(setting: Setting, rhos: Sequence[float] | NDArray[np.float64], budget: float, opts: CompileOptions | None,
                target_budget: float | None) -> float | None:
    top = float(target_budget) if target_budget is not None else budget * _ISO_STEPS[-1]
    for b in budget * _ISO_STEPS:
        if b > top * (1 + 1e-9):
            break
        plans = [compile_feasible(setting, r, float(b), opts, target_budget)[0] for r in rhos]
        if all(p is not None and abs(p.budget - b) <= 1e-6 * b for p in plans):
            return float(b)
    return None


# rho values a setting's IsoFLOP budget must land when its design is not known up front.
ISO_POINTS = 33


def iso_range_budget(setting: Setting, budget: float, opts: CompileOptions | None = None,
                     ceiling: float | None = None) -> float:
    """:func:`iso_pilot_budget` over :data:`ISO_POINTS` stratified rho values of the whole
    reachable range: the budget for strategies whose rho values are drawn as they go
    (random search, Optuna), so that their runs of a setting stay one IsoFLOP set. Never
    above ``ceiling`` (the decision budget): a run dearer than the decision it informs
    would be scored as if it were at it."""
    lo, hi = achievable_rho_range(setting.model, setting.reward, opts)
    found = iso_pilot_budget(setting, [float(r) for r in space_filling_rho(lo, hi, ISO_POINTS)], budget, opts)
    return found if ceiling is None else min(found, ceiling)
