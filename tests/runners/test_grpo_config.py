"""The GRPOConfig a plan compiles to: the knobs the FLOP accounting and the failure
detection rely on."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from planner.compiler import compile_plan
from planner.errors import ConfigError
from runners.grpo.run import grpo_config


def test_config_follows_the_plan_and_lets_nan_losses_through(tmp_path: Path) -> None:
    plan = compile_plan("tiny-s", "sparse", 0.85, 4e10)
    cfg = grpo_config(plan, device="cpu", seed=3, learning_rate=1e-3, output_dir=str(tmp_path))
    assert cfg.num_generations == plan.completions_per_prompt
    assert cfg.num_iterations == plan.num_iterations
    assert cfg.per_device_train_batch_size == plan.prompts_per_round * plan.completions_per_prompt
    assert cfg.beta == plan.beta and cfg.lr_scheduler_type == "constant"
    assert cfg.bf16 is False and cfg.use_cpu is True
    # A NaN step loss must reach the log (transformers would log the running mean instead)
    # for the run to fail as kind "nan" at that step.
    assert cfg.logging_nan_inf_filter is False and cfg.logging_steps == 1


def test_micro_batches_take_the_fewest_from_the_asked_count_up_that_split_the_round(tmp_path: Path) -> None:
    # A race compiles its plans round by round: an exact count that did not divide one
    # stopped the race mid-way. The option is a memory bound, so more micro-batches do.
    from runners.grpo.run import micro_batch_steps

    for rho, budget in ((0.85, 4e10), (0.5, 1e11), (0.3, 4e10), (0.7, 2e11)):
        plan = compile_plan("tiny-s", "sparse", rho, budget)
        rows = plan.prompts_per_round * plan.completions_per_prompt
        kept = plan.prompts_per_round * plan.completions_kept
        most = math.gcd(rows, kept)
        for asked in range(1, most + 1):
            steps = micro_batch_steps(plan, asked)
            assert steps >= asked and rows % steps == 0 and kept % steps == 0
            assert not any(rows % d == 0 and kept % d == 0 for d in range(asked, steps))  # the fewest
        assert micro_batch_steps(plan, most + 1) == most  # none from it up splits the round: the most that do
    plan = compile_plan("tiny-s", "sparse", 0.85, 4e10)
    rows = plan.prompts_per_round * plan.completions_per_prompt
    kept = plan.prompts_per_round * plan.completions_kept
    asked = next(k for k in range(2, math.gcd(rows, kept)) if rows % k or kept % k)
    cfg = grpo_config(plan, device="cpu", seed=0, learning_rate=1e-3, micro_batches=asked, output_dir=str(tmp_path))
    steps = micro_batch_steps(plan, asked)
    assert steps > asked and cfg.steps_per_generation == cfg.gradient_accumulation_steps == steps
    assert cfg.per_device_train_batch_size * steps == rows
    with pytest.raises(ConfigError, match=r"micro_batches: must be a positive integer, got 0"):
        micro_batch_steps(plan, 0)
    # A 7b round of one prompt, 63 generated and 4 kept: 1 is all that splits it. A refusal
    # ("give at most 1") stopped a race that the option applies to as a whole.
    plan = compile_plan("qwen2.5-7b", "sparse", 0.311, 1e15)
    assert (plan.prompts_per_round, plan.completions_per_prompt, plan.completions_kept) == (1, 63, 4)
    cfg = grpo_config(plan, device="cpu", seed=0, learning_rate=1e-3, micro_batches=4, output_dir=str(tmp_path))
    assert cfg.steps_per_generation == 1 and cfg.per_device_train_batch_size == 63


def test_vllm_runs_compute_old_logprobs_only_where_the_plan_costs_them(tmp_path: Path) -> None:
    """TRL's default importance-sampling correction for vLLM runs old log-probs every round:
    at mu = 1 an uncosted forward per kept completion (about 40% more learning FLOPs)."""
    plan = compile_plan("tiny-s", "sparse", 0.5, 4e10)
    cfg = grpo_config(plan, device="cpu", seed=0, learning_rate=1e-3, use_vllm=True, output_dir=str(tmp_path))
    assert cfg.use_vllm is True and cfg.vllm_importance_sampling_correction is False
