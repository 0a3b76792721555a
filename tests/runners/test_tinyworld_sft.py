"""The policy SFT step: length-sorted micro-batches give the whole batch's loss and gradient."""

from __future__ import annotations

import random
from dataclasses import replace

import torch

from runners.tinyworld.pretrain import policy_config, recipe_for
from runners.tinyworld.sft import MICRO_BATCH, _corpus_problem, _policy_step
from runners.tinyworld.task import FlawModel, sample_solution
from runners.tinyworld.tokenizer import char_ids, special_id


def _batch(n: int) -> tuple[list[list[int]], list[int]]:
    rng = random.Random(7)
    flaws = replace(FlawModel(), slip=0.04)
    seqs, starts = [], []
    for _ in range(n):
        p = _corpus_problem(rng, 0.5)  # many long problems: parts of unequal width
        prompt = [special_id("<bos>"), *char_ids(p.prompt)]
        seqs.append(prompt + char_ids(sample_solution(p, rng, flaws)) + [special_id("<eos>")])
        starts.append(len(prompt))
    return seqs, starts


class _Keep:
    """An optimiser/scheduler stand-in that keeps the gradients the step produced."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model, self.grads = model, {}

    def step(self) -> None:
        self.grads = {k: p.grad.clone() for k, p in self.model.named_parameters() if p.grad is not None}

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.model.zero_grad(set_to_none=set_to_none)


def test_micro_batched_step_has_the_whole_batchs_loss_and_gradient() -> None:
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(policy_config("tiny-s"))
    pad = special_id("<pad>")
    seqs, starts = _batch(3 * MICRO_BATCH + 5)  # a ragged last part
    keep = _Keep(model)
    loss = _policy_step(model, seqs, starts, pad, keep, keep)

    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    labels = torch.full_like(ids, -100)
    mask = torch.zeros_like(ids)
    for i, (s, st) in enumerate(zip(seqs, starts, strict=True)):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
        labels[i, st : len(s)] = ids[i, st : len(s)]
    whole = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    whole.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    assert abs(loss - whole.item()) < 1e-5 * whole.item()
    assert keep.grads.keys() == {k for k, p in model.named_parameters() if p.grad is not None}
    for k, p in model.named_parameters():
        assert torch.allclose(keep.grads[k], p.grad, rtol=1e-4, atol=1e-7), k


def test_quick_recipe_batches_split_into_parts() -> None:
    # The saving needs a batch larger than one part (else nothing is cut).
    assert recipe_for("tiny-s", quick=True).batch_size >= 2 * MICRO_BATCH
