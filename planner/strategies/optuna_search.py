"""Optuna baselines (``optuna-tpe``, ``optuna-gp``): one study per setting, rho as the single
parameter, driven through Optuna's ask/tell at the pilot budget. The recommendation is the
best trial's run, at the rho that run metered (the trial's rho is the request, which the
compiler meets only to within its tolerance); it carries no probability, so the call puts
probability 1 on that run's regime and the loop never stops on confidence.

The compiler maps a band of rho to one plan, and the samplers often ask for a rho whose
plan already ran (GPSampler asks for its upper bound again and again): such a trial is
told that run's value, Optuna's usual answer to a duplicate, and another is asked. Each
proposal is a plan not run before, so the race is never "exhausted" while one is left.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from planner.compiler import achievable_rho_range
from planner.design import compile_feasible, iso_note, iso_range_budget
from planner.frontier import Setting, allocation_shares
from planner.proposals import make_proposal
from planner.regime import LABELS, RegimeCall, regime_labels
from planner.schema import Proposal, RunPlan, RunRecord
from planner.strategies.base import (
    PlanKey,
    PlanLedger,
    RaceProblem,
    Rotation,
    flat_prior_call,
    mark_unchecked,
    new_plan_rho,
    plan_key,
    relevant_records,
    target_value,
)

__all__ = ["OptunaStrategy"]

SAMPLERS = ("tpe", "gp")


class OptunaStrategy:
    """An Optuna baseline (``sampler`` ``tpe`` or ``gp``): one study per setting over rho at
    the pilot budget (or ``budget``), ``n_startup`` random trials first; see the module
    docstring."""
    stops_on_confidence = False
    #: Trials asked of the sampler per proposal before a new plan is enqueued for it
    #: (:func:`planner.strategies.base.new_plan_rho`): a sampler sure of its optimum asks for
    #: the same plan until the duplicates' values move it.
    MAX_ASKS = 8

    def __init__(self, problem: RaceProblem, seed: int = 0, *, sampler: str = "tpe",
                 budget: float | None = None, n_startup: int = 3) -> None:
        import optuna

        if sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.name = f"optuna-{sampler}"
        self.problem = problem
        self.seed = seed
        self.budget = float(budget or problem.pilot_budget)
        self._dist: dict[Setting, Any] = {}
        self._studies: dict[Setting, Any] = {}
        for i, s in enumerate(problem.settings):
            # Pilot campaigns give each setting ~5-15 trials: Optuna's default 10 random
            # start-up trials would leave both samplers as plain random search.
            # Optuna takes seeds below 2**32; the wrap keeps every small seed's stream.
            sub = (seed * 1000 + i) % 2**32
            smp = (optuna.samplers.TPESampler(seed=sub, n_startup_trials=n_startup)
                   if sampler == "tpe"
                   else optuna.samplers.GPSampler(seed=sub, n_startup_trials=n_startup))
            self._studies[s] = optuna.create_study(direction="maximize", sampler=smp)
            lo, hi = achievable_rho_range(s.model, s.reward, problem.opts)
            self._dist[s] = optuna.distributions.FloatDistribution(lo, hi)
        self._waiting: dict[str, list[tuple[Setting, Any]]] = {}
        self._budgets: dict[Setting, float] = {}
        self._told: set[str] = set()  # proposal ids whose value the studies have
        self._turns = Rotation(problem.settings)
        self._plans = PlanLedger(problem)
        self._measured: dict[PlanKey, RunRecord] = {}  # plan key -> the run answering its trials
        self._answers: dict[Setting, dict[int, RunRecord]] = {s: {} for s in problem.settings}  # trial -> run
        self._rng = np.random.default_rng(seed)

    def ask(self, n: int | None = None) -> list[Proposal]:
        return self._turns.batch(n, self._new)

    def _new(self, s: Setting) -> Proposal | None:
        """The next trial's proposal whose plan is not run, in flight or in this batch;
        None when no new plan is left."""
        study, b = self._studies[s], self._budget(s)
        for tries in range(self.MAX_ASKS + 1):
            if tries == self.MAX_ASKS:
                r = new_plan_rho(s, b, self.problem.opts, self._plans.__contains__, self._rng)
                if r is None:
                    return None
                study.enqueue_trial({"rho": r})  # the next ask takes it: the study keeps the trial
            trial = study.ask({"rho": self._dist[s]})
            plan, note = compile_feasible(s, float(trial.params["rho"]), b, self.problem.opts)
            if plan is None:
                study.tell(trial, state=_failed())
                continue
            if plan in self._plans:
                self._repeat(s, trial, plan)
                continue
            if b > self.budget:
                note = iso_note(self.budget, b) + note
            prop = make_proposal(plan, target=self.problem.target,
                                 reason=f"{self.name}: trial {trial.number}" + (f"; {note}" if note else ""))
            self._waiting.setdefault(prop.id, []).append((s, trial))
            self._plans.add(prop)
            return prop
        return None

    def _repeat(self, s: Setting, trial: Any, plan: RunPlan) -> None:
        """Answer a trial whose plan ran already or is in flight, as its run was answered."""
        if (rec := self._measured.get(plan_key(plan))) is not None:
            self._studies[s].tell(trial, target_value(rec, self.problem.target))
            self._answers[s][trial.number] = rec
        elif (pid := self._plans.in_flight(plan)) is not None:
            self._waiting.setdefault(pid, []).append((s, trial))  # answered when that run is told
        else:  # it ran and measured nothing (failed): so would this trial
            self._studies[s].tell(trial, state=_failed())

    def tell(self, records: Sequence[RunRecord]) -> None:
        self._plans.tell(records)
        good = relevant_records(self.problem, records)
        for r in good:
            s = Setting(r.model, r.reward)
            value = target_value(r, self.problem.target)
            self._measured.setdefault(plan_key(r.plan), r)
            # Every trial waiting for this plan, one that repeats an earlier trial's plan
            # too (its run is already recorded, so the loop hands back that record): left
            # unanswered it would stay RUNNING for good.
            waiting = self._waiting.pop(r.proposal_id, [])
            for st, trial in waiting:
                self._studies[st].tell(trial, value)
                self._answers[st][trial.number] = r
            if not waiting and r.proposal_id not in self._told and self._at_budget(s, r.budget):
                # A run the study did not ask for in this process (a resumed race): the
                # study learns it as a finished trial, as the caps already count it. At the
                # requested rho, the sampler's own coordinate, as a live trial has it.
                study = self._studies[s]
                study.add_trial(self._trial(s, r.plan.rho_target, value))
                self._answers[s][study.get_trials(deepcopy=False)[-1].number] = r
            # Seed replicates: the first record answers the trial, later ones are extra data
            # Optuna's single-objective ask/tell has no slot for.
            self._told.add(r.proposal_id)
        # A run that failed (or measured no value of the target) fails its trial, after the
        # good records: one good seed answers it. Optuna never proposes the same trial
        # again, so left waiting it would stay RUNNING in the study for good.
        keys, answered = set(self.problem.settings), {id(r) for r in good}
        for r in records:
            if id(r) not in answered and Setting(r.model, r.reward) in keys:
                for s, trial in self._waiting.pop(r.proposal_id, []):
                    self._studies[s].tell(trial, state=_failed())

    def _budget(self, s: Setting) -> float:
        """The setting's one IsoFLOP budget (``iso_range_budget``), computed once."""
        if s not in self._budgets:
            self._budgets[s] = iso_range_budget(s, self.budget, self.problem.opts, ceiling=self.problem.budget)
        return self._budgets[s]

    def pilot_budgets(self) -> dict[Setting, float]:
        """Each setting's budget: where this strategy runs and what its calls rest on."""
        return {s: self._budget(s) for s in self.problem.settings}

    def _at_budget(self, s: Setting, budget: float) -> bool:
        return abs(budget / self._budget(s) - 1.0) <= 0.05

    def _trial(self, s: Setting, rho: float, value: float) -> Any:
        import optuna

        dist = self._dist[s]
        return optuna.trial.create_trial(params={"rho": min(max(rho, dist.low), dist.high)},
                                         distributions={"rho": dist}, value=value)

    def decide(self) -> dict[Setting, RegimeCall]:
        out = {}
        for s, study in self._studies.items():
            done = [t for t in study.trials if t.value is not None]
            if not done:
                out[s] = flat_prior_call(s, self.problem)
                continue
            # The rho the best trial's run metered, as grid and random call from: the
            # trial's own is the request, up to the compiler's tolerance away.
            best = study.best_trial
            run = self._answers[s].get(best.number)
            rho = float(run.card.rho) if run is not None else float(best.params["rho"])
            # A metered rho is its plan's; a request is labelled by the plan it compiles to.
            at = None if run is not None else self.problem.budget
            label = LABELS[int(regime_labels(allocation_shares(s.model, s.reward, [rho], self.problem.opts, at))[0])]
            out[s] = RegimeCall(
                rho_star=rho, rho_star_ci=(rho, rho), regime=label,
                probabilities={lab: float(lab == label) for lab in LABELS},
                extra={"method": "best-trial"},
            )
            mark_unchecked(out[s], self._budget(s), self.problem)
        return out


def _failed() -> Any:
    import optuna

    return optuna.trial.TrialState.FAIL
