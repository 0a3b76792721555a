"""The strategy plug point: a small ask/tell interface (in the spirit of Optuna's).

A strategy proposes runs (``ask``), learns from finished runs (``tell``) and states its
current regime call for every setting (``decide``). The active loop
(:func:`planner.loop.run_race`) drives any strategy the same way, so baselines and ours
are compared on equal terms.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from planner.compiler import RHO_DIGITS, CompileOptions, achievable_rho_range, compile_plan
from planner.design import compile_feasible
from planner.errors import ConfigError, InfeasibleError
from planner.frontier import Setting, allocation_shares, at_budget, rho_grid
from planner.reach import request_map
from planner.regime import LABELS, RegimeCall, regime_labels
from planner.registry import get_model, get_reward
from planner.schema import TARGETS, Proposal, RunPlan, RunRecord

__all__ = [
    "MAX_ATTEMPTS",
    "FailedRuns",
    "PlanKey",
    "PlanLedger",
    "RaceProblem",
    "Rotation",
    "Strategy",
    "budget_axis",
    "check_batch",
    "decision_state",
    "flat_prior_call",
    "mark_unchecked",
    "new_plan_rho",
    "plan_key",
    "ran_pilot_budgets",
    "relevant_records",
]

#: A run that failed this many times is not tried again (:func:`planner.loop.run_race`).
MAX_ATTEMPTS = 2


@dataclass(frozen=True)
class RaceProblem:
    """What a race decides: the regime of each setting for ``target`` at ``budget`` FLOPs.

    ``pilot_budget`` is the cheapest budget strategies run at (the fidelity floor);
    ``confidence`` the regime probability at which a setting counts as decided;
    ``indifference`` (metric units, 0 = off) also counts a setting as decided when the
    expected loss of its call is at most this much: on a flat frontier the regime is a coin
    flip that no affordable number of runs resolves, and it does not matter.
    """

    settings: tuple[Setting, ...]
    budget: float
    pilot_budget: float
    target: str = "native"
    confidence: float = 0.9
    opts: CompileOptions | None = None
    indifference: float = 0.0

    def __post_init__(self) -> None:
        # Plain (model, reward) pairs and numpy numbers are what Python callers hold; the
        # normalised values are set once here, before anything reads them.
        try:
            if isinstance(self.settings, str):
                raise TypeError
            given = tuple(self.settings)  # once: a generator would be spent by the checks
            if any(isinstance(s, str) or len(s) != 2 for s in given):
                raise TypeError
            settings = tuple(Setting(str(m), str(r)) for m, r in given)
        except TypeError:
            raise ConfigError(f"settings: (model, reward) pairs, e.g. [Setting('qwen2.5-1.5b', 'prm')], "
                              f"got {self.settings!r}") from None
        if not settings:
            raise ConfigError("settings: no (model, reward) setting requested; pass --models/--rewards")
        object.__setattr__(self, "settings", settings)
        for name in ("budget", "pilot_budget", "confidence", "indifference"):
            v = getattr(self, name)
            if isinstance(v, np.integer | np.floating):
                object.__setattr__(self, name, float(v))
        if self.target not in TARGETS:
            raise ConfigError(f"target: unknown target {self.target!r}; use one of: {', '.join(TARGETS)}")
        if not 0.0 < self.confidence < 1.0:
            raise ConfigError(f"confidence: must lie in (1/3, 1), got {self.confidence}; e.g. --confidence 0.9")
        if self.confidence <= 1 / 3:
            # The likeliest of three regimes has P >= 1/3: every call would be "confident"
            # (a typo such as 0.09 for 0.9 ended races on their first fit).
            raise ConfigError(f"confidence: {self.confidence:g} is met by every call (the likeliest of three "
                              "regimes has P >= 1/3); give more than 1/3, e.g. --confidence 0.9")
        for name in ("budget", "pilot_budget"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ConfigError(f"{name.replace('_', '-')}: must be a positive finite number of FLOPs, got {v!r}")
        if not (math.isfinite(self.indifference) and 0 <= self.indifference < 1):
            raise ConfigError(f"indifference: must lie in [0, 1) (metric units; 0 = off), got "
                              f"{self.indifference!r}; e.g. 0.002")
        if self.pilot_budget > self.budget:
            raise ConfigError(
                f"pilot-budget: {self.pilot_budget:.3g} exceeds the target budget {self.budget:.3g}; "
                "pilots must not cost more than the decision they inform"
            )
        for s in self.settings:
            if get_model(s.model).role != "policy":
                raise ConfigError(f"models: {s.model!r} is a reward model, not a policy; pick a policy model")
            get_reward(s.reward)
            try:  # the decision budget must buy a run, or there is nothing to decide
                compile_plan(s.model, s.reward, 0.5, self.budget, self.opts)
            except InfeasibleError as exc:
                if exc.field == "budget":
                    raise ConfigError(f"budget: {self.budget:.3g} FLOPs buys no {s.key} run; the nearest run at "
                                      f"rho 0.5 costs {exc.nearest:.3g} FLOPs (within 2% of it compiles)") from None


def decision_state(call: RegimeCall, problem: RaceProblem) -> str:
    """"confident", "indifferent" or "open" (not decided yet). A strategy can hold a call
    open by setting ``call.extra["needs_validation"]`` (ours does until the call has been
    checked by a run at the target budget). A call from the prior alone (no data) is open
    whatever its probability: a low --confidence must not end a race before its first run."""
    if call.extra.get("needs_validation") or call.extra.get("method") == "prior":
        return "open"
    if call.confidence >= problem.confidence:
        return "confident"
    if problem.indifference > 0 and call.expected_loss <= problem.indifference:
        return "indifferent"
    return "open"


def mark_unchecked(call: RegimeCall, runs_budget: float, problem: RaceProblem) -> None:
    """Hold open a baseline's call made from runs at ``runs_budget`` where that is not the
    decision budget (:func:`planner.frontier.at_budget`): the grid protocol's pilots say
    what the regime is at the pilot budget, and nothing has checked it at the budget it is
    about, as ours' validation does before its calls count (:func:`decision_state`). The
    baselines never stop on confidence: this changes what their summaries call decided,
    not how they race."""
    if not at_budget(runs_budget, problem.budget):
        call.extra["needs_validation"] = True


def relevant_records(problem: RaceProblem, records: Sequence[RunRecord]) -> list[RunRecord]:
    """Successful records of the problem's settings that measured its target (a finite value)."""
    keys = set(problem.settings)
    return [
        r
        for r in records
        if r.status == "ok"
        and Setting(r.model, r.reward) in keys
        and isinstance(v := getattr(r.metrics, problem.target, None), int | float)
        and math.isfinite(v)
    ]


