"""``RaceGRPOTrainer``: TRL's ``GRPOTrainer`` with the two hooks the compute planner needs.

1. **Max-variance down-sampling** (lower rho): generate ``G`` completions per prompt
   (``args.num_generations``), score all of them, keep the ``K`` with the largest reward
   variance per group (:mod:`runners.grpo.downsample`), and run old/reference log-probs,
   advantages and the update on the ``K`` only -- as the budget compiler assumes.
2. **Budget-sized rounds**: before a rollout batch is generated, ``round_sizer(groups)``
   may shrink it to fewer prompt groups, so the last round of a run is partial and the
   run lands on its FLOP budget instead of a whole round past it.

TRL 1.16 computes log-probs *before* rewards inside ``_generate_and_score_completions``
and offers no hook in between, so the down-sampling sits at the end of ``_generate``
(after generation, before anything else): it scores the completions there, then trims
the lists the caller holds *in place* (``inputs``/``prompts``) and hands back the cached
rewards of the kept rows from ``_calculate_rewards``. Everything private this touches is
listed in :mod:`runners.grpo.compat` and checked against the tested TRL range at init.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trl import GRPOTrainer

from runners.grpo.compat import check_trl_version
from runners.grpo.downsample import max_variance_indices

if TYPE_CHECKING:
    from torch import nn
    from trl import GRPOConfig

__all__ = ["RaceGRPOTrainer"]


class RaceGRPOTrainer(GRPOTrainer):
    """GRPO with max-variance down-sampling (``completions_kept`` < ``num_generations``) and
    optional budget-sized rounds (``round_sizer``). ``meter`` (a :class:`runners.meter.FlopMeter`)
    gets the wall time of generation and reward scoring, and the FLOPs of vLLM generation,
    which its model hooks cannot see."""

    # Typed by Trainer and TRL for before their __init__ (None: not set yet); set after it.
    model: nn.Module
    args: GRPOConfig
    num_generations: int

    def __init__(
        self,
        *args: Any,
        completions_kept: int | None = None,
        round_sizer: Callable[[int, int], int] | None = None,
        meter: Any = None,
        **kwargs: Any,
    ) -> None:
        check_trl_version()
        config = kwargs.get("args")
        generated = int(getattr(config, "num_generations", 0) or 0)
        kept = generated if completions_kept is None else int(completions_kept)
        # Checked before TRL loads anything: a bad K fails in microseconds.
        if generated and not 2 <= kept <= generated:
            raise ValueError(f"completions_kept must be in [2, num_generations={generated}], got {kept}")
        super().__init__(*args, **kwargs)
        self.completions_generated = int(self.num_generations)
        kept = self.completions_generated if completions_kept is None else int(completions_kept)
        if kept < self.completions_generated and (self.tools or self.rollout_func is not None):
            raise ValueError("down-sampling is not supported together with tools or rollout_func")
        self.completions_kept = kept
        self.round_sizer = round_sizer
        self.meter = meter
        self.generated_reward_means: list[float] = []  # mean reward over all G per round
        self._round_inputs: list[dict[str, Any]] | None = None
        self._kept_rewards: Any = None

    # ------------------------------------------------------------------ rounds

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if not self.model.training:
            return super()._generate_and_score_completions(inputs)
        g = self.completions_generated
        if self.round_sizer is not None:
            groups = len(inputs) // g
            # Micro-batches split the kept rows evenly: n * K must divide by steps_per_generation.
            steps = int(self.args.steps_per_generation)  # type: ignore[arg-type]  # GRPOConfig.__post_init__ sets it
            multiple = steps // math.gcd(steps, self.completions_kept)
            n = self.round_sizer(groups, multiple)
            inputs = inputs[: max(n, multiple) * g]
        self._round_inputs = inputs
        try:
            return super()._generate_and_score_completions(inputs)
        finally:
            self.num_generations = g
            self._round_inputs = None
            self._kept_rewards = None

    # ------------------------------------------------------------------ hooks into TRL

    def _generate(self, prompts: list[Any]) -> tuple[Any, ...]:
        training = self.model.training and self._round_inputs is not None
        if self.meter is not None and training:
            with self.meter.phase("search"):
                out = super()._generate(prompts)
            if self.use_vllm:  # vLLM runs outside the hooked model: count from the lengths
                self.meter.add_generated_sequences([len(p) for p in out[0]], [len(c) for c in out[1]])
        else:
            out = super()._generate(prompts)
        if not training or self.completions_kept == self.completions_generated:
            return out
        assert self._round_inputs is not None
        completions, completion_ids = out[3], out[1]
        rewards_per_func = self._calculate_rewards(self._round_inputs, prompts, completions, completion_ids)
        weights = self.reward_weights.to(rewards_per_func.device)
        scalar = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
        grouped = scalar.view(-1, self.completions_generated).tolist()
        keep = max_variance_indices(grouped, self.completions_kept)
        # The caller's locals are these very list objects: trim them in place so the
        # log-prob passes, advantages and loss that follow see only the kept rows.
        self._round_inputs[:] = [self._round_inputs[i] for i in keep]
        prompts[:] = [prompts[i] for i in keep]
        self._kept_rewards = rewards_per_func[keep]
        self.num_generations = self.completions_kept  # advantages group rows by K now
        return tuple(_take(x, keep) for x in out)

    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> Any:
        if self._kept_rewards is not None:
            cached, self._kept_rewards = self._kept_rewards, None
            return cached
        if self.meter is not None and self.model.training:
            with self.meter.phase("reward"):
                rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        else:
            rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if self.model.training:
            weights = self.reward_weights.to(rewards.device)
            total = (rewards * weights.unsqueeze(0)).nansum(dim=1)
            self.generated_reward_means.append(float(total.mean()))
        return rewards


def _take(x: Any, keep: list[int]) -> Any:
    """Select rows ``keep`` of one of ``_generate``'s outputs (lists, dicts of lists or None)."""
    if x is None:
        return None
    if isinstance(x, dict):
        return {k: _take(v, keep) if isinstance(v, list) else v for k, v in x.items()}
    if isinstance(x, list):
        return [x[i] for i in keep] if x else x
    return x
