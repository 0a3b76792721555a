"""The reward-function plug point: TRL's reward signature, as a Protocol.

``GRPOTrainer(reward_funcs=[f])`` calls ``f(prompts, completions, **kwargs)`` with the
batch's prompts and completions (strings, or message lists for chat data) and the dataset's
other columns as keyword arguments (``answer`` here), and logs ``f.__name__``. Every reward
system of :mod:`runners.rewards` (rules and PRMs) is one; so is a user's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["RewardFunc"]


@runtime_checkable
class RewardFunc(Protocol):
    """A reward per completion, in [0, 1] for the shipped systems: ``(n,) -> list of n floats``."""

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        """Score ``completions`` (one per prompt of ``prompts``); ``kwargs`` carry dataset columns
        (e.g. ``answer``) and TRL's extras."""
        ...
