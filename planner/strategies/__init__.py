"""Strategies behind one ask/tell interface: ``ours`` and the baselines.

``make_strategy(name, problem, seed, **options)`` builds one by name; :data:`STRATEGIES`
lists the names. Optuna is imported only when an Optuna strategy is built.
"""

from __future__ import annotations

from typing import Any

from planner.errors import ConfigError
from planner.strategies.base import (
    RaceProblem,
    Strategy,
    decision_state,
    flat_prior_call,
    relevant_records,
)

__all__ = [
    "STRATEGIES",
    "RaceProblem",
    "Strategy",
    "decision_state",
    "flat_prior_call",
    "make_strategy",
    "relevant_records",
]

STRATEGIES: tuple[str, ...] = ("ours", "grid", "random", "optuna-tpe", "optuna-gp")


def make_strategy(name: str, problem: RaceProblem, seed: int = 0, **options: Any) -> Strategy:
    """Build the strategy ``name`` (one of :data:`STRATEGIES`) for ``problem``."""
    if name == "ours":
        from planner.strategies.ours import RaceStrategy

        return RaceStrategy(problem, seed, **options)
    if name == "grid":
        from planner.strategies.grid import GridStrategy

        return GridStrategy(problem, seed, **options)
    if name == "random":
        from planner.strategies.grid import RandomStrategy

        return RandomStrategy(problem, seed, **options)
    if name in ("optuna-tpe", "optuna-gp"):
        from planner.strategies.optuna_search import OptunaStrategy

        return OptunaStrategy(problem, seed, sampler=name.split("-")[1], **options)
    raise ConfigError(f"strategy: unknown strategy {name!r}; use one of: {', '.join(STRATEGIES)}")
