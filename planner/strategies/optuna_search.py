"""Optuna baselines (``optuna-tpe``, ``optuna-gp``): one study per setting, rho as the single
parameter, driven through Optuna's ask/tell at the pilot budget. The recommendation is the
best trial's rho (what Optuna itself reports); it carries no probability, so the call
puts probability 1 on the best trial's regime and the loop never stops on confidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from planner.compiler import achievable_rho_range
from planner.design import compile_feasible, iso_note, iso_range_budget
from planner.frontier import Setting, allocation_shares
from planner.proposals import make_proposal
from planner.regime import LABELS, RegimeCall, regime_labels
from planner.schema import Proposal, RunRecord
from planner.strategies.base import (
    RaceProblem,
    check_batch,
    flat_prior_call,
    mark_unchecked,
    relevant_records,
    target_value,
)

__all__ = ["OptunaStrategy"]

SAMPLERS = ("tpe", "gp")


class OptunaStrategy:
    stops_on_confidence = False

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
        self._turn = 0

    def ask(self, n: int | None = None) -> list[Proposal]:
        check_batch(n)
        settings = self.problem.settings
        out: dict[str, Proposal] = {}
        for _ in range(n if n is not None else len(settings)):
            s = settings[self._turn % len(settings)]
            self._turn += 1
            trial = self._studies[s].ask({"rho": self._dist[s]})
            b = self._budget(s)
            plan, note = compile_feasible(s, float(trial.params["rho"]), b, self.problem.opts)
            if plan is None:
                self._studies[s].tell(trial, state=_failed())
                continue
            if b > self.budget:
                note = iso_note(self.budget, b) + note
            prop = make_proposal(plan, target=self.problem.target,
                                 reason=f"{self.name}: trial {trial.number}" + (f"; {note}" if note else ""))
            self._waiting.setdefault(prop.id, []).append((s, trial))
            out.setdefault(prop.id, prop)
        return list(out.values())

    def tell(self, records: Sequence[RunRecord]) -> None:
        good = relevant_records(self.problem, records)
        for r in good:
            s = Setting(r.model, r.reward)
            value = target_value(r, self.problem.target)
            # Every trial waiting for this plan, one that repeats an earlier trial's plan
            # too (its run is already recorded, so the loop hands back that record): left
            # unanswered it would stay RUNNING for good.
            waiting = self._waiting.pop(r.proposal_id, [])
            for st, trial in waiting:
                self._studies[st].tell(trial, value)
            if not waiting and r.proposal_id not in self._told and self._at_budget(s, r.budget):
                # A run the study did not ask for in this process (a resumed race): the
                # study learns it as a finished trial, as the caps already count it.
                self._studies[s].add_trial(self._trial(s, r.plan.rho_target, value))
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
            rho = float(study.best_trial.params["rho"])
            label = LABELS[int(regime_labels(allocation_shares(s.model, s.reward, [rho], self.problem.opts))[0])]
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