class FailedRuns:
    """The failed attempts told to a strategy, so that it stops proposing what will not run.

    A proposal is *abandoned* once one of its runs has failed :data:`MAX_ATTEMPTS` times
    (or succeeded without measuring the target) and none of its runs gave a value: the
    loop does not run it again, so a strategy that kept proposing it (a design point it
    still lacks) would end the race as "exhausted" with every other run still to do.
    Attempts are keyed by (run id, attempt number), so a record told twice counts once.
    """

    def __init__(self, problem: RaceProblem) -> None:
        self._problem = problem
        self._keys = set(problem.settings)
        self._attempts: dict[str, set[int]] = {}
        self._plans: dict[str, tuple[str, RunPlan]] = {}  # run id -> (proposal id, plan)
        self._blank: dict[str, RunPlan] = {}  # ok runs that measured no value of the target

    def tell(self, records: Sequence[RunRecord]) -> None:
        good = {id(r) for r in relevant_records(self._problem, records)}
        for r in records:
            if Setting(r.model, r.reward) not in self._keys or id(r) in good:
                continue
            if r.status == "ok":  # done for the loop, yet no data: never run again
                self._blank[r.proposal_id] = r.plan
            else:
                self._attempts.setdefault(r.run_id, set()).add(r.attempt)
                self._plans[r.run_id] = (r.proposal_id, r.plan)

    def abandoned(self, succeeded: set[str]) -> dict[str, RunPlan]:
        """Plans of abandoned proposals by proposal id; ``succeeded``: proposal ids with a
        usable record (one good seed keeps a proposal's data). An ok run without a value of
        the target abandons its proposal at once: the loop counts it done."""
        out = {pid: plan for pid, plan in self._blank.items() if pid not in succeeded}
        for rid, atts in self._attempts.items():
            pid, plan = self._plans[rid]
            if len(atts) >= MAX_ATTEMPTS and pid not in succeeded:
                out[pid] = plan
        return out


#: A plan's identity for strategies (:func:`plan_key`).
PlanKey = tuple[Hashable, ...]


def plan_key(plan: RunPlan) -> PlanKey:
    """What the engine runs: the plan's setting, budget and every lever, as
    :func:`planner.proposals.proposal_id` hashes them, but not ``rho_target``. The compiler
    maps every request within its rho tolerance to one plan, and the id keeps the request,
    so one run could come back under many ids, each a full-cost run that teaches nothing new
    (the simulator's noise, too, is keyed by the levers and the seed). Strategies compare
    plans by this key; ids stay as they are (stores on disk are keyed by them)."""
    return (plan.model, plan.reward, f"{plan.budget:.6g}", plan.prompt_len, plan.completion_len,
            plan.max_completion_length, plan.prompts_per_round, plan.total_prompts, plan.rounds,
            plan.completions_per_prompt, plan.completions_kept, plan.num_iterations, plan.old_logprobs,
            f"{plan.beta:.6g}", plan.gradient_checkpointing, plan.lm_head_positions, plan.lora_rank,
            plan.lora_alpha, tuple(plan.lora_targets))


