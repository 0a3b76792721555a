"""Baselines without a surrogate: the paper's IsoFLOP ``grid`` and uniform ``random`` search.

Both call the regime with the paper's local quadratic fit (:mod:`planner.strategies.quadratic`)
on the runs at their own (pilot) budget, and run until their design is exhausted (grid) or
a cap is hit (random): they have no posterior to stop on.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from planner.design import (
    compile_feasible,
    iso_note,
    iso_pilot_budget,
    iso_range_budget,
    space_filling_rho,
)
from planner.frontier import Setting
from planner.proposals import make_proposal
from planner.regime import RegimeCall
from planner.schema import Proposal, RunRecord
from planner.strategies.base import (
    FailedRuns,
    PlanKey,
    PlanLedger,
    RaceProblem,
    Rotation,
    check_batch,
    mark_unchecked,
    new_plan_rho,
    plan_key,
    relevant_records,
    target_value,
)
from planner.strategies.quadratic import quadratic_call

__all__ = ["GridStrategy", "RandomStrategy"]


class _PilotBaseline:
    stops_on_confidence = False
    name = "baseline"

    def __init__(self, problem: RaceProblem, seed: int = 0, *, budget: float | None = None) -> None:
        self.problem = problem
        self.seed = seed
        self.budget = float(budget or problem.pilot_budget)
        self.records_: list[RunRecord] = []
        self._ids: set[str] = set()
        self._budgets: dict[Setting, float] = {}

    def budget_for(self, s: Setting) -> float:
        """The setting's IsoFLOP budget: ``budget``, raised where a run there is so few
        prompt groups that not every rho lands it (:func:`planner.design.iso_range_budget`,
        unless a design set it); otherwise the pilots would scatter over budgets and the
        IsoFLOP fit would drop them."""
        if s not in self._budgets:
            self._budgets[s] = iso_range_budget(s, self.budget, self.problem.opts, ceiling=self.problem.budget)
        return self._budgets[s]

    def pilot_budgets(self) -> dict[Setting, float]:
        """Each setting's budget (:meth:`budget_for`): where this strategy runs, and the only
        runs its IsoFLOP call rests on (a resume with another --pilot-budget runs there anew)."""
        return {s: self.budget_for(s) for s in self.problem.settings}

    def tell(self, records: Sequence[RunRecord]) -> None:
        for r in relevant_records(self.problem, records):
            if r.run_id not in self._ids:
                self._ids.add(r.run_id)
                self.records_.append(r)

    def decide(self) -> dict[Setting, RegimeCall]:
        out = {}
        for s in self.problem.settings:
            # Only runs at this strategy's budget: the protocol is an IsoFLOP fit.
            b = self.budget_for(s)
            rs = [r for r in self.records_ if Setting(r.model, r.reward) == s and abs(r.budget - b) <= 0.05 * b]
            out[s] = quadratic_call(
                s, self.problem, [r.card.rho for r in rs],
                [target_value(r, self.problem.target) for r in rs], seed=self.seed,
            )
            mark_unchecked(out[s], b, self.problem)
        return out

    def _proposal(self, s: Setting, rho: float, reason: str) -> Proposal | None:
        b = self.budget_for(s)
        plan, note = compile_feasible(s, rho, b, self.problem.opts)
        if plan is None:
            return None
        if b > self.budget:
            note = iso_note(self.budget, b) + note
        return make_proposal(plan, target=self.problem.target,
                             reason=reason + (f"; {note.strip('; ')}" if note else ""))


class GridStrategy(_PilotBaseline):
    """The paper's RACE protocol: ``n_points`` evenly spread rho values per setting at one
    pilot budget (all proposed in the first batch), then a local quadratic fit.

    ``ask`` returns the grid points still without a record, so a failed run is tried
    again (until the loop gives it up, :class:`~planner.strategies.base.FailedRuns`), a
    batch a cap trimmed is finished after a resume, and the race ends "exhausted" only
    when the whole grid is recorded or given up."""

    name = "grid"

    def __init__(self, problem: RaceProblem, seed: int = 0, *, n_points: int = 5,
                 budget: float | None = None) -> None:
        from planner.compiler import achievable_rho_range

        super().__init__(problem, seed, budget=budget)
        self.n_points = n_points
        self._failed = FailedRuns(problem)
        self._rhos: dict[Setting, list[float]] = {}
        for s in problem.settings:
            lo, hi = achievable_rho_range(s.model, s.reward, problem.opts)
            self._rhos[s] = [float(r) for r in space_filling_rho(lo, hi, n_points)]
            # The grid's own points set its IsoFLOP budget (budget_for's denser set is for
            # designs not known up front), from the start: a resumed race calls before it asks.
            # Never above the decision budget, as iso_range_budget's ceiling.
            self._budgets[s] = min(iso_pilot_budget(s, self._rhos[s], self.budget, problem.opts), problem.budget)

    def tell(self, records: Sequence[RunRecord]) -> None:
        super().tell(records)
        self._failed.tell(records)

    def ask(self, n: int | None = None) -> list[Proposal]:
        check_batch(n)
        done = {r.proposal_id for r in self.records_}
        # By plan, not id: two grid rho values the compiler maps to one plan are one run,
        # and a plan recorded under another id (another strategy's, in the same store) is
        # a point this grid has.
        skip = {plan_key(r.plan) for r in self.records_}
        skip |= {plan_key(plan) for plan in self._failed.abandoned(done).values()}
        out: dict[PlanKey, Proposal] = {}
        for s in self.problem.settings:
            for r in self._rhos[s]:
                p = self._proposal(s, r, f"grid: IsoFLOP pilot grid of {self.n_points} rho values")
                if p is not None and (k := plan_key(p.plan)) not in skip:
                    out.setdefault(k, p)
        return list(out.values())[:n]


class RandomStrategy(_PilotBaseline):
    """Uniform random rho at the pilot budget, settings in turn, each a plan not run or
    asked for before; exhausted only when no new plan is left (:func:`new_plan_rho`)."""

    name = "random"

    #: Uniform draws per proposal before the new plans are drawn from directly: a draw
    #: lands a plan already run more and more often as a race fills the few dozen plans a
    #: pilot budget has.
    MAX_DRAWS = 32

    def __init__(self, problem: RaceProblem, seed: int = 0, *, budget: float | None = None) -> None:
        super().__init__(problem, seed, budget=budget)
        self._rng = np.random.default_rng(seed)
        self._turns = Rotation(problem.settings)
        self._plans = PlanLedger(problem)

    def tell(self, records: Sequence[RunRecord]) -> None:
        super().tell(records)
        self._plans.tell(records)

    def ask(self, n: int | None = None) -> list[Proposal]:
        return self._turns.batch(n, self._new)

    def _new(self, s: Setting) -> Proposal | None:
        """:meth:`_draw`'s proposal, entered in the ledger so the batch does not repeat it."""
        p = self._draw(s)
        if p is not None:
            self._plans.add(p)
        return p

    def _draw(self, s: Setting) -> Proposal | None:
        """A proposal of a plan not run, in flight or in this batch: the compiler maps a
        band of rho to one plan, and its run again under a new id would teach nothing."""
        from planner.compiler import achievable_rho_range

        lo, hi = achievable_rho_range(s.model, s.reward, self.problem.opts)
        for _ in range(self.MAX_DRAWS):
            p = self._proposal(s, float(self._rng.uniform(lo, hi)), "random: uniform rho at the pilot budget")
            if p is not None and p.plan not in self._plans:
                return p
        r = new_plan_rho(s, self.budget_for(s), self.problem.opts, self._plans.__contains__, self._rng)
        return None if r is None else self._proposal(s, r, "random: uniform rho among the plans not run yet")
