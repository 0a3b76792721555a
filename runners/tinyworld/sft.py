"""The SFT loops behind ``ensure_policy`` / ``ensure_prm`` (see ``runners.tinyworld.pretrain``).

Policies: next-token loss on completion tokens of corpus solutions. PRMs: BCE on step
labels at each line's end, plus an auxiliary next-token loss (see :func:`_prm_loss`).
Both: AdamW, linear warm-up then linear decay to 10%, gradient clipping at 1, one thread.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.threads import torch_threads
from runners.tinyworld.pretrain import Recipe, policy_config, pretrain_threads

if TYPE_CHECKING:
    import torch

    from runners.rewards.prm import ProcessRewardModel
    from runners.tinyworld.task import Problem

__all__ = ["train_policy", "train_prm"]


def _corpus_problem(rng: random.Random, harder_share: float) -> Problem:
    from runners.tinyworld.task import MOD, OPS, SPLIT_OPS, problem_from_ops

    lo, hi = SPLIT_OPS["harder" if rng.random() < harder_share else "train"]
    k = rng.randint(lo, hi)
    return problem_from_ops([rng.randrange(MOD) for _ in range(k + 1)], [rng.choice(OPS) for _ in range(k)])


def _lr_lambda(recipe: Recipe) -> Callable[[int], float]:
    def f(step: int) -> float:  # linear warmup, then linear decay to 10%
        if step < recipe.warmup:
            return (step + 1) / recipe.warmup
        frac = (step - recipe.warmup) / max(1, recipe.steps - recipe.warmup)
        return max(0.1, 1.0 - 0.9 * frac)

    return f


@contextmanager
def _bar(total: int, label: str, show: bool) -> Iterator[Callable[[float], None]]:
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    if not show:
        yield lambda loss: None
        return
    cols = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
            TextColumn("loss {task.fields[loss]:.3f}"), TimeElapsedColumn(), TextColumn("ETA"),
            TimeRemainingColumn())
    with Progress(*cols, transient=False) as bar:
        task = bar.add_task(label, total=total, loss=float("nan"))
        yield lambda loss: bar.update(task, advance=1, loss=loss)


def _loss_stats(losses: list[float]) -> dict[str, float]:
    """Mean training loss over the first and the last 10% of steps (at least one step)."""
    k = max(1, len(losses) // 10)
    return {"initial_loss": sum(losses[:k]) / k, "final_loss": sum(losses[-k:]) / k}


def _optimizer(
    model: torch.nn.Module, recipe: Recipe
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(recipe))


def train_policy(name: str, seed: int, recipe: Recipe, out: Path, show: bool) -> dict[str, float]:
    """Pretrain the tiny-world policy ``name`` from scratch on worked solutions (SFT) and save
    it with its tokenizer to ``out``; returns loss statistics, steps and parameter count."""
    import torch
    from transformers import Qwen2ForCausalLM

    from runners.tinyworld.task import FlawModel, sample_solution
    from runners.tinyworld.tokenizer import build_tokenizer, char_ids, special_id

    bos, eos, pad = special_id("<bos>"), special_id("<eos>"), special_id("<pad>")
    flaws = replace(FlawModel(), slip=recipe.slip)
    rng = random.Random(f"pretrain:{name}:{seed}")
    with torch_threads(pretrain_threads()):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(policy_config(name))
        opt, sched = _optimizer(model, recipe)
        model.train()
        losses: list[float] = []
        with _bar(recipe.steps, f"pretrain {name}", show) as tick:
            for _ in range(recipe.steps):
                seqs, starts = [], []
                for _ in range(recipe.batch_size):
                    p = _corpus_problem(rng, recipe.harder_share)
                    prompt = [bos, *char_ids(p.prompt)]
                    seqs.append(prompt + char_ids(sample_solution(p, rng, flaws)) + [eos])
                    starts.append(len(prompt))
                losses.append(_policy_step(model, seqs, starts, pad, opt, sched, recipe.micro_batch))
                tick(losses[-1])
        model.eval()
        model.generation_config.pad_token_id = pad
        model.generation_config.eos_token_id = eos
        model.generation_config.bos_token_id = bos
        model.save_pretrained(out)
        build_tokenizer().save_pretrained(out)
    return {**_loss_stats(losses), "steps": recipe.steps, "parameters": model.num_parameters()}


def _policy_step(
    model: Any, seqs: list[list[int]], starts: list[int], pad: int, opt: Any, sched: Any, micro_batch: int = 0,
) -> float:
    """One optimiser step of next-token loss on the completion tokens (``seqs[i][starts[i]:]``),
    averaged over all of the batch's completion tokens; returns that loss.

    ``micro_batch`` > 0 cuts the batch into length-sorted parts of that many sequences,
    each padded to its own longest: the same gradient up to rounding, at less padding
    (see :class:`~runners.tinyworld.pretrain.Recipe`). 0 runs the batch as one padded pass,
    bit for bit the computation the cached full models were trained with.
    """

    if micro_batch <= 0 or micro_batch >= len(seqs):
        ids, mask, labels = _padded(seqs, starts, pad)
        return _step(model(input_ids=ids, attention_mask=mask, labels=labels).loss, model, opt, sched)
    n_tokens = sum(len(s) - st for s, st in zip(seqs, starts, strict=True))
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    total = 0.0
    for k in range(0, len(order), micro_batch):
        part = order[k : k + micro_batch]
        ids, mask, labels = _padded([seqs[i] for i in part], [starts[i] for i in part], pad)
        # num_items_in_batch: the loss is a sum over this part / the batch's token count, so
        # the parts' gradients add up to the whole batch's token-mean gradient.
        loss = model(input_ids=ids, attention_mask=mask, labels=labels, num_items_in_batch=n_tokens).loss
        loss.backward()
        total += float(loss.item())
    _update(model, opt, sched)
    return total


def _padded(seqs: list[list[int]], starts: list[int], pad: int) -> tuple[Any, Any, Any]:
    """Right-padded ``(ids, attention mask, labels)``, labels only on completion tokens."""
    import torch

    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    labels = torch.full_like(ids, -100)
    mask = torch.zeros_like(ids)
    for i, (s, st) in enumerate(zip(seqs, starts, strict=True)):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
        labels[i, st : len(s)] = ids[i, st : len(s)]  # loss on the completion only
    return ids, mask, labels


def _step(loss: Any, model: Any, opt: Any, sched: Any) -> float:
    """One optimiser step on ``loss`` (gradients clipped to norm 1); returns the loss."""

    loss.backward()
    _update(model, opt, sched)
    return float(loss.item())


def _update(model: Any, opt: Any, sched: Any) -> None:
    """Apply the accumulated gradients (clipped to norm 1), advance the schedule, clear them."""
    import torch

    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)


PrmExample = tuple[list[int], list[int], list[float]]  # token ids, scored positions, labels


def _prm_example(rng: random.Random, recipe: Recipe) -> PrmExample:
    from runners.rewards.prm import tiny_encode
    from runners.tinyworld.task import FlawModel, grade, sample_solution
    from runners.tinyworld.tokenizer import ALPHABET

    p = _corpus_problem(rng, recipe.harder_share)
    text = sample_solution(p, rng, replace(FlawModel(), slip=recipe.slip))
    if rng.random() < recipe.corrupt:  # truncate, or garble one character
        if rng.random() < 0.5:
            text = text[: rng.randrange(len(text))]
        else:
            i = rng.randrange(len(text))
            text = text[:i] + rng.choice(ALPHABET) + text[i + 1 :]
    labels = [float(x) for x in grade(p, text).step_labels]
    ids, pos = tiny_encode(p.prompt, text)
    if len(pos) != len(labels):  # an empty completion: one position, label "wrong"
        labels = [0.0] * len(pos)
    labels = [1.0 - y if rng.random() < recipe.label_noise else y for y in labels]
    return ids, pos, labels


def train_prm(name: str, seed: int, recipe: Recipe, out: Path, show: bool) -> dict[str, float]:
    """Train the tiny-world PRM ``name`` on step-labelled solutions and save it with its
    tokenizer to ``out``; returns loss statistics, steps and held-out step and outcome
    accuracy."""
    import torch

    from planner.registry import get_model
    from runners.rewards.prm import ProcessRewardModel, prm_config
    from runners.tinyworld.tokenizer import build_tokenizer, special_id

    pad = special_id("<pad>")
    rng = random.Random(f"prm:{name}:{seed}")
    with torch_threads(pretrain_threads()):
        torch.manual_seed(seed)
        model = ProcessRewardModel(prm_config(get_model(name), pad_token_id=pad))
        opt, sched = _optimizer(model, recipe)
        model.train()
        losses: list[float] = []
        with _bar(recipe.steps, f"train {name}", show) as tick:
            for _ in range(recipe.steps):
                batch = [_prm_example(rng, recipe) for _ in range(recipe.batch_size)]
                losses.append(_step(_prm_loss(model, batch, pad, recipe.aux_lm), model, opt, sched))
                tick(losses[-1])
        model.eval()
        stats = _prm_heldout(model, seed)
        model.save_pretrained(out)
        build_tokenizer().save_pretrained(out)
    return {**_loss_stats(losses), "steps": recipe.steps, **stats}


def _prm_batch(
    batch: list[PrmExample], pad: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    import torch

    width = max(len(ids) for ids, _, _ in batch)
    ids_t = torch.full((len(batch), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids_t)
    rows, cols, ys = [], [], []
    for i, (ids, pos, labels) in enumerate(batch):
        ids_t[i, : len(ids)] = torch.tensor(ids)
        mask[i, : len(ids)] = 1
        rows += [i] * len(pos)
        cols += pos
        ys += labels
    return ids_t, mask, torch.tensor(rows), torch.tensor(cols), torch.tensor(ys)


def _prm_loss(model: ProcessRewardModel, batch: list[PrmExample], pad: int, aux_lm: float) -> torch.Tensor:
    """BCE on step labels + ``aux_lm`` x next-token loss through the tied embeddings.

    The auxiliary language-model loss is dense (every token, not one label per step), so
    the body learns the arithmetic table and where operands sit far sooner than from the
    step labels alone -- the way real PRMs start from a pretrained LM. It adds no weights:
    logits are ``hidden @ embed_tokens.T``; only the body and the score head are saved.
    """
    from torch.nn import functional as F

    ids, mask, rows, cols, ys = _prm_batch(batch, pad)
    hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
    loss = F.binary_cross_entropy_with_logits(model.score(hidden)[rows, cols, 0], ys)
    if aux_lm > 0:
        lm = hidden[:, :-1] @ model.model.embed_tokens.weight.T
        target = ids[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
        loss = loss + aux_lm * F.cross_entropy(lm.reshape(-1, lm.shape[-1]), target.reshape(-1))
    return loss


def _prm_heldout(model: ProcessRewardModel, seed: int, n: int = 512) -> dict[str, float]:
    """Step-label accuracy (true labels, no noise) and outcome accuracy of the min score."""
    import torch

    from runners.rewards.prm import tiny_step_scores
    from runners.tinyworld.task import FlawModel, grade, make_problems, sample_solution

    rng = random.Random(f"prm-eval:{seed}")
    probs = make_problems("heldout", n, seed + 7)
    texts = [sample_solution(p, rng, replace(FlawModel(), slip=0.08)) for p in probs]
    with torch.inference_mode():
        scores = tiny_step_scores(model, [p.prompt for p in probs], texts, [])
    step_hits = step_n = out_hits = 0
    for p, t, s in zip(probs, texts, scores, strict=True):
        g = grade(p, t)
        step_hits += sum((x > 0.5) == y for x, y in zip(s, g.step_labels, strict=True))
        step_n += len(s)
        out_hits += (min(s) > 0.5) == g.answer_correct
    return {"step_accuracy": step_hits / step_n, "outcome_accuracy": out_hits / n}
