"""The policy SFT step: length-sorted micro-batches give the whole batch's loss and gradient;
the full recipe keeps its one-pass step and its cache folder."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
import torch

from runners.tinyworld.pretrain import _key, policy_config, recipe_for
from runners.tinyworld.sft import _corpus_problem, _policy_step
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


@pytest.mark.parametrize("micro_batch", [0, 32])
def test_micro_batched_step_has_the_whole_batchs_loss_and_gradient(micro_batch: int) -> None:
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(policy_config("tiny-s"))
    pad = special_id("<pad>")
    seqs, starts = _batch(3 * 32 + 5)  # a ragged last part
    keep = _Keep(model)
    loss = _policy_step(model, seqs, starts, pad, keep, keep, micro_batch)

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
        if micro_batch:
            assert torch.allclose(keep.grads[k], p.grad, rtol=1e-4, atol=1e-7), k
        else:  # one pass: bit for bit the step the cached full models were trained with
            assert torch.equal(keep.grads[k], p.grad), k


def test_only_the_quick_policy_recipe_cuts_its_batches() -> None:
    quick = recipe_for("tiny-s", quick=True)
    assert 0 < quick.micro_batch < quick.batch_size  # the saving needs more than one part
    assert recipe_for("tiny-s", quick=False).micro_batch == 0
    assert recipe_for("tiny-prm", quick=True).micro_batch == 0  # PRM steps have no parts


def test_the_full_policys_cache_folder_did_not_move() -> None:
    # The docs' base-policy numbers, the main job's figures and reports/tiny-campaign were
    # measured with the policy in this folder; the copy skill emerges late in its training,
    # so even a rounding-level change to it gives another (weaker) policy. Change this name
    # only with a new WORLD_VERSION and those numbers re-measured.
    assert _key("tiny-s", 0, False, recipe_for("tiny-s", False)) == "tiny-s-seed0-full-e5160dc5cd"


@pytest.mark.parametrize("value", ["two", "1.5", "0", "-2", ""])
def test_a_bad_race_threads_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """RACE_THREADS=two raised int()'s ValueError traceback out of pretraining (and of
    `runners pretrain`); 0 or -2 silently ran on one thread; an empty value is unset."""
    from planner.errors import ConfigError
    from runners.tinyworld.pretrain import pretrain_threads

    monkeypatch.setenv("RACE_THREADS", value)
    if value == "":
        assert pretrain_threads() == 1
        return
    with pytest.raises(ConfigError, match=r"^RACE_THREADS: .* set a whole number of threads >= 1") as exc:
        pretrain_threads()
    assert "\n" not in str(exc.value)


def test_race_threads_sets_the_pretraining_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    from runners.tinyworld.pretrain import pretrain_threads

    monkeypatch.setenv("RACE_THREADS", " 3 ")
    assert pretrain_threads() == 3
    monkeypatch.delenv("RACE_THREADS")
    assert pretrain_threads() == 1
