"""BudgetGuard: stop a trainer at the round boundary where the metered FLOPs reach a budget."""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from transformers.trainer_callback import TrainerCallback

from runners.meter.hooks import FlopMeter

__all__ = ["BudgetGuard", "round_steps"]


def round_steps(args: Any) -> int:
    """Optimizer steps between step ends that are also GRPO round ends, from a trainer's args.

    A round trains ``steps_per_generation * num_iterations`` micro-batches on one rollout
    batch and a step accumulates ``gradient_accumulation_steps`` of them (TRL 1.16), so the
    two line up every ``lcm(GA, spg * mu)`` micro-batches: ``lcm / GA`` steps. That is mu
    when spg == GA (TRL's default), and 1 for trainers without GRPO's fields.
    """
    ga = int(getattr(args, "gradient_accumulation_steps", 1) or 1)
    spg = getattr(args, "steps_per_generation", None) or ga
    mu = int(getattr(args, "num_iterations", 1) or 1)
    return math.lcm(ga, int(spg) * mu) // ga


def check_budget(budget: Any) -> None:
    """A FLOP budget: a positive finite number (a string, bool or NaN is refused by name)."""
    ok = isinstance(budget, int | float) and not isinstance(budget, bool) and math.isfinite(budget) and budget > 0
    if not ok:
        raise ValueError(f"budget: must be a positive finite number of FLOPs, e.g. 1e17; got {budget!r}")


class BudgetGuard(TrainerCallback):
    """Stops training when the metered total reaches ``budget``, at a round boundary.

    A round is ``steps_per_round`` optimizer steps on one rollout batch (GRPO's
    ``num_iterations`` with one optimizer step per generation batch); stopping inside a
    round would waste its rollouts. :meth:`groups_for_round` sizes the next round from the
    measured cost per prompt group so the run lands on the budget rather than one round
    past it; trainers that cannot shrink a round (a stock ``GRPOTrainer``) stop at the
    boundary closest to the budget instead.

    With ``partial_rounds`` the metered total is also a hard ceiling: a shrunk last round
    that crosses the budget mid-way (it was sized to within half a group) stops at the
    step that crosses it, so such a round may get fewer than mu passes. Without it, a
    round the guard chose to run is finished (the ceiling would cut it after its first
    pass) unless it costs more than half a round past the budget, which only a cost
    estimate gone wrong gives.
    """

    def __init__(
        self,
        meter: FlopMeter,
        budget: float,
        *,
        steps_per_round: int = 1,
        groups_per_round: int | None = None,
        group_cost: float | None = None,
        partial_rounds: bool = False,
    ) -> None:
        check_budget(budget)
        self.meter = meter
        self.budget = float(budget)
        self.steps_per_round = max(1, steps_per_round)
        self.groups_per_round = groups_per_round
        self.initial_group_cost = group_cost
        self.partial_rounds = partial_rounds
        self.stop_reason: str | None = None
        self._round_spent = 0.0
        self._round_groups: int | None = None
        self._recent: deque[float] = deque(maxlen=3)
        self._multiple = 1  # the trainer's round granularity in groups (micro-batches)
        self.rounds: list[int] = []

    def group_cost(self) -> float | None:
        """FLOPs of one prompt group over a whole round, from the last completed rounds."""
        if self._recent:
            return sum(self._recent) / len(self._recent)
        return self.initial_group_cost

    def groups_for_round(self, requested: int, multiple: int = 1) -> int:
        """How many of ``requested`` prompt groups the round about to generate may have."""
        self._multiple = max(1, multiple)
        n = self._affordable(requested, multiple)
        self._round_groups = n
        if n > 0:
            self.rounds.append(n)
        return n

    def _affordable(self, requested: int, multiple: int = 1) -> int:
        remaining = self.budget - self.meter.total
        cost = self.group_cost()
        if remaining <= 0:
            return 0
        if cost is None or cost <= 0:
            return requested
        if not self.partial_rounds:
            # All or nothing: run the round if that lands closer to the budget than stopping.
            return requested if remaining >= requested * cost / 2 else 0
        n = min(requested, round(remaining / cost))
        return (n // multiple) * multiple

    def _ceiling(self, boundary: bool) -> float:
        """Total FLOPs at which training stops at once (see the class docstring)."""
        if boundary or self.partial_rounds:
            return self.budget
        cost = self.group_cost()
        groups = self._round_groups or self.groups_per_round or 1
        return self.budget + (0.5 * groups * cost if cost else 0.0)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._round_spent = self.meter.total

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        boundary = state.global_step % self.steps_per_round == 0
        if self.meter.total >= self._ceiling(boundary):
            self.stop_reason = "budget"
            control.should_training_stop = True
            return
        if not boundary:
            return
        # A round just ended: learn its cost per prompt group, then decide on the next one.
        groups = self._round_groups or self.groups_per_round or 1
        spent = self.meter.total - self._round_spent
        if spent > 0:
            self._recent.append(spent / groups)
        self._round_spent = self.meter.total
        self._round_groups = None
        # At the trainer's granularity: a round it would have to run at `multiple` groups
        # when fewer are affordable would overshoot by the difference.
        if self._affordable(self.groups_per_round or 1, self._multiple) == 0:
            self.stop_reason = "budget"
            control.should_training_stop = True
