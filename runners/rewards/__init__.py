"""The five reward systems, as TRL reward functions, for the tiny world and Qwen2.5.

``build_reward_system(name, family)`` returns a :class:`RewardSystemImpl`:

* ``funcs`` -- one :class:`RewardFunc` (TRL's signature ``f(prompts, completions, **kwargs) ->
  list[float]``; pass it as ``GRPOTrainer(reward_funcs=impl.funcs)``);
* ``scorer`` -- the PRM module for ``proxy-prm`` / ``prm`` (None for rule rewards);
* ``scored`` -- ``(batch, padded_seq_len)`` of every scorer forward actually run, and
  ``calls`` -- ``(completions, wall seconds)`` of every reward call: a record of what ran.
  The FLOP meter does not read them: it counts the scorer through its own hooks
  (:meth:`runners.meter.FlopMeter.watch_scorer`) and times reward scoring itself; rule
  rewards cost 0 FLOPs.

Formulas: see :mod:`runners.rewards.rules` (sparse, structured, dense) and
:mod:`runners.rewards.prm` (proxy-prm, prm: the minimum step probability).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.errors import ConfigError
from runners.rewards.func import RewardFunc

if TYPE_CHECKING:
    import torch

__all__ = ["FAMILIES", "RewardFunc", "RewardSystemImpl", "build_reward_system"]

FAMILIES: tuple[str, ...] = ("tiny", "qwen2.5")


@dataclass
class RewardSystemImpl:
    """A reward system ready for TRL, with a record of what it executed (``scored``, ``calls``)."""

    name: str
    family: str
    funcs: list[RewardFunc]
    scorer: torch.nn.Module | None = None
    # Recorded in each run's provenance (runners.grpo.run): which scorer scored it.
    scorer_name: str | None = None
    scored: list[tuple[int, int]] = field(default_factory=list)
    calls: list[tuple[int, float]] = field(default_factory=list)

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kw: Any) -> list[float]:
        """Reward of each completion (the one function's output)."""
        return self.funcs[0](prompts, completions, **kw)

    @property
    def is_rule(self) -> bool:
        return self.scorer is None

    def scored_tokens(self) -> int:
        """Tokens the scorer computed over, padding included (``sum batch * seq_len``)."""
        return sum(b * t for b, t in self.scored)

    def reset(self) -> None:
        """Forget metered calls (e.g. after an evaluation that should not be billed)."""
        self.scored.clear()
        self.calls.clear()


def _timed(fn: RewardFunc, name: str, calls: list[tuple[int, float]]) -> RewardFunc:
    def reward(prompts: Sequence[Any], completions: Sequence[Any], **kw: Any) -> list[float]:
        t0 = time.perf_counter()
        out = fn(prompts, completions, **kw)
        calls.append((len(completions), time.perf_counter() - t0))
        return out

    # TRL logs each reward function under its __name__ (rewards/<name>/mean).
    reward.__name__ = reward.__qualname__ = name.replace("-", "_")
    return reward


def build_reward_system(
    name: str,
    family: str,
    *,
    device: str = "cpu",
    scorer_path: Path | None = None,
) -> RewardSystemImpl:
    """Build reward system ``name`` (sparse|structured|dense|proxy-prm|prm) for ``family``.

    PRM systems load their scorer from ``scorer_path`` if given; else, for the tiny
    family, the cached tiny PRM (trained on first use, see ``ensure_prm``), and for
    qwen2.5 the registry's Hub id (``configs/models/<scorer>.toml`` ``hub_id``).
    """
    from planner.registry import get_reward
    from runners.rewards.rules import RULE_FUNCS, completion_text, prompt_text

    if family not in FAMILIES:
        raise ConfigError(f"family: unknown model family {family!r}; use one of: {', '.join(FAMILIES)}")
    spec = get_reward(name)
    calls: list[tuple[int, float]] = []
    if spec.is_rule:
        return RewardSystemImpl(name, family, [_timed(RULE_FUNCS[(family, name)], name, calls)], calls=calls)

    from planner.registry import get_model
    from runners.rewards import prm

    table = dict(spec.scorers)
    if family not in table:
        raise ConfigError(
            f"reward: {name!r} has no scorer for the {family!r} family; "
            f"add one under [{name}].scorer in configs/rewards.toml"
        )
    arch = get_model(table[family])
    if scorer_path is None:
        if family == "tiny":
            from runners.tinyworld.pretrain import ensure_prm

            scorer_path = ensure_prm(arch.name)  # type: ignore[arg-type]
        elif arch.hub_id:
            scorer_path = Path(arch.hub_id)
        else:
            raise ConfigError(f"scorer_path: {arch.name!r} has no hub_id; pass a local PRM folder")
    model = prm.load_prm(scorer_path, arch, device=device)
    scored: list[tuple[int, int]] = []

    if family == "tiny":

        def score(prompts: Sequence[Any], completions: Sequence[Any], **_: Any) -> list[float]:
            steps = prm.tiny_step_scores(
                model, [prompt_text(p) for p in prompts], [completion_text(c) for c in completions], scored
            )
            return [min(s) for s in steps]

    else:
        from transformers import PreTrainedTokenizerFast

        # tokenizer.json is the whole tokenizer; AutoTokenizer would swap in Qwen2Tokenizer
        # (its own pre-tokenizer) whenever config.json says qwen2.
        tok = PreTrainedTokenizerFast.from_pretrained(str(scorer_path))

        def score(prompts: Sequence[Any], completions: Sequence[Any], **kw: Any) -> list[float]:
            # The problem as the PRM was trained to read it: its own text (the ``question``
            # column), not the policy's prompt with its instruction appended.
            questions = kw.get("question")
            problems = ([str(q) for q in questions][: len(prompts)] if questions is not None
                        else [prompt_text(p) for p in prompts])
            steps = prm.qwen_step_scores(model, tok, problems, [completion_text(c) for c in completions], scored)
            return [min(s) for s in steps]

    return RewardSystemImpl(
        name, family, [_timed(score, name, calls)], scorer=model, scorer_name=arch.name,
        scored=scored, calls=calls,
    )
