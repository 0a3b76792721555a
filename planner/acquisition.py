"""Decision-aimed acquisition: which runs most reduce uncertainty about the regime and rho*
at the *target* budget, for the FLOPs spent.

Utility of a setting (lower is better), from ``S`` joint sample paths of its frontier at
the target budget::

    U = H(regime)  +  rho_weight * sd(rho*) / 0.1

(regime entropy in bits; the spread of the sample argmaxes in units of 0.1 rho). The
value of a candidate run x at budget b (the fidelity) is the expected one-step reduction
``U_now - E_y[U | y(x)]`` divided by its cost to the power ``cost_power`` (cost in
pilot-run units), where the expectation is over ``n_fantasies`` fantasised outcomes with
common random numbers, as in knowledge-gradient style look-ahead with a cost weighting
(``qMultiFidelityKnowledgeGradient`` + ``InverseCostWeightedUtility``, but with a
decision utility instead of the value of the maximum). Cheap pilot budgets inform the
target through the surrogate's budget lengthscale; a run at a larger budget is chosen only
when its extra information pays for its extra FLOPs.

Why ``cost_power`` = 0.5 and not 1 (plain gain per FLOP): a one-step look-ahead counts
only what a run tells the *next* posterior, and a target-budget run keeps paying later
(every later call at the target leans on it), while pilots 10x cheaper carry a flatter
frontier than the target's (RL frontiers sharpen with compute), so their one-step gain
per FLOP flatters them. Dividing by cost**alpha with alpha < 1 is the usual hedge of
cost-aware BO (Lee, Eriksson, Perrone & Seeger, "Cost-aware Bayesian optimization",
2020, arXiv:2003.10870, who also decay alpha from 1 to 0 over the budget, "cost
cooling"). Measured in docs/planner.md ("Proposals and acquisition"): at 1 the
benchmark's races spent most of a near-tied setting's FLOPs below the target (paper
qwen2.5-1.5b prm, repetition 1: 29 of 31 runs) and recommended rho worse than random
search at the target.

A batch is built greedily with a kriging believer: after each pick the surrogate is
conditioned on the pick's predicted mean (no refit), so the next pick accounts for it;
runs still pending from an earlier batch are conditioned on in the same way first.

Only the picked setting is re-scored after each pick: a run informs other settings
through the shared kernel too, but far less than its own, and re-scoring everything
would multiply the cost by the number of settings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from planner.compiler import CompileOptions
from planner.design import compile_feasible, iso_pilot_budget, space_filling_rho
from planner.frontier import FrontierModel, Setting, allocation_shares, rho_grid
from planner.regime import LABELS, regime_entropy, regime_probabilities
from planner.schema import RunPlan

__all__ = [
    "AcquisitionConfig",
    "Candidate",
    "fidelity_ladder",
    "plan_key",
    "score_setting",
    "select_batch",
    "utility",
]


@dataclass(frozen=True)
class AcquisitionConfig:
    """Knobs of the acquisition (defaults keep one batch under a few seconds on 2 cores)."""

    n_rho: int = 11  # candidate rho values per fidelity
    n_fidelities: int = 3  # budgets from the pilot to the target budget, geometric
    n_fantasies: int = 8
    n_samples: int = 128
    grid_size: int = 41  # rho grid of the target-budget frontier
    rho_weight: float = 0.25
    seed: int = 0
    # value = gain / cost**cost_power: 1 is gain per FLOP, 0 ignores cost (module docstring)
    cost_power: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= self.cost_power <= 1.0:
            from planner.errors import ConfigError

            raise ConfigError(f"cost-power: {self.cost_power} is outside [0, 1]; use 1 for gain per FLOP, "
                              "0 to ignore cost, 0.5 (default) in between")


@dataclass(frozen=True)
class Candidate:
    """A scored candidate run. ``gain`` is the expected utility reduction; ``cost`` its FLOPs."""

    setting: Setting
    rho: float
    budget: float
    plan: RunPlan
    gain: float
    cost: float
    mean: float
    std: float  # the latent posterior's: what the batch's tie-break weighs
    probabilities: dict[str, float] = field(default_factory=dict)
    note: str = ""
    run_std: float | None = None  # of the run's measurement (latent and one run's noise): its prediction

    def value(self, unit: float, cost_power: float) -> float:
        """Gain per (cost in ``unit`` FLOPs) ** ``cost_power`` (the planner's unit is one
        pilot run; at ``cost_power`` 1 this is gain per pilot-run of FLOPs)."""
        return self.gain / (self.cost / unit) ** cost_power

    def reason(self, unit: float) -> str:
        probs = ", ".join(f"{k} {v:.2f}" for k, v in self.probabilities.items())
        return (
            f"acquisition: expected uncertainty reduction {self.gain:.3f} (regime bits + rho* spread) "
            f"for {self.cost:.3g} FLOPs ({self.cost / unit:.3g}x the requested pilot budget {unit:.3g}) at "
            f"budget {self.budget:.3g}; "
            # The acquisition's own estimate (fewer samples, after this batch's earlier
            # picks): it differed from the calls table printed beside it, unexplained.
            f"P(regime) as the acquisition saw it, after this batch's earlier picks: {probs}"
            + (f"; {self.note.strip('; ')}" if self.note else "")
        )


def fidelity_ladder(pilot_budget: float, target_budget: float, n: int = 3) -> list[float]:
    """``n`` budgets from ``pilot_budget`` to ``target_budget``, evenly spaced in log."""
    if target_budget <= pilot_budget or n <= 1:
        return [float(pilot_budget)]
    return [float(b) for b in np.geomspace(pilot_budget, target_budget, n)]


def utility(
    samples: NDArray[np.float64], grid: NDArray[np.float64], shares: NDArray[np.float64], rho_weight: float
) -> NDArray[np.float64]:
    """Decision utility ``(..., S, G) -> (...)``: regime entropy + weighted rho* spread."""
    h = regime_entropy(regime_probabilities(samples, shares))
    stars = grid[np.argmax(samples, axis=-1)]  # (..., S)
    return h + rho_weight * stars.std(axis=-1) / 0.1


def plan_key(plan: RunPlan) -> tuple[str, str, float, float]:
    """What makes two plans the same run: setting, achieved rho and budget (the engines'
    outcome depends on the levers, not on the rho that was requested). The budget is
    rounded relatively (8 significant digits): absolute rounding to 1e8 FLOPs merged tiny
    budgets 10% apart at 1e9."""
    return (plan.model, plan.reward, round(plan.rho, 4), float(f"{plan.budget:.8g}"))


def _candidates(
    setting: Setting, budgets: Sequence[float], target_budget: float, n_rho: int,
    opts: CompileOptions | None, recorded: frozenset[tuple[str, str, float, float]], shift: float,
) -> list[tuple[RunPlan, str]]:
    lo, hi = rho_grid(setting.model, setting.reward, 2, opts)
    rhos = space_filling_rho(lo, hi, n_rho, shift)
    seen = set(recorded)
    out = []
    for b in budgets:
        if b < target_budget:
            # A rung that is a few prompt groups: one budget every candidate lands, not a
            # budget per candidate (as the initial design does).
            b = iso_pilot_budget(setting, rhos, b, opts, target_budget)
        for r in rhos:
            plan, note = compile_feasible(setting, float(r), b, opts, target_budget=target_budget)
            if plan is None:
                continue
            key = plan_key(plan)
            if key not in seen:
                seen.add(key)
                out.append((plan, note))
    return out


def score_setting(
    surrogate: FrontierModel,
    setting: Setting,
    target_budget: float,
    budgets: Sequence[float],
    config: AcquisitionConfig = AcquisitionConfig(),
    opts: CompileOptions | None = None,
    recorded: frozenset[tuple[str, str, float, float]] = frozenset(),
    shift: float = 0.5,
) -> list[Candidate]:
    """Score every feasible candidate (rho x budget) of one setting with a fitted surrogate.

    Candidates sit on a stratified rho design (``n_rho`` strata, relative position
    ``shift``); plans already in ``recorded`` (see :func:`plan_key`) are left out: re-running
    a plan with the same seed reproduces it, so a nearby new plan is the informative choice.
    """
    m, r = setting
    grid = rho_grid(m, r, config.grid_size, opts)
    shares = allocation_shares(m, r, grid, opts, target_budget)
    cands = _candidates(setting, budgets, target_budget, config.n_rho, opts, recorded, shift)
    if not cands:
        return []
    seed = config.seed
    now_samples = surrogate.sample_frontier(m, r, target_budget, grid, config.n_samples, seed)
    u_now = float(utility(now_samples, grid, shares, config.rho_weight))
    probs = regime_probabilities(now_samples, shares)
    X_grid = surrogate.encode(m, r, grid, target_budget)
    X_c = np.concatenate(
        [surrogate.encode(m, r, [p.rho], p.flops.total, reuse=[p.num_iterations]) for p, _ in cands]
    )
    ahead = surrogate.lookahead_samples(
        X_c, X_grid, n_fantasies=config.n_fantasies, n_samples=config.n_samples, seed=seed
    )  # (n_f, C, S, G)
    u_after = utility(ahead, grid, shares, config.rho_weight).mean(axis=0)  # (C,)
    mean, std = surrogate.predict(X_c)
    noise = max(float(surrogate.run_noise_variance(r)), 0.0)
    prob_map = {lab: float(p) for lab, p in zip(LABELS, probs, strict=True)}
    return [
        Candidate(
            setting=setting,
            rho=plan.rho,
            budget=plan.budget,
            plan=plan,
            gain=max(0.0, u_now - float(u_after[i])),
            cost=plan.flops.total,
            mean=float(mean[i]),
            std=float(std[i]),
            probabilities=prob_map,
            note=note,
            run_std=math.sqrt(float(std[i]) ** 2 + noise),
        )
        for i, (plan, note) in enumerate(cands)
    ]


def select_batch(
    surrogate: FrontierModel,
    settings: Iterable[Setting],
    q: int,
    *,
    target_budget: float,
    pilot_budget: float,
    config: AcquisitionConfig = AcquisitionConfig(),
    opts: CompileOptions | None = None,
    pending: Sequence[tuple[Setting, float, float, int]] = (),
    recorded: Iterable[RunPlan] = (),
) -> list[Candidate]:
    """Greedy kriging-believer batch of up to ``q`` candidates across ``settings``.

    ``pending`` lists (setting, rho, budget, mu) of runs proposed but not yet recorded; the
    surrogate is conditioned on its own predictions there before scoring. ``recorded``
    plans are not proposed again (callers add the pending runs' plans to it: ``pending``
    carries no plan); the candidate rho design shifts by
    the golden ratio with every recorded run of a setting, so later batches look between
    earlier candidates.
    """
    budgets = fidelity_ladder(pilot_budget, target_budget, config.n_fidelities)
    rec = list(recorded)
    done = frozenset(plan_key(p) for p in rec)
    per_setting = {s: sum(1 for p in rec if (p.model, p.reward) == s) for s in settings}
    shift = {s: (0.5 + 0.6180339887 * per_setting[s]) % 1.0 for s in per_setting}
    model = surrogate
    if pending:
        Xp = np.concatenate([model.encode(s.model, s.reward, [r], b, reuse=[mu])
                             for s, r, b, mu in pending])
        model = model.condition_on(Xp, model.predict(Xp)[0])
    def score(m: FrontierModel, s: Setting) -> list[Candidate]:
        return score_setting(m, s, target_budget, budgets, config, opts, done, shift[s])

    scores = {s: score(model, s) for s in per_setting}
    chosen: list[Candidate] = []
    taken: set[tuple[Setting, float, float]] = set()
    while len(chosen) < q:
        pool = [c for cs in scores.values() for c in cs if (c.setting, round(c.rho, 4), c.budget) not in taken]
        if not pool:
            break
        best = max(pool, key=lambda c: (c.value(pilot_budget, config.cost_power), c.std / math.sqrt(c.cost)))
        chosen.append(best)
        taken.add((best.setting, round(best.rho, 4), best.budget))
        x = model.encode(best.setting.model, best.setting.reward, [best.rho], best.cost,
                         reuse=[best.plan.num_iterations])
        model = model.condition_on(x, [best.mean])
        if len(chosen) < q:
            scores[best.setting] = score(model, best.setting)
    return chosen
