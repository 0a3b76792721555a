"""Audit an existing GRPO recipe: where does a TRL ``GRPOConfig`` spend its compute?

Pure: a :class:`Recipe` (the TRL knobs that matter for FLOPs, already resolved against
TRL's defaults) plus architectures in, an :class:`Audit` out. Reading YAML/JSON and
TRL's defaults happens in ``planner.recipe`` and ``planner.cli.audit``.

TRL 1.16 semantics (``GRPOConfig`` / ``GRPOTrainer``):

* a generation round produces ``per_device_train_batch_size * steps_per_generation``
  completions per device (``steps_per_generation`` defaults to
  ``gradient_accumulation_steps``), i.e. ``/ num_generations`` prompts;
* each round's batch is trained on ``num_iterations`` times, one micro-batch per step,
  an optimizer step every ``gradient_accumulation_steps`` micro-batches;
* old-policy log-probs cost an extra forward iff
  ``gradient_accumulation_steps % (steps_per_generation * num_iterations) != 0``;
  reference log-probs iff ``beta > 0``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from planner.accountant import FlopsBreakdown, LoRA
from planner.architecture import Architecture
from planner.compiler import unit_costs
from planner.errors import ConfigError

__all__ = ["Audit", "Recipe", "audit_recipe"]


@dataclass(frozen=True)
class Recipe:
    """The FLOP-relevant knobs of a TRL GRPO recipe (TRL defaults already applied)."""

    per_device_train_batch_size: int
    gradient_accumulation_steps: int
    num_generations: int
    steps_per_generation: int
    num_iterations: int
    beta: float
    gradient_checkpointing: bool
    max_completion_length: int
    prompt_len: int
    completion_len: int
    lora: LoRA | None
    world_size: int = 1
    lm_head_positions: str = "completion"
    dataset_size: int | None = None

    @property
    def completions_per_round(self) -> int:
        return self.per_device_train_batch_size * self.steps_per_generation * self.world_size

    @property
    def prompts_per_round(self) -> float:
        return self.completions_per_round / self.num_generations

    @property
    def optimizer_steps_per_round(self) -> float:
        return self.steps_per_generation * self.num_iterations / self.gradient_accumulation_steps

    @property
    def old_logprobs(self) -> bool:
        return self.gradient_accumulation_steps % (self.steps_per_generation * self.num_iterations) != 0


@dataclass(frozen=True)
class Audit:
    recipe: Recipe
    per_round: FlopsBreakdown
    per_step: FlopsBreakdown
    per_epoch: FlopsBreakdown | None
    per_completion: dict[str, float]


def audit_recipe(recipe: Recipe, policy: Architecture, scorer: Architecture | None) -> Audit:
    """Planned FLOP split of one generation round, one optimizer step and one epoch."""
    if recipe.lora is None:
        raise ConfigError("config: use_peft is false; full fine-tuning is not audited yet, set use_peft: true")
    tokens = recipe.prompt_len + min(recipe.completion_len, recipe.max_completion_length)
    if tokens > policy.max_position_embeddings:
        raise ConfigError(f"config: expected_prompt_length + expected_completion_length = {tokens} tokens exceed "
                          f"{policy.name}'s context of {policy.max_position_embeddings}; shorten them")
    costs = unit_costs(
        policy,
        scorer,
        prompt_len=recipe.prompt_len,
        completion_len=min(recipe.completion_len, recipe.max_completion_length),
        lora=recipe.lora,
        gradient_checkpointing=recipe.gradient_checkpointing,
        lm_head_positions=recipe.lm_head_positions,
    )
    unit = {k: float(v) for k, v in asdict(costs).items()}
    n = recipe.completions_per_round
    learning = n * (
        recipe.num_iterations * unit["train_pass"]
        + (unit["old_logprobs"] if recipe.old_logprobs else 0.0)
        + (unit["ref_logprobs"] if recipe.beta > 0 else 0.0)
    )
    per_round = FlopsBreakdown(search=n * unit["generate"], learning=learning, reward=n * unit["score"])
    per_step = per_round.scaled(1.0 / recipe.optimizer_steps_per_round)
    per_epoch = None
    if recipe.dataset_size:
        per_epoch = per_round.scaled(recipe.dataset_size / recipe.prompts_per_round)
    return Audit(recipe, per_round, per_step, per_epoch, unit)
