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
from planner.strategies.base import RaceProblem, flat_prior_call, relevant_records, target_value

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
            smp = (optuna.samplers.TPESampler(seed=seed * 1000 + i, n_startup_trials=n_startup)
                   if sampler == "tpe"
                   else optuna.samplers.GPSampler(seed=seed * 1000 + i, n_startup_trials=n_startup))
            self._studies[s] = optuna.create_study(direction="maximize", sampler=smp)
            lo, hi = achievable_rho_range(s.model, s.reward, problem.opts)
            self._dist[s] = optuna.distributions.FloatDistribution(lo, hi)
        self._waiting: dict[str, list[tuple[Setting, Any]]] = {}
        self._budgets: dict[Setting, float] = {}
        self._ids: set[str] = set()
        self._turn = 0

    def ask(self, n: int | None = None) -> list[Proposal]:
        settings = self.problem.settings
        out: dict[str, Proposal] = {}
        for _ in range(n if n is not None else len(settings)):
            s = settings[self._turn % len(settings)]
            self._turn += 1
            trial = self._studies[s].ask({"rho": self._dist[s]})
            if s not in self._budgets:  # one IsoFLOP budget per setting (iso_range_budget)
                self._budgets[s] = iso_range_budget(s, self.budget, self.problem.opts)
            b = self._budgets[s]
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
            if r.run_id in self._ids:
                continue
            self._ids.add(r.run_id)
            # Seed replicates: the first record answers the trial, later ones are extra data
            # Optuna's single-objective ask/tell has no slot for.
            for s, trial in self._waiting.pop(r.proposal_id, []):
                self._studies[s].tell(trial, target_value(r, self.problem.target))
        # A run that failed (or measured no value of the target) fails its trial, after the
        # good records: one good seed answers it. Optuna never proposes the same trial
        # again, so left waiting it would stay RUNNING in the study for good.
        keys, answered = set(self.problem.settings), {id(r) for r in good}
        for r in records:
            if id(r) not in answered and Setting(r.model, r.reward) in keys:
                for s, trial in self._waiting.pop(r.proposal_id, []):
                    self._studies[s].tell(trial, state=_failed())

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
        return out


def _failed() -> Any:
    import optuna

    return optuna.trial.TrialState.FAIL
