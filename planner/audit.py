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
  ``gradient_accumulation_steps % (steps_per_generation * num_iterations) != 0``, or
  always with ``use_vllm`` and ``vllm_importance_sampling_correction`` (its default: vLLM's
  sampling distribution is corrected against the trained model's);
  reference log-probs iff ``beta > 0``;
* with ``use_vllm`` generation runs merged weights: no adapter FLOPs in search;
* a reward model reads prompt + completion untruncated, past its own context too.

Lengths are the recipe's *expected* ones. HF generate pads a batch to its longest
completion and the train and log-prob passes run on padded micro-batches, so the FLOPs
executed lie between this audit and :attr:`Audit.padded_round`, the same recipe at
``max_completion_length`` (vLLM generates without the padding), as far as completions go:
prompts stay at their expected length, and TRL 1.16 pads them to each batch's longest
(there is no ``max_prompt_length`` any more).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from planner.accountant import FlopsBreakdown, LoRA, generation_flops, reward_model_flops
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
    checkpoint_early_stop: bool = True
    use_vllm: bool = False
    vllm_importance_sampling_correction: bool = True

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
        misaligned = self.gradient_accumulation_steps % (self.steps_per_generation * self.num_iterations) != 0
        return misaligned or (self.use_vllm and self.vllm_importance_sampling_correction)


@dataclass(frozen=True)
class Audit:
    """Where a TRL recipe spends: the planned FLOP split per generation round, per optimizer
    step and per epoch (None without a dataset size), the FLOPs of one completion by
    phase, and the round with every completion at ``max_completion_length``."""
    recipe: Recipe
    per_round: FlopsBreakdown
    per_step: FlopsBreakdown
    per_epoch: FlopsBreakdown | None
    per_completion: dict[str, float]
    padded_round: FlopsBreakdown  # per_round with every completion at max_completion_length


def audit_recipe(recipe: Recipe, policy: Architecture, scorer: Architecture | None) -> Audit:
    """Planned FLOP split of one generation round, one optimizer step and one epoch."""
    if recipe.lora is None:
        raise ConfigError("config: use_peft is false; full fine-tuning is not audited yet, set use_peft: true")
    tokens = recipe.prompt_len + min(recipe.completion_len, recipe.max_completion_length)
    if tokens > policy.max_position_embeddings:
        raise ConfigError(f"config: expected_prompt_length + expected_completion_length = {tokens} tokens exceed "
                          f"{policy.name}'s context of {policy.max_position_embeddings}; shorten them")
    unit = _per_completion(recipe, policy, scorer, min(recipe.completion_len, recipe.max_completion_length))
    per_round = _round(recipe, unit)
    padded = _round(recipe, _per_completion(recipe, policy, scorer, recipe.max_completion_length))
    per_step = per_round.scaled(1.0 / recipe.optimizer_steps_per_round)
    per_epoch = None
    if recipe.dataset_size:
        per_epoch = per_round.scaled(recipe.dataset_size / recipe.prompts_per_round)
    return Audit(recipe, per_round, per_step, per_epoch, unit, padded)


def _per_completion(
    recipe: Recipe, policy: Architecture, scorer: Architecture | None, completion_len: int
) -> dict[str, float]:
    assert recipe.lora is not None
    costs = unit_costs(
        policy,
        scorer,
        prompt_len=recipe.prompt_len,
        completion_len=completion_len,
        lora=recipe.lora,
        gradient_checkpointing=recipe.gradient_checkpointing,
        lm_head_positions=recipe.lm_head_positions,
        checkpoint_early_stop=recipe.checkpoint_early_stop,
    )
    unit = {k: float(v) for k, v in asdict(costs).items()}
    if scorer is not None:
        # TRL tokenises prompt + completion for the reward model without truncation and runs
        # it over every token, past its context too (the compiler's runner keeps the tail).
        unit["score"] = float(reward_model_flops(scorer, 1, recipe.prompt_len + completion_len))
    if recipe.use_vllm:  # TRL syncs merged weights to vLLM: it samples without adapters
        unit["generate"] = float(generation_flops(policy, recipe.prompt_len, completion_len))
    return unit


def _round(recipe: Recipe, unit: dict[str, float]) -> FlopsBreakdown:
    n = recipe.completions_per_round
    learning = n * (
        recipe.num_iterations * unit["train_pass"]
        + (unit["old_logprobs"] if recipe.old_logprobs else 0.0)
        + (unit["ref_logprobs"] if recipe.beta > 0 else 0.0)
    )
    return FlopsBreakdown(search=n * unit["generate"], learning=learning, reward=n * unit["score"])
