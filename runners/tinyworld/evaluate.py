"""The three evaluation targets in the tiny world, on fixed samples (paired before/after).

* ``native`` -- the training reward, averaged over ``samples`` sampled completions
  (temperature 1, as in GRPO) for each of ``n`` held-out prompts of the *training*
  distribution (split ``heldout``);
* ``pass1``  -- greedy accuracy on ``n`` problems of the ``harder`` split (6-8 steps);
* ``judge``  -- the share of correct worked steps by rule (``task.grade``: local step
  correctness, steps_correct / steps_total) of greedy completions on the held-out prompts;
  it ignores the training reward entirely.

Prompts come from ``make_problems(split, n, seed)`` and sampling from a fixed torch seed
inside a forked RNG (the caller's RNG state is untouched), so two calls with the same
(n, seed) see the same prompts and the same random stream: before/after comparisons are
paired. Reward-model calls made here are removed from ``reward_system``'s meter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

    from runners.rewards import RewardSystemImpl
    from runners.tinyworld.task import Problem


class CausalLM(Protocol):
    """What evaluation uses of a policy: a transformers causal LM, or a peft model around one
    (``torch.nn.Module`` has no ``generate``)."""

    training: bool

    def eval(self) -> Any: ...

    def train(self, mode: bool = True) -> Any: ...

    def generate(self, *args: Any, **kwargs: Any) -> torch.Tensor: ...

__all__ = ["CausalLM", "evaluate_targets", "generate", "policy_report", "success"]

# Generation caps: the longest well-formed completion (6k + 4 tokens) plus slack.
MAX_NEW = {"train": 40, "heldout": 40, "harder": 56}


def _check_sizes(n: int, samples: int, field: str) -> None:
    """Refuse empty evaluations up front: a mean over no completions has no value (0/0),
    and ``success``'s ``max(1, ...)`` would report it as 0.0 success."""
    from planner.errors import ConfigError

    if n < 1:
        raise ConfigError(f"{field}: {n!r} problems per evaluation target; set {field} >= 1 (e.g. 64)")
    if samples < 1:
        raise ConfigError(f"samples: {samples!r} sampled completions per prompt; set samples >= 1 (e.g. 4)")


def generate(
    model: CausalLM,
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    greedy: bool,
    samples: int = 1,
    max_new_tokens: int = 40,
    seed: int = 0,
    batch_size: int = 256,
    device: str = "cpu",
) -> list[list[str]]:
    """Completions for each prompt: ``samples`` each, decoded by
    :func:`~runners.tinyworld.tokenizer.decode_completion` (cut at ``<eos>``, a stray
    special token kept as text so the grade charges it).

    Left-padded batches; sampling is plain temperature-1 sampling (no top-k / top-p),
    under ``torch.manual_seed(seed)`` in a forked RNG.
    """
    import torch

    from runners.tinyworld.tokenizer import decode_completion

    flat = [p for p in prompts for _ in range(1 if greedy else samples)]
    out: list[str] = []
    was_training = model.training
    model.eval()
    with torch.random.fork_rng(devices=[]), torch.inference_mode():
        torch.manual_seed(seed)
        for start in range(0, len(flat), batch_size):
            enc = tokenizer(flat[start : start + batch_size], return_tensors="pt", padding=True,
                            padding_side="left")
            enc = {k: v.to(device) for k, v in enc.items()}
            gen = model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                do_sample=not greedy,
                temperature=1.0 if not greedy else None,
                top_k=0 if not greedy else None,
                top_p=1.0 if not greedy else None,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
            new = gen[:, enc["input_ids"].shape[1] :]
            # Not tokenizer.batch_decode: a copy loaded from disk drops every special token,
            # and one the policy wrote mid-answer would vanish and join its neighbours.
            out.extend(decode_completion(row) for row in new.tolist())
    if was_training:
        model.train()
    k = 1 if greedy else samples
    return [out[i * k : (i + 1) * k] for i in range(len(prompts))]


