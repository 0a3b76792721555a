"""The GRPOConfig a plan compiles to: the knobs the FLOP accounting and the failure
detection rely on."""

from __future__ import annotations

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


def test_micro_batches_must_divide_the_round(tmp_path: Path) -> None:
    plan = compile_plan("tiny-s", "sparse", 0.85, 4e10)
    rows = plan.prompts_per_round * plan.completions_per_prompt
    with pytest.raises(ConfigError, match=r"micro_batches: .* must divide"):
        grpo_config(plan, device="cpu", seed=0, learning_rate=1e-3, micro_batches=rows + 1,
                    output_dir=str(tmp_path))


def test_vllm_runs_compute_old_logprobs_only_where_the_plan_costs_them(tmp_path: Path) -> None:
    """TRL's default importance-sampling correction for vLLM runs old log-probs every round:
    at mu = 1 an uncosted forward per kept completion (about 40% more learning FLOPs)."""
    plan = compile_plan("tiny-s", "sparse", 0.5, 4e10)
    cfg = grpo_config(plan, device="cpu", seed=0, learning_rate=1e-3, use_vllm=True, output_dir=str(tmp_path))
    assert cfg.use_vllm is True and cfg.vllm_importance_sampling_correction is False
