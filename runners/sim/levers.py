"""What the budget compiler buys at each rho, tabulated once per (model, reward) for speed.

``compile_plan`` costs about a millisecond, far too slow for 10,000 runs a second. It picks
its levers (G, K, mu) from the requested rho alone and then the prompt count
``N = max(1, round(budget / per_prompt_total))``; it only looks further down its ranking
when that N misses the budget by more than 2% (tiny budgets). Its choice is a step
function of the request (:func:`planner.reach.request_map`, exact), so we compile one
request per distinct plan once at an effectively unlimited budget, scale N per budget in
numpy, and call ``compile_plan`` itself (cached) only where N misses the budget, at a
request of the same interval (same ranking). The result equals ``compile_plan(model,
reward, rho, budget)``'s levers for any rho in (0, 1) (a request exactly on one of the
step function's edges, a set of measure zero, may take either neighbour's plan).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike

from planner.compiler import BUDGET_TOLERANCE, compile_plan
from planner.errors import InfeasibleError
from planner.reach import request_map
from planner.schema import RunPlan

__all__ = ["LeverTable", "Levers", "lever_table", "levers_at", "levers_of_plan"]

_UNLIMITED = 1e30  # a budget so large that the first-ranked levers always land it


@dataclass(frozen=True)
class Levers:
    """What a run bought (arrays, one entry per run; NaN where the budget buys nothing).

    ``shares`` has columns (search, learning, reward) of the planned FLOPs.
    """

    rho: np.ndarray
    prompts: np.ndarray
    generated: np.ndarray
    kept: np.ndarray
    iterations: np.ndarray
    shares: np.ndarray


@dataclass(frozen=True)
class LeverTable:
    """Compiled levers of every distinct plan of (model, reward), one per entry of ``grid``
    (a request that compiles to it, sorted), and the map from any request to its entry.

    ``slot`` ``(m,)``: the entry each interval of ``edges`` compiles to (-1: out of reach);
    ``mid`` ``(m,)``: a request inside each interval (same ranking at every budget).
    """

    model: str
    reward: str
    lo: float
    hi: float
    grid: np.ndarray
    rho: np.ndarray
    generated: np.ndarray
    kept: np.ndarray
    iterations: np.ndarray
    per_prompt: np.ndarray  # (n, 3): search, learning, reward FLOPs per prompt
    edges: np.ndarray
    slot: np.ndarray
    mid: np.ndarray

    def interval(self, rho: np.ndarray) -> np.ndarray:
        """The interval of ``edges`` holding each requested rho; InfeasibleError if any is
        out of reach (outside (0, 1), or no plan within the compiler's tolerance)."""
        rho = np.asarray(rho, float)
        j = np.searchsorted(self.edges, rho, side="right") - 1
        j = np.clip(j, 0, len(self.slot) - 1)
        bad = ~np.isfinite(rho) | (rho <= 0) | (rho >= 1) | (self.slot[j] < 0)
        if np.any(bad):
            r = float(rho[bad].flat[0])
            raise InfeasibleError(
                f"rho: {r:.3f} is out of reach for {self.model} with {self.reward} rewards "
                f"(levers reach [{self.lo:.3f}, {self.hi:.3f}])",
                field="rho",
                nearest=min(max(r, self.lo), self.hi) if np.isfinite(r) else None,
            )
        return j

    def index(self, rho: np.ndarray) -> np.ndarray:
        """The entry (of ``grid``) each requested rho compiles to; InfeasibleError if out of reach."""
        return self.slot[self.interval(rho)]


@lru_cache(maxsize=128)
def lever_table(model: str, reward: str) -> LeverTable:
    """Tabulate the compiler's lever choice for every plan a request can reach."""
    rm = request_map(model, reward)
    reps = rm.representatives()
    winners = rm.winner[rm.interval(reps)]
    slot_of = {int(w): i for i, w in enumerate(winners)}
    slot = np.array([slot_of.get(int(w), -1) for w in rm.winner], dtype=np.int64)
    plans = [compile_plan(model, reward, float(r), _UNLIMITED) for r in reps]
    return LeverTable(
        model=model,
        reward=reward,
        lo=float(rm.rho.min()),
        hi=float(rm.rho.max()),
        grid=reps,
        rho=np.array([p.rho for p in plans]),
        generated=np.array([p.completions_per_prompt for p in plans], dtype=float),
        kept=np.array([p.completions_kept for p in plans], dtype=float),
        iterations=np.array([p.num_iterations for p in plans], dtype=float),
        per_prompt=np.array(
            [[p.flops_per_prompt.search, p.flops_per_prompt.learning, p.flops_per_prompt.reward]
             for p in plans]
        ),
        edges=rm.edges,
        slot=slot,
        mid=np.round(rm.midpoints, 9),
    )


@lru_cache(maxsize=65536)
def _compiled(model: str, reward: str, rho: float, budget: float) -> RunPlan | None:
    try:
        return compile_plan(model, reward, rho, budget)
    except InfeasibleError:
        return None


def levers_of_plan(plan: RunPlan) -> Levers:
    """The levers of one compiled plan (arrays of length 1)."""
    f = plan.flops
    tot = f.total or 1.0
    return Levers(
        rho=np.array([plan.rho]),
        prompts=np.array([float(plan.total_prompts)]),
        generated=np.array([float(plan.completions_per_prompt)]),
        kept=np.array([float(plan.completions_kept)]),
        iterations=np.array([float(plan.num_iterations)]),
        shares=np.array([[f.search / tot, f.learning / tot, f.reward / tot]]),
    )


def levers_at(model: str, reward: str, rho: ArrayLike, budget: ArrayLike) -> Levers:
    """Levers ``compile_plan`` picks for each (rho, budget); flat arrays."""
    t = lever_table(model, reward)
    rho, budget = (
        np.ravel(a) for a in np.broadcast_arrays(np.asarray(rho, float), np.asarray(budget, float))
    )
    j = t.interval(rho)
    i = t.slot[j]
    per_prompt = t.per_prompt[i]
    total = per_prompt.sum(axis=-1)
    prompts = np.maximum(1.0, np.rint(budget / total))
    out_rho = t.rho[i].copy()
    g, k, mu = t.generated[i].copy(), t.kept[i].copy(), t.iterations[i].copy()
    shares = per_prompt / total[..., None]
    # Where N misses the budget by > 2% the compiler looks further down its ranking.
    miss = np.abs(prompts * total - budget) > BUDGET_TOLERANCE * budget
    if miss.any():
        # Few distinct (interval, budget) pairs miss; compile each once (cached), at a
        # request inside the interval: the same ranking, so the same fallback.
        pairs, inverse = np.unique(np.stack([j[miss], budget[miss]], axis=1), axis=0,
                                   return_inverse=True)
        fixed = np.full((len(pairs), 8), np.nan)
        for row, (ji, b) in enumerate(pairs):
            plan = _compiled(model, reward, float(t.mid[int(ji)]), float(b))
            if plan is not None:
                one = levers_of_plan(plan)
                fixed[row] = [one.rho[0], one.prompts[0], one.generated[0], one.kept[0],
                              one.iterations[0], *one.shares[0]]
        f = fixed[inverse.ravel()]
        out_rho[miss], prompts[miss], g[miss], k[miss], mu[miss] = f[:, :5].T
        shares[miss] = f[:, 5:]
    return Levers(out_rho, prompts, g, k, mu, shares)
