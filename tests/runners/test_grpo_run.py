"""What a real run trains and is measured on (runners/grpo/run.py), without training."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.registry import get_model
from runners.grpo.loading import train_rows
from runners.grpo.run import split_held

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.mark.skipif(not (DATA / "gsm8k").is_dir(), reason="../shared/data is absent")
def test_the_held_out_problems_do_not_move_with_the_plans_prompt_count() -> None:
    arch, n_held = get_model("qwen2.5-1.5b"), 16
    few = train_rows(arch, 40 + n_held, 0, dataset="gsm8k", data_path=DATA / "gsm8k")
    many = train_rows(arch, 90 + n_held, 0, dataset="gsm8k", data_path=DATA / "gsm8k")
    held_few, train_few = split_held(few, n_held)
    held_many, train_many = split_held(many, n_held)
    assert held_few == held_many and len(held_few) == n_held  # one test set for every run
    assert len(train_few) == 40 and len(train_many) == 90
    prompts = lambda rows: {str(r["prompt"]) for r in rows}  # noqa: E731
    assert not prompts(held_many) & prompts(train_many)  # never trained on