class PlanLedger:
    """The plans a strategy has run or has in flight, by :func:`plan_key`: what it must not
    propose again under a new id. Told runs count whatever their status (a failed plan is
    retried under its own id by the loop, :data:`MAX_ATTEMPTS`, never as a new run), and so do
    proposals asked but not told yet (a batch, or runs still executing)."""

    def __init__(self, problem: RaceProblem) -> None:
        self._keys = set(problem.settings)
        self._ran: set[PlanKey] = set()
        self._asked: dict[PlanKey, str] = {}  # plan key -> proposal id

    def tell(self, records: Sequence[RunRecord]) -> None:
        for r in records:
            if Setting(r.model, r.reward) in self._keys:
                self._ran.add(plan_key(r.plan))

    def add(self, proposal: Proposal) -> None:
        self._asked.setdefault(plan_key(proposal.plan), proposal.id)

    def __contains__(self, plan: RunPlan) -> bool:
        k = plan_key(plan)
        return k in self._ran or k in self._asked

    def in_flight(self, plan: RunPlan) -> str | None:
        """The id under which ``plan`` was proposed, where no run of it has been told yet."""
        k = plan_key(plan)
        return None if k in self._ran else self._asked.get(k)


def new_plan_rho(setting: Setting, budget: float, opts: CompileOptions | None,
                 taken: Callable[[RunPlan], bool], rng: np.random.Generator) -> float | None:
    """A rho whose plan at ``budget`` is not ``taken``: what uniform draws over the
    setting's reachable range, redrawn until they land a new plan, would give, without
    their unbounded cost; None when every plan a request can compile to is taken (the
    strategy's search space is spent).

    Exact, from :func:`planner.reach.request_map`: each new plan is drawn with probability
    proportional to the width of the requests in ``[lo, hi]`` (the candidates' rho range)
    that compile to it, and the request returned is the midpoint of its widest interval.
    Intervals narrower than ``10**-RHO_DIGITS`` are left out: a request is rounded to that
    many digits (:func:`planner.design.compile_feasible`) and could land outside them.
    Intervals where no candidate lands ``budget`` count too, by the plan
    :func:`~planner.design.compile_feasible` clamps their midpoint to (as uniform draws there
    would get it).
    (A 1001-point grid of requests, used before, reached the same plans for the Qwen2.5
    and tiny-s policies at their pilot and target budgets, but nothing guaranteed it.)
    """
    lo, hi = achievable_rho_range(setting.model, setting.reward, opts)
    rm = request_map(setting.model, setting.reward, opts, float(budget))
    left, right = np.clip(rm.edges[:-1], lo, hi), np.clip(rm.edges[1:], lo, hi)
    width = right - left
    wide = width > 10.0 ** -RHO_DIGITS
    j = np.flatnonzero((rm.winner >= 0) & wide)
    # Each winner's widest interval (sorted by winner, widest first: np.unique keeps the
    # first) and its total width.
    winner = rm.winner[j]
    order = np.lexsort((-width[j], winner))
    plans, first = np.unique(winner[order], return_index=True)
    widest = j[order][first]
    total = np.bincount(np.searchsorted(plans, winner), weights=width[j], minlength=len(plans))
    # Requests no candidate lands at ``budget`` as asked: compile_feasible clamps them (the
    # budget raised to the nearest feasible one), and uniform draws land those plans too.
    clamped = np.flatnonzero((rm.winner < 0) & wide)
    free: dict[PlanKey, tuple[float, float]] = {}
    for k, w in [*zip(widest, total, strict=True), *zip(clamped, width[clamped], strict=True)]:
        r = float((left[k] + right[k]) / 2)
        plan = compile_feasible(setting, r, budget, opts)[0]
        if plan is not None and not taken(plan):
            key = plan_key(plan)
            r0, w0 = free.get(key, (r, 0.0))
            free[key] = (r0, w0 + float(w))
    if not free:
        return None
    picks = list(free.values())
    p = np.array([w for _, w in picks])
    return picks[int(rng.choice(len(picks), p=p / p.sum()))][0]


