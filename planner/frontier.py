"""Frontiers of settings: rho grids, planned allocation shares, credible bands, regime calls.

The glue between the surrogate (which knows nothing of the compiler) and the pure regime
logic (:mod:`planner.regime`). A *setting* here is (model, reward); the target metric
lives in the surrogate and the budget is an argument.

Heavy imports (torch via ``surrogate``) happen only when a surrogate is passed in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.compiler import (
    RHO_DIGITS,
    CompileOptions,
    achievable_rho_range,
    compile_plan,
    per_completion,
)
from planner.errors import ConfigError, RaceError
from planner.regime import RegimeCall, classify, shares_for_rho
from planner.registry import get_model, get_reward

__all__ = [
    "AT_BUDGET_RATIO",
    "RHO_STAR_SUPPORT",
    "FrontierBand",
    "FrontierModel",
    "Setting",
    "allocation_shares",
    "at_budget",
    "classify_setting",
    "frontier_band",
    "reuse_at",
    "reward_fraction",
    "rho_grid",
    "runs_at_rho_star",
]

# How near a run's rho a grid point counts as measured: rho* is held to such points.
RHO_STAR_SUPPORT = 0.05
_Z = {0.5: 0.6744897501960817, 0.9: 1.6448536269514722}  # central-interval normal quantiles


@runtime_checkable
class FrontierModel(Protocol):
    """The surrogate plug point: what the planner asks of a *fitted* model of one target.

    :class:`surrogate.FrontierSurrogate` is the shipped one (``fit(records)`` returns it).
    ``X`` rows are the model's own feature encoding ``(n, d)``, made by :meth:`encode`;
    ``model`` is a registry name (or a parameter count), ``budget`` in FLOPs, ``reuse`` the
    update passes per rollout of each row. Optional extras the planner reads when present:
    ``noise_source(reward) -> str`` and ``data_.X`` (the fitted rows).
    """

    target: str

    def encode(
        self, model: str | float, reward: str, rho: ArrayLike, budget: ArrayLike, reuse: ArrayLike | None = None
    ) -> NDArray[np.float64]:
        """Feature rows ``(n, d)`` for one setting at rho ``(n,)`` and budget (scalar or ``(n,)``)."""
        ...

    def predict(
        self, X: ArrayLike, observation_noise: bool = False
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Posterior mean and std ``(n,)`` at ``X`` ``(n, d)`` (with one run's noise if asked)."""
        ...

    def frontier(
        self, model: str | float, reward: str, budget: float, rho_grid: ArrayLike
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Posterior mean and std ``(G,)`` of one setting's frontier on ``rho_grid`` ``(G,)``."""
        ...

    def sample_frontier(
        self, model: str | float, reward: str, budget: float, rho_grid: ArrayLike, n_samples: int = 256,
        seed: int = 0,
    ) -> NDArray[np.float64]:
        """Joint posterior sample paths ``(n_samples, G)`` of one setting's frontier."""
        ...

    def lookahead_samples(
        self, X_candidates: ArrayLike, X_grid: ArrayLike, n_fantasies: int = 8, n_samples: int = 128,
        seed: int = 0,
    ) -> NDArray[np.float64]:
        """Frontier samples ``(n_fantasies, C, n_samples, G)`` after a fantasised observation at
        each of ``C`` candidates ``(C, d)``, on the grid rows ``(G, d)``."""
        ...

    def run_noise_variance(self, reward: str | None = None) -> float:
        """Observation-noise variance of one new run of ``reward``, in the target's units."""
        ...

    def condition_on(self, X: ArrayLike, y: ArrayLike) -> FrontierModel:
        """A copy conditioned on observations ``y`` ``(k,)`` at ``X`` ``(k, d)``, not refitted
        (the kriging believer's pending runs)."""
        ...


class Setting(NamedTuple):
    """(policy model, reward system); the planner's unit of decision."""

    model: str
    reward: str

    @property
    def key(self) -> str:
        return f"{self.model}/{self.reward}"


@lru_cache(maxsize=256)
def reward_fraction(model: str, reward: str, opts: CompileOptions | None = None) -> float:
    """reward / (search + reward) FLOPs of any plan of (model, reward).

    Both are paid per *generated* completion (the compiler's per-prompt split is
    ``G * generate`` and ``G * score``), so the fraction is the same at every rho and budget.
    """
    arch = get_model(model)
    unit = per_completion(arch, get_reward(reward), (opts or CompileOptions()).resolve(arch))
    return unit.score / (unit.generate + unit.score)


def rho_grid(model: str, reward: str, n: int = 61, opts: CompileOptions | None = None) -> NDArray[np.float64]:
    """``n`` evenly spaced rho values ``(n,)`` spanning the levers' reachable range, ``n >= 2``
    (both ends of the range)."""
    if not (isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 2):
        raise ConfigError(f"n: grid points, a whole number >= 2 (both ends of the rho range), got {n!r}")
    lo, hi = achievable_rho_range(model, reward, opts)
    return np.linspace(lo, hi, n)


@lru_cache(maxsize=65536)
def _compiled_one(model: str, reward: str, rho: float, budget: float,
                  opts: CompileOptions | None) -> tuple[int, float] | None:
    """(mu, metered rho) of the plan a request for ``rho`` compiles to; None where none does."""
    try:
        plan = compile_plan(model, reward, rho, budget, opts)
    except RaceError:  # infeasible, or not a rho at all: the query is extrapolation anyway
        return None
    return plan.num_iterations, plan.rho


def _compiled(model: str, reward: str, rho: ArrayLike, budget: float,
              opts: CompileOptions | None) -> list[tuple[int, float] | None]:
    # The exact budget: below ~20 prompt groups a 1% change of budget can change the levers
    # (qwen2.5-7b sparse at rho 0.57: mu 2 at 1.13296e16, mu 1 at 1.13e16).
    b = float(budget)
    if not 0 < b < math.inf:
        raise ConfigError(f"budget: FLOPs must be a positive finite number, got {budget!r}")
    get_model(model), get_reward(reward)  # unknown names fail here, not as a fallback below
    return [_compiled_one(model, reward, round(float(r), RHO_DIGITS), b, opts) for r in np.atleast_1d(rho)]


def reuse_at(
    model: str, reward: str, rho: NDArray[np.float64], budget: float, opts: CompileOptions | None = None
) -> NDArray[np.float64]:
    """Update passes per batch (mu) of the plan that a request for each rho ``(G,)`` compiles
    to at ``budget``: the surrogate's ``reuse`` plug, which puts a query by rho on the branch
    of the frontier that the compiler would actually run there (1 where none compiles)."""
    return np.array([c[0] if c else 1 for c in _compiled(model, reward, rho, budget, opts)], dtype=float)


def allocation_shares(
    model: str, reward: str, rho: ArrayLike, opts: CompileOptions | None = None, budget: float | None = None
) -> NDArray[np.float64]:
    """(search, learning, reward) shares ``(G, 3)`` at each rho ``(G,)``.

    With ``budget``, the shares of the plan a request for each rho compiles to there (the
    requested rho's own where none compiles): the levers are discrete, so the plan meters a
    rho up to ``rho_tolerance`` away, and near a regime boundary its largest share can be
    another than the request's (qwen2.5-3b proxy-prm at 1e16: 0.4113 compiles to 0.4065,
    search-heavy). A regime call labels by these, as ``runners truth`` does, so the plan a
    call recommends is of the regime it names. Without, the allocation at rho itself.
    """
    r = np.atleast_1d(np.asarray(rho, dtype=float))
    if budget is not None:
        r = np.array([c[1] if c else x for c, x in zip(_compiled(model, reward, r, budget, opts), r, strict=True)])
    return shares_for_rho(r, reward_fraction(model, reward, opts))


@dataclass(frozen=True)
class FrontierBand:
    """Posterior of one frontier on a rho grid: mean, std and pointwise central credible
    bands of the *expected* metric (observation noise excluded). Arrays are ``(G,)``."""

    model: str
    reward: str
    target: str
    budget: float
    rho: NDArray[np.float64]
    mean: NDArray[np.float64]
    std: NDArray[np.float64]

    def band(self, level: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(lo, hi) of the central ``level`` band, ``0 < level < 1`` (normal quantiles)."""
        if not 0 < level < 1:
            raise ValueError(f"level: a central band's probability lies in (0, 1), got {level!r}")
        z = _Z.get(level)
        if z is None:
            from statistics import NormalDist

            z = NormalDist().inv_cdf(0.5 + level / 2)
        return self.mean - z * self.std, self.mean + z * self.std

    def to_dict(self) -> dict[str, Any]:
        lo50, hi50 = self.band(0.5)
        lo90, hi90 = self.band(0.9)
        return {
            "model": self.model,
            "reward": self.reward,
            "target": self.target,
            "budget": self.budget,
            "rho": self.rho.tolist(),
            "mean": self.mean.tolist(),
            "std": self.std.tolist(),
            "lo50": lo50.tolist(),
            "hi50": hi50.tolist(),
            "lo90": lo90.tolist(),
            "hi90": hi90.tolist(),
        }


def frontier_band(
    surrogate: FrontierModel,
    model: str,
    reward: str,
    budget: float,
    grid: NDArray[np.float64] | None = None,
    opts: CompileOptions | None = None,
) -> FrontierBand:
    """The fitted surrogate's frontier of (model, reward) at ``budget`` with its bands."""
    g = rho_grid(model, reward, opts=opts) if grid is None else np.asarray(grid, dtype=float)
    mean, std = surrogate.frontier(model, reward, budget, g)
    return FrontierBand(model, reward, surrogate.target, float(budget), g, mean, std)


def classify_setting(
    surrogate: FrontierModel,
    model: str,
    reward: str,
    budget: float,
    *,
    grid: NDArray[np.float64] | None = None,
    n_samples: int = 256,
    seed: int = 0,
    level: float = 0.9,
    opts: CompileOptions | None = None,
    support: float = RHO_STAR_SUPPORT,
    shares: NDArray[np.float64] | None = None,
) -> RegimeCall:
    """rho*, its ``level`` credible interval and regime probabilities of one setting at
    ``budget``, from ``n_samples`` joint posterior sample paths of the fitted surrogate.
    ``shares`` ``(G, 3)`` on ``grid``: the allocation at each rho, where the registry does
    not know the setting (the compiler's shares otherwise).

    The regime is the most probable label; ``rho_star`` maximises the posterior mean within
    it over grid points within ``support`` of a run of this setting at the budget
    (:func:`at_budget`; all
    of the regime's grid points when there is none, or with ``support=0``);
    ``extra["rho_star_support"]`` says which."""
    g = rho_grid(model, reward, opts=opts) if grid is None else np.asarray(grid, dtype=float)
    samples = surrogate.sample_frontier(model, reward, budget, g, n_samples=n_samples, seed=seed)
    mean, _ = surrogate.frontier(model, reward, budget, g)
    near = _measured_near(surrogate, model, reward, budget, g, support)
    # rho* is the best posterior mean among allocations measured at (about) this budget
    # when there are any: a maximum of the mean that rests on extrapolation (typically at
    # an end of the range, where the GP reverts to a trend) is not a recommendation.
    shares = allocation_shares(model, reward, g, opts, budget) if shares is None else shares
    call = classify(samples, g, shares, mean=mean,
                    eligible=near if near.any() else None, level=level)
    at = int(np.argmin(np.abs(g - call.rho_star)))
    call.extra["rho_star_support"] = "measured" if near[at] else "posterior-mean"
    call.extra["noise_sd"] = float(np.sqrt(max(surrogate.run_noise_variance(reward), 0.0)))  # the stake's scale
    source = getattr(surrogate, "noise_source", None)
    call.extra["noise_source"] = source(reward) if callable(source) else None
    return call


# A run counts as one at the decision budget within this factor either way: the compiler
# lands a budget within 2%, and a small budget's nearest plans spread around it; a run 10x
# dearer (a race at a larger budget in the same store) measured another frontier and checks
# nothing here. (Ours also counts a run at the budget the compiler raised a target request
# to, which at small budgets can be 2x: RaceStrategy._at_target.)
AT_BUDGET_RATIO = 1.5


def at_budget(run_budget: float, budget: float) -> bool:
    """Whether a run at ``run_budget`` counts as measured at the decision ``budget``."""
    return budget / AT_BUDGET_RATIO <= run_budget <= budget * AT_BUDGET_RATIO


def runs_at_rho_star(records: Iterable[Any], model: str, reward: str, budget: float, rho_star: float,
                     target: str) -> int:
    """How many ok runs of (model, reward) that measured ``target`` lie within
    :data:`RHO_STAR_SUPPORT` of ``rho_star`` (metered rho) at ``budget`` or a budget that
    counts as it (:func:`at_budget`): what a held rho* rests on. One is one run's luck,
    which the fit's noise, where no replicate measured it, cannot weigh."""
    return sum(1 for r in records if r.status == "ok" and (r.model, r.reward) == (model, reward)
               and getattr(r.metrics, target) is not None and at_budget(float(r.budget), budget)
               and abs(r.card.rho - rho_star) <= RHO_STAR_SUPPORT)


def _measured_near(
    surrogate: FrontierModel, model: str, reward: str, budget: float, grid: NDArray[np.float64], support: float
) -> NDArray[np.bool_]:
    """Grid points within ``support`` of a training run of the setting at the budget
    (:func:`at_budget`)."""
    X = getattr(getattr(surrogate, "data_", None), "X", None)
    if X is None or support <= 0:
        return np.zeros(grid.shape, dtype=bool)
    row = surrogate.encode(model, reward, [0.5], budget)[0]
    mine = (np.isclose(X[:, 0], row[0]) & (X[:, 1] == row[1])
            & (np.abs(X[:, 3] - row[3]) <= np.log10(AT_BUDGET_RATIO) + 1e-12))
    rhos = X[mine, 2]
    if rhos.size == 0:
        return np.zeros(grid.shape, dtype=bool)
    return np.min(np.abs(grid[:, None] - rhos[None, :]), axis=1) <= support