def success(problems: Sequence[Problem], completions: Sequence[Sequence[str]]) -> float:
    """Share of completions whose final answer is correct."""
    from runners.tinyworld.task import grade

    hits = [grade(p, c).answer_correct for p, cs in zip(problems, completions, strict=True) for c in cs]
    return sum(hits) / max(1, len(hits))


def _judge(problems: Sequence[Problem], completions: Sequence[Sequence[str]]) -> float:
    from runners.tinyworld.task import grade

    shares = [grade(p, c).step_share for p, cs in zip(problems, completions, strict=True) for c in cs]
    return sum(shares) / max(1, len(shares))


def evaluate_targets(
    model: CausalLM,
    tokenizer: Any,
    reward_system: RewardSystemImpl,
    *,
    n: int = 64,
    seed: int = 1234,
    device: str = "cpu",
    samples: int = 4,
) -> dict[str, float]:
    """``{"native", "pass1", "judge"}`` of ``model`` (see the module docstring).

    ``n`` is the trl engine's ``eval_samples``: ConfigError unless ``n`` and ``samples`` are >= 1.
    """
    from runners.tinyworld.task import make_problems

    _check_sizes(n, samples, "eval_samples")

    held = make_problems("heldout", n, seed)
    hard = make_problems("harder", n, seed)
    sampled = generate(model, tokenizer, [p.prompt for p in held], greedy=False, samples=samples,
                       max_new_tokens=MAX_NEW["heldout"], seed=seed, device=device)
    flat_p = [p.prompt for p, cs in zip(held, sampled, strict=True) for _ in cs]
    flat_c = [c for cs in sampled for c in cs]
    n_scored, n_calls = len(reward_system.scored), len(reward_system.calls)
    rewards = reward_system(flat_p, flat_c, answer=[p.answer for p, cs in zip(held, sampled, strict=True)
                                                    for _ in cs])
    # Evaluation is not part of the run's compute: drop what the meter saw here.
    del reward_system.scored[n_scored:], reward_system.calls[n_calls:]
    greedy_held = generate(model, tokenizer, [p.prompt for p in held], greedy=True,
                           max_new_tokens=MAX_NEW["heldout"], device=device)
    greedy_hard = generate(model, tokenizer, [p.prompt for p in hard], greedy=True,
                           max_new_tokens=MAX_NEW["harder"], device=device)
    return {
        "native": sum(rewards) / len(rewards),
        "pass1": success(hard, greedy_hard),
        "judge": _judge(held, greedy_held),
    }


def policy_report(
    model: CausalLM, tokenizer: Any, *, n: int = 256, seed: int = 1234, samples: int = 4,
    device: str = "cpu",
) -> dict[str, float]:
    """Base-policy numbers for ``runners pretrain``: greedy and sampled success on the
    held-out training distribution, greedy and sampled success on the harder split
    (``pass1`` = the greedy one), and the rule judge on greedy held-out completions.
    ConfigError unless ``n`` (``runners pretrain --n``) and ``samples`` are >= 1."""
    from runners.tinyworld.task import make_problems

    _check_sizes(n, samples, "n")

    held = make_problems("heldout", n, seed)
    hard = make_problems("harder", n, seed)
    gh = generate(model, tokenizer, [p.prompt for p in held], greedy=True, device=device,
                  max_new_tokens=MAX_NEW["heldout"])
    sh = generate(model, tokenizer, [p.prompt for p in held], greedy=False, samples=samples, seed=seed,
                  device=device, max_new_tokens=MAX_NEW["heldout"])
    gx = generate(model, tokenizer, [p.prompt for p in hard], greedy=True, device=device,
                  max_new_tokens=MAX_NEW["harder"])
    sx = generate(model, tokenizer, [p.prompt for p in hard], greedy=False, samples=samples, seed=seed,
                  device=device, max_new_tokens=MAX_NEW["harder"])
    return {
        "greedy": success(held, gh),
        "sampled": success(held, sh),
        "pass1": success(hard, gx),
        "pass1_sampled": success(hard, sx),
        "judge": _judge(held, gh),
    }