def flat_prior_call(setting: Setting, problem: RaceProblem, level: float = 0.9) -> RegimeCall:
    """The call before any data: rho* uniform over the reachable range."""
    g = rho_grid(setting.model, setting.reward, 201, problem.opts)
    labels = regime_labels(allocation_shares(setting.model, setting.reward, g, problem.opts, problem.budget))
    probs = np.bincount(labels, minlength=len(LABELS)) / len(labels)
    top = int(np.argmax(probs))
    a = (1 - level) / 2
    inside = g[labels == top]
    return RegimeCall(
        # Within the call, as RegimeCall defines it: the whole range's median fell outside
        # the call's own interval (0.46 against [0.47, 0.88] for 1.5b/prm).
        rho_star=float(np.median(inside)),
        # rho_star_ci within the called regime and optimum_ci over the whole range, as
        # RegimeCall defines them.
        rho_star_ci=(float(np.quantile(inside, a)), float(np.quantile(inside, 1 - a))),
        optimum_ci=(float(np.quantile(g, a)), float(np.quantile(g, 1 - a))),
        regime=LABELS[top],
        probabilities={lab: float(p) for lab, p in zip(LABELS, probs, strict=True)},
        level=level,
        extra={"method": "prior"},
    )


def ran_pilot_budgets(problem: RaceProblem, records: Sequence[RunRecord]) -> dict[Setting, float]:
    """The budget each setting's pilots ran at: the cheapest nominal budget among its
    ``records`` below the decision budget. Settings with no such record are absent.

    The cheapest, not the most common: the pilot budget is the fidelity floor, and above
    it sit the acquisition's ladder rungs and, after a resume with a larger --budget, the
    earlier race's target runs, which can outnumber the pilots. A resumed race (ours)
    completes a half-done design there whatever --pilot-budget now says."""
    low: dict[Setting, float] = {}
    for r in records:
        s = Setting(r.model, r.reward)
        if s in problem.settings and r.budget < problem.budget and not at_budget(r.budget, problem.budget):
            low[s] = min(low.get(s, math.inf), float(r.budget))
    return low


def budget_axis(pilot_budget: float, budget: float, records: Sequence[Any]) -> tuple[float, float]:
    """The surrogate's budget axis, ``(lowest / 10, budget)`` FLOPs with ``lowest`` the
    smaller of ``pilot_budget`` (<= ``budget``) and the cheapest record's budget: the race's and the
    report's fits of one store then agree whether or not a resume repeats --pilot-budget
    (a --budget 10x larger defaults it 10x higher, past pilots that ran lower)."""
    lowest = min([float(pilot_budget), *(float(r.budget) for r in records)])
    return lowest / 10, float(budget)


def check_batch(n: int | None, name: str = "n") -> None:
    """``ask(n)``'s ``n`` (or another batch size, ``name``): None or a positive whole number
    (a negative one sliced the batch from its end)."""
    if n is not None and not (isinstance(n, int | np.integer) and not isinstance(n, bool) and n >= 1):
        raise ConfigError(f"{name}: proposals per batch, a whole number >= 1 (or None: the strategy's own), got {n!r}")


class Rotation:
    """The baselines' batches: the settings in turn, one proposal each, the turn carried
    across batches (a batch of fewer than one per setting leaves off where the next one
    begins, so no setting is starved by ``ask(1)``)."""

    def __init__(self, settings: Sequence[Setting]) -> None:
        self.settings = tuple(settings)
        self.turn = 0

    def batch(self, n: int | None, new: Callable[[Setting], Proposal | None]) -> list[Proposal]:
        """Up to ``n`` proposals (None: one turn per setting) of ``new(setting)``; a setting
        whose ``new`` gives None (no new plan left) uses its turn and adds nothing."""
        check_batch(n)
        out: list[Proposal] = []
        for _ in range(n if n is not None else len(self.settings)):
            s = self.settings[self.turn % len(self.settings)]
            self.turn += 1
            if (p := new(s)) is not None:
                out.append(p)
        return out


@runtime_checkable
class Strategy(Protocol):
    """Ask/tell strategy.

    * ``ask(n)``: up to ``n`` proposals (None: the strategy's natural batch); ``[]`` when
      it has nothing more to propose.
    * ``tell(records)``: finished runs (already-known run ids are ignored).
    * ``decide()``: the current regime call of every setting.
    * ``stops_on_confidence``: whether the loop may stop once every call reaches the
      problem's confidence (strategies without a posterior run to a cap or exhaustion).
    * ``asks_again`` (optional, default False): whether ``ask`` has no side effects, so
      the loop may ask again with a smaller ``n`` when a cap cuts a batch (otherwise it
      keeps the batch's leading proposals). Optuna's ask creates trials; ours' is pure.
    """

    name: str
    problem: RaceProblem
    stops_on_confidence: bool

    def ask(self, n: int | None = None) -> list[Proposal]: ...

    def tell(self, records: Sequence[RunRecord]) -> None: ...

    def decide(self) -> dict[Setting, RegimeCall]: ...


def target_value(record: RunRecord, target: str) -> float:
    v: Any = getattr(record.metrics, target)
    return float(v)
