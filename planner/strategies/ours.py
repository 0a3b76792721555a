"""Our strategy: space-filling pilots, then GP-surrogate acquisition aimed at the decision.

1. Settings with fewer than ``n_init`` recorded plans (seed replicates of one plan count
   once) get a space-filling rho design at the pilot budget
   (:func:`planner.design.initial_design`).
2. Then ``n_anchor`` (default :data:`N_ANCHOR` = 2) stratified runs per setting at the
   target budget: pilots 10x cheaper carry a flatter frontier, and a call that rests on
   extrapolating them loses to a 3-point grid at the target budget on exactly the
   settings whose regime can be told apart; 2 anchors beat 3 pooled over the benchmark's
   worlds at a third less target-budget spend up front (docs/planner.md).
3. Otherwise a batch from :func:`planner.acquisition.select_batch` over the settings whose
   regime is not yet decided: expected reduction of regime entropy and rho* spread at
   the target budget per square root of FLOPs (``AcquisitionConfig.cost_power``), budgets
   from pilot to target as fidelities.
4. ``decide`` samples each setting's frontier at the target budget from the surrogate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np

from planner.acquisition import AcquisitionConfig, select_batch
from planner.design import (
    compile_feasible,
    initial_design,
    iso_note,
    iso_pilot_budget,
    scattered_note,
    space_filling_rho,
)
from planner.errors import ConfigError
from planner.frontier import (
    FrontierModel,
    Setting,
    allocation_shares,
    at_budget,
    classify_setting,
    reuse_at,
    rho_grid,
)
from planner.noise import check_noise_sd
from planner.proposals import make_proposal
from planner.regime import RegimeCall
from planner.registry import get_model
from planner.schema import Prediction, Proposal, RunRecord
from planner.strategies.base import (
    FailedRuns,
    RaceProblem,
    budget_axis,
    check_batch,
    flat_prior_call,
    plan_key,
    ran_pilot_budgets,
    relevant_records,
)
from planner.strategies.guess import BUDGET_REACH, guess, predict
from planner.threads import one_thread_when

__all__ = ["BUDGET_REACH", "MAX_ANCHOR", "N_ANCHOR", "RaceStrategy"]

# One torch thread for the surrogate's fits, calls and acquisition (planner.threads), where
# there is a surrogate to fit: with fewer than two records nothing here touches a tensor.
_one_thread = one_thread_when(lambda self, *a, **k: len(self.records_) >= 2)


def _fits(fn: Any) -> Any:
    """:data:`_one_thread`, and quiet about the diagonal jitter linear_operator adds to a
    near-singular posterior covariance (a fine rho grid's): the surrogate silences it where
    it samples, but predictions and the acquisition's posteriors reach it too, and its two
    lines tore through a race's output (seen with --seeds 2)."""
    import functools
    import warnings

    inner = _one_thread(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"A not p\.d\., added jitter")
            return inner(*args, **kwargs)

    return wrapper

# Target-budget anchors per setting; measured against 3 (and duel placement) in
# docs/planner.md "Proposals and acquisition".
N_ANCHOR = 2
# At most this many: each is a target-budget run, the dearest kind, and a million of them
# (a typo) spun for minutes building proposals no cap would let run.
MAX_ANCHOR = 20


def _tolerance(role: str) -> float:
    """How near a target-budget run must be to count for a duel role. The posterior best
    is tested only by a run that makes it eligible as rho* (the support rule's 0.05)."""
    return 0.05 if role == "posterior best" else 0.08


class RaceStrategy:
    """The RACE active strategy (``--strategy ours``).

    Args:
        problem: settings, target, budgets, confidence.
        seed: seeds the posterior samplers (calls are reproducible).
        n_init: initial design size per setting (pilot budget).
        n_anchor: target-budget runs per setting after the initial design.
        anchor: where they go: ``"stratified"`` (evenly over the reachable rho range, the
            paper's IsoFLOP grid) or ``"duel"`` (the current call's rho* and the best rho of
            the runner-up regime, i.e. the validation duel run up front; with
            ``n_anchor > 2`` the rest are stratified).
        batch_size: proposals per acquisition batch (None: one per undecided setting,
            at most 8, and at least ``min_batch``).
        min_batch: the least proposals of a default acquisition batch; ``planner race
            --workers N`` sets it to the proposals that keep N workers busy, so a round
            with one undecided setting does not leave workers idle (the extra picks are
            the greedy batch's next best, conditioned on the first).
        config: acquisition knobs.
        n_samples: posterior sample paths per regime call.
        validate: hold a call open until runs at the target budget near rho* and near the
            best rho of another regime confirm it (proposed as validation runs).
        noise_sd: one run's noise in the target metric, known from elsewhere: one sd for
            every reward system or ``{reward: sd}`` naming each of the problem's (None: seed
            replicates measure it, else the fit guesses it; see
            :class:`surrogate.FrontierSurrogate`).
    """

    name = "ours"
    stops_on_confidence = True
    # ask() reads the records and changes nothing (its fit and calls are caches): the
    # loop may ask again for fewer proposals when a cap cuts a batch.
    asks_again = True

    def __init__(
        self,
        problem: RaceProblem,
        seed: int = 0,
        *,
        n_init: int = 4,
        n_anchor: int = N_ANCHOR,
        anchor: str = "stratified",
        batch_size: int | None = None,
        min_batch: int = 1,
        config: AcquisitionConfig | None = None,
        n_samples: int = 256,
        validate: bool = True,
        noise_sd: float | Mapping[str, float] | None = None,
    ) -> None:
        self.problem = problem
        self.noise_sd = check_noise_sd(noise_sd, problem)
        self.seed = seed
        if not (isinstance(n_init, int) and n_init >= 1):
            raise ConfigError(f"n_init: initial-design points per setting, a whole number >= 1, got {n_init!r}")
        if not (isinstance(n_anchor, int) and 0 <= n_anchor <= MAX_ANCHOR):
            raise ConfigError(f"anchors: target-budget runs per setting, a whole number from 0 to {MAX_ANCHOR}, "
                              f"got {n_anchor!r}")
        self.n_init = n_init
        self.n_anchor = n_anchor
        if anchor not in ("stratified", "duel"):
            raise ConfigError(f"anchor: unknown placement {anchor!r}; use stratified or duel")
        self.anchor = anchor
        if min_batch < 1:
            raise ConfigError(f"min_batch: must be at least 1, got {min_batch}")
        check_batch(batch_size, "batch_size")
        if not (isinstance(n_samples, int) and n_samples >= 1):
            raise ConfigError(f"n_samples: posterior sample paths per call, a whole number >= 1, got {n_samples!r}")
        self.batch_size = batch_size
        self.min_batch = min_batch
        self.config = config or AcquisitionConfig(seed=seed)
        self.n_samples = n_samples
        self.validate = validate
        self.records_: list[RunRecord] = []
        self._ids: set[str] = set()
        self._surrogate: FrontierModel | None = None
        self._calls: dict[Setting, RegimeCall] | None = None
        self._failed = FailedRuns(problem)

    # ---------------------------------------------------------------- ask / tell
    def tell(self, records: Sequence[RunRecord]) -> None:
        self._failed.tell(records)
        new = [r for r in relevant_records(self.problem, records) if r.run_id not in self._ids]
        if new:
            self.records_.extend(new)
            self._ids.update(r.run_id for r in new)
            self._surrogate, self._calls = None, None

    @_fits
    def surrogate(self) -> FrontierModel | None:
        """The surrogate fitted on every record told so far (None with < 2 records)."""
        if self._surrogate is None and len(self.records_) >= 2:
            from surrogate import FrontierSurrogate, NotFittedError

            p = self.problem
            # Every refit starts fresh at the priors' modes, from a new model: warm starts
            # (the last batch's optimum as well, keeping the better) measured no better in
            # the benchmark (pooled same-regime 0.840 vs 0.827, decidable 0.957 vs 0.986)
            # and cost a second fit; a warm start alone stayed collapsed (see
            # FrontierSurrogate.fit). The budget axis follows the records (budget_axis).
            model = FrontierSurrogate(
                p.target,
                rewards=sorted({s.reward for s in p.settings}),
                models={s.model: float(get_model(s.model).num_parameters) for s in p.settings},
                budget_range=budget_axis(p.pilot_budget, p.budget, self.records_),
                warm_start=False,
                reuse=partial(reuse_at, opts=p.opts),
                noise_sd=self.noise_sd,
            )
            try:
                self._surrogate = model.fit(self.records_)
            except NotFittedError:  # replicates of one plan: no trend to fit yet
                return None
        return self._surrogate

    @_fits
    def decide(self) -> dict[Setting, RegimeCall]:
        if self._calls is None:
            sur = self.surrogate()
            p = self.problem
            calls = {
                s: (
                    classify_setting(sur, s.model, s.reward, p.budget, n_samples=self.n_samples,
                                     seed=self.seed, opts=p.opts)
                    if sur is not None
                    else flat_prior_call(s, p)
                )
                for s in p.settings
            }
            for s, c in calls.items():
                # A call resting on extrapolation from cheaper budgets is not accepted until
                # it has been checked at the budget it is about (docs/planner.md: validation duel).
                c.extra["target_runs"] = self._target_runs(s)
                if self.validate and sur is not None and self._would_decide(c) and not self._validated(s, c):
                    c.extra["needs_validation"] = True
            self._calls = calls
        return self._calls

    def _would_decide(self, call: RegimeCall) -> bool:
        """Whether the call is decided apart from validation."""
        p = self.problem
        return call.confidence >= p.confidence or (
            p.indifference > 0 and call.expected_loss <= p.indifference
        )

    def _validated(self, s: Setting, c: RegimeCall) -> bool:
        """Target-budget runs exist near rho* and near the runner-up regime's best rho."""
        return all(self._near_target_run(s, rho, _tolerance(role)) for role, rho in self._duel(s, c))

    def _target_runs(self, s: Setting) -> int:
        """Distinct target-budget plans run for ``s`` (seed replicates of one plan count once)."""
        return len({r.proposal_id for r in self.records_ if (r.model, r.reward) == s and self._at_target(r)})

    def _at_target(self, r: RunRecord) -> bool:
        """Whether ``r`` ran at the decision budget: within :func:`at_budget`'s band, or at
        the budget the compiler raised a target-budget request of its rho to (at small
        budgets an anchor or duel run can cost twice the budget, and must still count)."""
        b = self.problem.budget
        if at_budget(r.budget, b):
            return True
        plan, _ = compile_feasible(Setting(r.model, r.reward), r.plan.rho_target, b, self.problem.opts)
        return plan is not None and math.isclose(plan.budget, r.budget, rel_tol=1e-9)

    @_fits
    def ask(self, n: int | None = None, pending: Sequence[Proposal] = ()) -> list[Proposal]:
        """Initial-design points while a setting has fewer than ``n_init`` recorded plans,
        else an acquisition batch over the undecided settings (all settings if all are
        decided). ``pending`` proposals are in flight: not proposed again, and the
        acquisition is conditioned on them."""
        check_batch(n)
        p = self.problem
        # Distinct plans, not records: with --seeds 2 each design point is two records.
        plans: dict[Setting, set[str]] = {s: set() for s in p.settings}
        for r in self.records_:
            plans[Setting(r.model, r.reward)].add(r.proposal_id)
        counts = {s: len(ids) for s, ids in plans.items()}
        todo = [s for s in p.settings if counts[s] < self.n_init]
        # By plan, not id: the same run comes back under another id (another --target, a
        # hand-written file), and executing both would be refused as a twin run.
        waiting = {plan_key(x.plan) for x in pending}
        if todo:
            # Empty when every design point is already recorded (e.g. two design rhos
            # compiled to the same plan): fall through to the acquisition then.
            initial = self._initial(todo, counts)
            # A setting whose pending pilots are none of this design's points was designed
            # with other settings (its budget and rho shift depend on which are asked, as a
            # --pending file from a wider suggest): its design is in flight, not to be run twice.
            elsewhere = {s for s in todo
                         if (mine := {plan_key(x.plan) for x in pending if Setting(x.model, x.reward) == s})
                         and not mine & {plan_key(x.plan) for x in initial if Setting(x.model, x.reward) == s}}
            initial = [x for x in initial if Setting(x.model, x.reward) not in elsewhere]
            if initial or elsewhere:
                # Pending points are left out before the cut to n, or --n K with --pending
                # would propose the same first K again; all pending: the phase is in flight.
                return _first([x for x in initial if plan_key(x.plan) not in waiting], n,
                              self._requested(lambda r: Setting(r.model, r.reward) in todo))
        if not self.records_ and self._failed.abandoned(set()):
            # Every design point that could be compiled was abandoned (failed too often):
            # where every pilot fails, the costlier runs would too. Nothing left to propose.
            # (With no pilot to compile at all, the anchors below are what there is.)
            return []
        anchors = self._anchors()
        if anchors:
            return _first([x for x in anchors if plan_key(x.plan) not in waiting], n, self._requested(self._at_target))
        calls = self.decide()
        # A pending validation run is in flight already: not proposed, nor conditioned on, twice.
        every_check = self._validation(calls)
        checks = [x for x in every_check if plan_key(x.plan) not in waiting]
        open_ = [s for s in p.settings if not self._would_decide(calls[s])]
        if not open_ and every_check and not checks and self.min_batch <= 1:
            return []  # the round is the validation in flight: its runs decide the calls
        if not open_ and not checks:
            open_ = list(p.settings)
        q = n if n is not None else (self.batch_size or max(self.min_batch, min(8, len(open_))))
        in_flight = list(pending)
        if checks:
            q = max(0, q - len(checks))
            if not open_ and n is None:
                # Only validation is left: with workers to keep busy (min_batch > 1) the
                # rest of the batch goes to the settings under validation, conditioned on
                # their validation runs. (Otherwise the checks are of decided settings and
                # the batch of open ones; the fit ties them only through the kernel.)
                open_ = list(dict.fromkeys(Setting(c.model, c.reward) for c in checks))
                q = max(0, self.min_batch - len(checks))
                in_flight += checks
            if not open_ or q == 0:
                return _first(checks, n)
        if self.surrogate() is None:  # too few runs succeeded to fit, and the rest abandoned
            return checks
        pend = [(Setting(x.model, x.reward), x.plan.rho, x.plan.flops.total, x.plan.num_iterations)
                for x in in_flight]
        cands = select_batch(
            self.surrogate(), open_, q, target_budget=p.budget, pilot_budget=p.pilot_budget,
            config=self.config, opts=p.opts, pending=pend,
            recorded=self._tried_plans() + [x.plan for x in in_flight],
        )
        return checks + [
            make_proposal(
                c.plan,
                target=p.target,
                prediction=Prediction(target=p.target, mean=c.mean, std=c.std if c.run_std is None else c.run_std,  # type: ignore[arg-type]
                                      **self._guess(c.plan.model, c.plan.reward, c.plan.budget)),
                reason=c.reason(p.pilot_budget),
            )
            for c in cands
        ]

    def _validation(self, calls: dict[Setting, RegimeCall]) -> list[Proposal]:
        """Validation runs for calls that would be decided but rest on extrapolation.

        A call is checked at the budget it is about by a *duel*: one run near rho* and one
        near the best rho of any other regime (the runner-up), both at the target budget.
        Until both exist the call stays open (docs/planner.md: validation duel)."""
        from planner.acquisition import plan_key as point_key

        p, sur = self.problem, self.surrogate()
        done = {point_key(plan) for plan in self._tried_plans()}
        out = []
        for s, c in calls.items():
            if sur is None or not c.extra.get("needs_validation") or not self._would_decide(c):
                continue
            for role, rho in self._duel(s, c):
                if self._near_target_run(s, rho, _tolerance(role)):
                    continue
                for dr in (0.0, 0.02, -0.02, 0.04, -0.04):  # nearest plan not run yet
                    if not 0 < rho + dr < 1:  # past an end of the range (rho* at 0.98, say)
                        continue
                    plan, note = compile_feasible(s, rho + dr, p.budget, p.opts)
                    if plan is not None and point_key(plan) not in done:
                        break
                else:
                    continue
                done.add(point_key(plan))
                out.append(make_proposal(
                    plan, target=p.target, prediction=self._predict(plan),
                    reason=(f"validation ({role}): the call {c.regime} (p={c.confidence:.2f}, rho* "
                            f"{c.rho_star:.3f}, interval [{c.rho_star_ci[0]:.2f}, {c.rho_star_ci[1]:.2f}]) "
                            f"is checked by runs at the target budget at rho*, at the best rho of another "
                            f"regime and, where rho* lies outside its interval, at the posterior's best rho"
                            + (f"; {note.strip('; ')}" if note else "")),
                ))
        return out

    def _anchors(self) -> list[Proposal]:
        """Target-budget runs for settings with fewer than ``n_anchor`` of them."""
        p = self.problem
        out: list[Proposal] = []
        ids = self._tried_keys()  # by plan: one recorded under another id is not run again
        calls = self.decide() if self.anchor == "duel" and self.n_anchor > 0 else {}
        for s in p.settings:
            have = self._target_runs(s)
            if have >= self.n_anchor:
                continue
            lo, hi = rho_grid(s.model, s.reward, 2, p.opts)
            rhos = [("stratified", float(r)) for r in space_filling_rho(float(lo), float(hi), self.n_anchor, 0.5)]
            if s in calls:
                duel = self._duel(s, calls[s])[: self.n_anchor]  # anchors stay n_anchor runs
                rhos = duel + rhos[len(duel):]
            for role, rho in rhos:
                if role != "stratified" and self._near_target_run(s, rho):
                    continue
                plan, note = compile_feasible(s, rho, p.budget, p.opts)
                if plan is None:
                    continue
                what = (f"{self.n_anchor} stratified runs" if role == "stratified" else
                        f"the duel's {role} run (the current call {calls[s].regime}, p="
                        f"{calls[s].confidence:.2f})")
                prop = make_proposal(plan, target=p.target, prediction=self._predict(plan), reason=(
                    f"anchor: {what} of {s.key} at the target budget, so the "
                    f"call is measured where it applies, not only extrapolated from pilots "
                    f"({have} there so far)" + (f"; {note.strip('; ')}" if note else "")))
                if (key := plan_key(prop.plan)) not in ids:
                    ids.add(key)
                    out.append(prop)
        return out

    def _duel(self, s: Setting, c: RegimeCall) -> list[tuple[str, float]]:
        """(role, rho) of the duel: the call's rho*, the best rho of another regime and,
        when rho* (held to measured allocations) lies outside its own interval, the
        posterior mean's best rho within the called regime."""
        from planner.regime import LABELS, regime_labels

        p = self.problem
        out = [("rho*", float(c.rho_star))]
        sur = self.surrogate()
        if sur is None:
            return out
        grid = rho_grid(s.model, s.reward, opts=p.opts)
        labels = regime_labels(allocation_shares(s.model, s.reward, grid, p.opts, p.budget))
        other = labels != LABELS.index(c.regime)
        mean, _ = sur.frontier(s.model, s.reward, p.budget, grid)
        if other.any():
            out.append(("runner-up", float(grid[other][np.argmax(mean[other])])))
        lo, hi = c.rho_star_ci
        if (~other).any() and not lo <= c.rho_star <= hi:
            # The samples put the regime's optimum where no run at the target budget is:
            # test it there before the call is accepted (docs/planner.md, "Regime logic").
            out.append(("posterior best", float(grid[~other][np.argmax(mean[~other])])))
        return out

    def _predict(self, plan: Any) -> Prediction | None:
        """The surrogate's prediction for ``plan``'s run, marked where it is a guess
        (:func:`planner.strategies.guess.predict`; None before the first fit)."""
        return predict(self.surrogate(), self.records_, self.problem.target, plan)

    def _guess(self, model: str, reward: str, budget: float) -> dict[str, Any]:
        """``Prediction`` fields marking a guess (:func:`planner.strategies.guess.guess`)."""
        return guess(self.surrogate(), self.records_, model, reward, budget)

    def _near_target_run(self, s: Setting, rho: float, tol: float = 0.08) -> bool:
        return any((r.model, r.reward) == s and abs(r.card.rho - rho) <= tol and self._at_target(r)
                   for r in self.records_)

    def pilot_budgets(self, settings: Sequence[Setting] | None = None) -> dict[Setting, float]:
        """Each setting's initial-design budget (of ``settings``, default all): where its
        pilots already ran, that budget (:func:`ran_pilot_budgets`: a resume with another
        --budget or --pilot-budget completes the design it began); else ``--pilot-budget``,
        or where that buys about a prompt group (every point would land on a budget of its
        own) the smallest above it at which all the setting's design points compile
        (:func:`iso_pilot_budget`)."""
        p = self.problem
        ran = ran_pilot_budgets(p, self.records_)
        design = initial_design(p.settings, p.pilot_budget, self.n_init, p.opts)
        return {s: ran[s] if s in ran else iso_pilot_budget(
                    s, [pt.rho for pt in design if pt.setting == s], p.pilot_budget, p.opts, target_budget=p.budget)
                for s in (settings or p.settings)}

    def _initial(self, todo: list[Setting], counts: dict[Setting, int]) -> list[Proposal]:
        p = self.problem
        sur = self.surrogate()
        out: list[Proposal] = []
        seen = self._tried_keys()  # and the points proposed above
        # Each setting's design is fixed by its place among all settings, not among those
        # still short of pilots: else a failed pilot, a trimmed batch or a resume moved the
        # whole design of a half-done setting (new ids: more pilots, the failed point never
        # retried).
        design = [pt for pt in initial_design(p.settings, p.pilot_budget, self.n_init, p.opts) if pt.setting in todo]
        iso = self.pilot_budgets(todo)
        compiled = [(pt, *compile_feasible(pt.setting, pt.rho, iso[pt.setting], p.opts, target_budget=p.budget))
                    for pt in design]
        # No one budget up to the target compiles every point of a setting: said, as a raise is.
        scattered: dict[Setting, str] = {}
        for s in todo:
            mine = [b.budget for q, b, _ in compiled if q.setting == s and b is not None]
            n = sum(q.setting == s for q in design)
            if mine and (max(mine) > 1.02 * min(mine) or len(mine) < n):
                scattered[s] = scattered_note(len(mine), n, min(mine), max(mine), p.budget)
        for pt, plan, note in compiled:
            if plan is None:
                continue
            budget = iso[pt.setting]
            if budget > pt.budget:
                note = iso_note(pt.budget, budget) + note
            note = scattered.get(pt.setting, "") + note
            pred = self._predict(plan)
            reason = (
                f"initial design: {self.n_init} space-filling pilot runs over the reachable rho range "
                f"of {pt.setting.key} at the pilot budget ({counts[pt.setting]} recorded so far)"
                + ("" if sur is not None else "; no records yet, so no prediction")
                + (f"; {note.strip('; ')}" if note else "")
            )
            prop = make_proposal(plan, target=p.target, prediction=pred, reason=reason)
            # By plan, not id: a run recorded under another id (another --target, another
            # request compiling to the same levers) was proposed, and run, again.
            key = plan_key(prop.plan)
            if key not in seen:
                seen.add(key)
                out.append(prop)
        return out

    def _requested(self, keep: Callable[[RunRecord], bool]) -> dict[tuple[str, str], list[float]]:
        """The requested rho of each distinct recorded plan ``keep`` takes, by setting."""
        out: dict[tuple[str, str], dict[str, float]] = {}
        for r in self.records_:
            if keep(r):
                out.setdefault((r.model, r.reward), {})[r.proposal_id] = r.plan.rho_target
        return {k: list(v.values()) for k, v in out.items()}

    def _tried_keys(self) -> set[Any]:
        """Plans not to propose again (:func:`plan_key`): those with a record, and those
        abandoned after failing too often (:class:`~planner.strategies.base.FailedRuns`)."""
        return {plan_key(plan) for plan in self._tried_plans()}

    def _tried_plans(self) -> list[Any]:
        """Plans of the recorded runs and of the abandoned proposals."""
        return [r.plan for r in self.records_] + list(self._abandoned().values())

    def _abandoned(self) -> dict[str, Any]:
        return self._failed.abandoned({r.proposal_id for r in self.records_})


def _first(proposals: list[Proposal], n: int | None,
           done: Mapping[tuple[str, str], Sequence[float]] | None = None) -> list[Proposal]:
    """At most ``n`` of a phase's ``proposals``, in their order. A cut takes them in turn
    from each setting and, within one, spread over rho (the lowest, the highest, then each
    farthest from those taken): the first ``n`` in order gave ``--n 4`` of two settings'
    initial designs all to the first setting, and each setting's first points are its
    lowest rho. ``done`` ``{(model, reward): [rho, ...]}``: the phase's requests already
    run, counted in both (see :func:`_spread`)."""
    if n is None or len(proposals) <= n:
        return proposals
    chosen = {id(x) for x in _spread(proposals, done)[:n]}
    return [x for x in proposals if id(x) in chosen]


def _spread(proposals: list[Proposal],
            done: Mapping[tuple[str, str], Sequence[float]] | None = None) -> list[Proposal]:
    """``proposals`` reordered: round-robin over their settings, each setting's in
    :func:`_farthest_first` order, as if the rhos in ``done`` had been taken first. A race
    cut by its cap and interrupted mid-round resumed by dealing the rest of the design to
    the first setting again (sparse 4 pilots, prm 2, not 3 and 3; other calls than the
    uninterrupted race's): a setting's k-th new point now comes after every setting's
    points up to the same total (ties: first seen first)."""
    by: dict[tuple[str, str], list[Proposal]] = {}
    for x in proposals:
        by.setdefault((x.model, x.reward), []).append(x)
    ranked = []
    for order, (key, xs) in enumerate(by.items()):
        ran = list(done.get(key, ())) if done else []
        ranked += [(len(ran) + i, order, x) for i, x in enumerate(_farthest_first(xs, ran))]
    return [x for _, _, x in sorted(ranked, key=lambda t: (t[0], t[1]))]


def _farthest_first(proposals: list[Proposal], ran: Sequence[float] = ()) -> list[Proposal]:
    """The lowest rho, the highest, then each the farthest from those taken (ties: the
    lower rho). With ``ran``, each the farthest from those rhos and the ones taken."""
    left = sorted(proposals, key=lambda x: x.rho)
    if ran:
        out: list[Proposal] = []
        taken = list(ran)
    else:
        out = left[:1] + left[-1:] if len(left) > 1 else left[:]
        left = left[1:-1]
        taken = [x.rho for x in out]
    while left:
        best = max(left, key=lambda x: min(abs(x.rho - y) for y in taken))
        left.remove(best)
        out.append(best)
        taken.append(best.rho)
    return out
