"""FlopMeterCallback: the drop-in ``TrainerCallback`` that meters a trainer and logs the split."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

from transformers.trainer_callback import TrainerCallback

from runners.meter.architecture import architecture_from_config, lora_from_model, unwrap
from runners.meter.guard import BudgetGuard, check_budget, round_steps
from runners.meter.hooks import FlopMeter

__all__ = ["FlopMeterCallback"]


class FlopMeterCallback(TrainerCallback):
    """Drop-in callback: meters any (GRPO) trainer's policy and logs the compute allocation.

    ``meter=None`` builds a :class:`FlopMeter` from the model's config and peft adapter at
    ``on_train_begin``. ``reward_models`` are modules whose forwards count as reward FLOPs
    (their config gives the scorer shape). Every log gains :data:`LOG_KEYS`. ``budget``
    adds a :class:`BudgetGuard` on the same meter (``steps_per_round``: optimizer steps
    between round ends, by default read off the trainer's args by
    :func:`~runners.meter.guard.round_steps`). Add it with :meth:`attach` so integrations (W&B, TensorBoard)
    that run before user callbacks see the keys too.
    """

    def __init__(
        self,
        meter: FlopMeter | None = None,
        *,
        reward_models: Sequence[Any] = (),
        scorer_head: tuple[int, ...] = (1,),
        progress: Callable[[FlopMeter, Any], None] | None = None,
        budget: float | None = None,
        steps_per_round: int | None = None,
    ) -> None:
        # Checked here, where the caller passes it (attach), not when train() starts.
        if budget is not None:
            check_budget(budget)
        self.meter = meter
        self.budget = budget
        self.steps_per_round = steps_per_round
        self.guard: BudgetGuard | None = None
        self.reward_models = tuple(reward_models)
        self.scorer_head = scorer_head
        self.progress = progress
        self._step_start: float | None = None
        self._walls_at_step: dict[str, float] = {}
        self.train_wall = 0.0
        self._reference: Any = None

    @classmethod
    def attach(cls, trainer: Any, **kwargs: Any) -> FlopMeterCallback:
        """Create a callback and put it first, ahead of the reporting integrations."""
        cb = cls(**kwargs)
        cb._reference = getattr(trainer, "ref_model", None)  # full fine-tuning with beta > 0 only
        trainer.callback_handler.callbacks.insert(0, cb)
        cb._pause_during_evaluation(trainer)
        return cb

    def _pause_during_evaluation(self, trainer: Any) -> None:
        """Evaluation (``eval_strategy``) generates and scores through the hooked model,
        but spends nothing on the run's allocation: billed, its generation counted as
        search and its loss forwards as log-prob passes (rho and the totals moved), and
        the budget guard stopped training early. No callback event opens an evaluation,
        so the trainer's ``evaluate`` is wrapped (the training loop calls it there)."""
        original = trainer.evaluate

        @functools.wraps(original)
        def evaluate(*args: Any, **kwargs: Any) -> Any:
            meter = self.meter
            if meter is None:
                return original(*args, **kwargs)
            was, meter.enabled = meter.enabled, False
            try:
                return original(*args, **kwargs)
            finally:
                meter.enabled = was

        trainer.evaluate = evaluate

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        scorer = None
        if self.reward_models:
            scorer = architecture_from_config(self.reward_models[0].config, "reward-model", score_head=self.scorer_head)
        if self.meter is None:
            base = unwrap(model)
            self.meter = FlopMeter(architecture_from_config(base.config), lora=lora_from_model(model), scorer=scorer)
        elif self.meter.scorer is None:
            self.meter.scorer = scorer
        # The reward and reference models are watched with the policy, whatever built the
        # meter, and again at each train(): on_train_end's detach drops their hooks too (a
        # meter passed in, or a second train(), billed their forwards nothing).
        fresh = not self.meter.attached
        self.meter.attach(model)
        if fresh:
            for rm in self.reward_models:
                self.meter.watch_scorer(rm)
            if self._reference is not None:
                self.meter.watch_reference(self._reference)
        if self.budget is not None:
            steps = self.steps_per_round or round_steps(args)
            self.guard = BudgetGuard(self.meter, self.budget, steps_per_round=steps)
            self.guard.on_train_begin(args, state, control)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        assert self.meter is not None
        self._step_start = time.perf_counter()
        self._walls_at_step = {k: self.meter.wall.get(k, 0.0) for k in ("search", "reward")}

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        assert self.meter is not None
        if self._step_start is not None:
            step = time.perf_counter() - self._step_start
            self.train_wall += step
            other = sum(self.meter.wall.get(k, 0.0) - v for k, v in self._walls_at_step.items())
            # Backward passes are invisible to forward hooks: learning = the step minus the
            # search and reward time measured inside it.
            self.meter.add_wall("learning", max(0.0, step - other))
        if self.guard is not None:
            self.guard.on_step_end(args, state, control)
        if self.progress is not None:
            self.progress(self.meter, state)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if self.meter is None or logs is None:
            return
        values = self.meter.log_dict()
        logs.update(values)
        # Trainer.log appended a copy of `logs` to the history before calling us.
        if state.log_history and state.log_history[-1] is not logs:
            state.log_history[-1].update(values)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.meter is not None:
            self.meter.detach()
