"""Truth mode: the noise-free frontier of one setting, its argmax rho* and the regime there.

The frontier is defined on the compiler's reachable rho range only (other rho values have
no plan): every plan a request can compile to (one request per plan,
:func:`planner.reach.request_map`) is compiled at the requested budget, simulated without
noise, and reported at the rho its plan actually achieves (requests that compile to the
same plan at this budget are merged). Until 12-03 it took the plans of a 0.005 grid of
requests, which missed many (145 of paper 1.5b prm's 270) and called paper 1.5b prm
update-heavy where a reward-heavy plan is 0.00006 better. The regime is the largest share of C_total at
rho*, labelled by :func:`planner.regime.regime_labels` (search-heavy / update-heavy /
reward-heavy), so the truth and the planner label allocations the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from planner.reach import request_map
from runners.sim.dynamics import learn
from runners.sim.levers import lever_table, levers_at
from runners.sim.simulate import check_target
from runners.sim.world import World, load_world

__all__ = ["COMPONENTS", "Frontier", "frontier", "regime_gap"]

COMPONENTS: tuple[str, ...] = ("search", "learning", "reward")  # column order of ``shares``
# Metric values this close are equal (float noise of a saturated frontier is ~1e-11; the
# smallest true regime gap among the benchmark's settings is 3e-5).
TIE = 1e-9


@dataclass(frozen=True)
class Frontier:
    """A noise-free frontier: ``value[i]`` is the target metric of the plan at ``rho[i]``."""

    world: str
    model: str
    reward: str
    target: str
    budget: float
    rho: np.ndarray
    value: np.ndarray
    shares: np.ndarray  # (n, 3): search, learning, reward shares of C_total

    @property
    def star(self) -> int:
        return int(np.argmax(self.value))

    @property
    def rho_star(self) -> float:
        return float(self.rho[self.star])

    @property
    def value_star(self) -> float:
        return float(self.value[self.star])

    @property
    def shares_star(self) -> dict[str, float]:
        return {c: float(s) for c, s in zip(COMPONENTS, self.shares[self.star], strict=True)}

    @property
    def tied_regimes(self) -> tuple[str, ...]:
        """Every regime whose best allocation is within :data:`TIE` of the optimum: more
        than one where the frontier's top is flat (a budget past every ceiling), and the
        regime there is an argmax tie-break, not an answer."""
        from planner.regime import LABELS, regime_labels

        labels = regime_labels(self.shares)
        top = self.value >= self.value_star - TIE
        return tuple(LABELS[i] for i in sorted(set(labels[top].tolist())))

    @property
    def regime(self) -> str:
        # Imported here: the planner owns the labelling, and nothing else in the sim needs it.
        from planner.regime import LABELS, regime_labels

        return LABELS[int(regime_labels(self.shares[self.star : self.star + 1])[0])]

    def to_json(self) -> dict[str, Any]:
        return {
            "world": self.world,
            "model": self.model,
            "reward": self.reward,
            "target": self.target,
            "budget": self.budget,
            "rho_star": self.rho_star,
            "value_star": self.value_star,
            "regime": self.regime,
            "tied_regimes": list(self.tied_regimes),
            "shares": self.shares_star,
            "frontier": [[float(r), float(v)] for r, v in zip(self.rho, self.value, strict=True)],
        }


def _nearest_feasible_budget(model: str, reward: str, grid: np.ndarray, budget: float) -> float:
    """The cost of the plan nearest ``budget`` (log scale) over ``grid`` (the lever table's
    requests, one per plan; about 40 of them tried), as the compiler names it: small
    budgets take cheaper levers than the table's, so feasibility is not monotone in the
    budget and no table minimum says where it starts."""
    from planner.compiler import compile_plan
    from planner.errors import InfeasibleError

    costs = []
    for r in grid[:: max(1, len(grid) // 40)]:
        try:
            costs.append(compile_plan(model, reward, float(r), budget).flops.total)
        except InfeasibleError as exc:
            if exc.field == "budget" and exc.nearest:
                costs.append(float(exc.nearest))
    return min(costs, key=lambda c: abs(np.log(c / budget)))


def frontier(
    world: World | str | Path | None,
    model: str,
    reward: str,
    budget: float,
    target: str = "native",
) -> Frontier:
    """The noise-free frontier of (model, reward, target) at ``budget`` FLOPs.

    Raises :class:`~planner.errors.InfeasibleError` if the budget buys no run at any rho.
    """
    from planner.errors import InfeasibleError

    check_target(target)
    w = load_world(world)
    table = lever_table(model, reward)
    # One request per plan the compiler can pick at this budget: where the first-ranked
    # levers miss a small budget it walks down its ranking, to plans no unlimited-budget
    # choice names.
    reps = request_map(model, reward, budget=float(budget)).representatives()
    lv = levers_at(model, reward, reps, np.full(reps.shape, float(budget)))
    ok = np.isfinite(lv.prompts)
    if not ok.any():
        near = _nearest_feasible_budget(model, reward, table.grid, float(budget))
        raise InfeasibleError(
            f"budget: {budget:.3g} FLOPs buys no {model}/{reward} run at any rho; the nearest run costs "
            f"{near:.3g} FLOPs (within 2% of it compiles)",
            field="budget", nearest=near,
        )
    values = learn(w, model, reward, lv.prompts[ok], lv.generated[ok], lv.kept[ok],
                   lv.iterations[ok])[target]
    rho, shares = lv.rho[ok], lv.shares[ok]
    # One point per achieved rho: the requests are one per plan already, so this only
    # guards against two plans that achieve the same rho.
    _, first = np.unique(np.round(rho, 12), return_index=True)
    order = first[np.argsort(rho[first])]
    return Frontier(w.name, model, reward, target, float(budget), rho[order], values[order],
                    shares[order])


def regime_gap(f: Frontier) -> float:
    """Metric lost by the best allocation of any other regime than the optimum's (inf if
    the whole frontier is one regime): how decidable the true regime is."""
    from planner.regime import LABELS, regime_labels

    other = regime_labels(f.shares) != LABELS.index(f.regime)
    return float(f.value_star - f.value[other].max()) if other.any() else float("inf")
