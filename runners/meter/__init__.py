"""The FLOP meter: what a GRPO/LoRA run actually spent on search, learning and reward.

:class:`FlopMeter` hooks the policy (and any reward model) and, for every forward pass
that runs, reads the shapes that executed -- padded batch x length, KV-cache length,
positions whose logits were computed, whether a gradient follows, whether the LoRA
adapters were active -- and converts them with the pure accountant
(:mod:`planner.accountant`). Nothing is estimated from plans: a decode step that runs for
a sequence that already finished is counted, because it was computed.

Phase of a policy forward, from what the call itself carries:

* a KV cache passed (``cache``, formerly ``past_key_values``) -> **search** (a ``generate`` prefill or decode step);
* TRL's fused log-prob call (``fused_lm_head=True``) with grad enabled -> **learning**,
  one LoRA training pass (forward + backward, + recompute under activation checkpointing,
  + the chunked LM head's logit recompute in backward);
* the same call without grad -> **learning**, an old-policy (adapters on) or reference
  (adapters off) log-prob forward;
* a forward of a watched reward model -> **reward**.

:class:`FlopMeterCallback` is the public, drop-in ``transformers.TrainerCallback``: add it
to any ``GRPOTrainer`` and the trainer's logs gain ``flops/search``, ``flops/learning``,
``flops/reward``, ``flops/total`` and ``rho``. :class:`BudgetGuard` stops training once the
metered total reaches a budget. See docs/meter.md.

One idea per module: ``hooks`` (FlopMeter), ``callback`` (FlopMeterCallback), ``guard``
(BudgetGuard), ``architecture`` (a live model's config and LoRA adapter, as the
accountant sees them). Import from ``runners.meter``; its ``__all__`` is the stable surface.
"""

from __future__ import annotations

from runners.meter.architecture import architecture_from_config, lora_from_model
from runners.meter.callback import FlopMeterCallback
from runners.meter.guard import BudgetGuard, round_steps
from runners.meter.hooks import LOG_KEYS, TOKEN_KEYS, FlopMeter

__all__ = [
    "LOG_KEYS",
    "TOKEN_KEYS",
    "BudgetGuard",
    "FlopMeter",
    "FlopMeterCallback",
    "architecture_from_config",
    "lora_from_model",
    "round_steps",
]
