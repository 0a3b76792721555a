"""Every dependency on TRL internals lives here, behind the version range it is tested on.

TRL's ``GRPOTrainer`` has no public hook between "rewards are known" and "log-probs are
computed", and its fused log-prob head decides at run time which positions it projects.
The down-sampling trainer (:mod:`runners.grpo.trainer`) and the FLOP meter
(:mod:`runners.meter`) need both, so they go through the helpers below; a TRL outside
``TESTED_TRL`` fails fast with a message that says what to do instead of training wrong.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TESTED_TRL", "check_trl_version", "lm_head_scores_only_labels"]

# Lower bound inclusive, upper exclusive: the private methods overridden in
# runners/grpo/trainer.py (`_generate`, `_generate_and_score_completions`,
# `_calculate_rewards`) have these signatures and call order in TRL 1.16.
TESTED_TRL = ("1.16", "1.17")


def check_trl_version(version: str | None = None) -> str:
    """Return the installed TRL version; raise ``RuntimeError`` when it is outside ``TESTED_TRL``."""
    from packaging.version import Version

    if version is None:
        import trl

        version = str(trl.__version__)
    lo, hi = TESTED_TRL
    if not (Version(lo) <= Version(version) < Version(hi)):
        raise RuntimeError(
            f"trl {version} is not supported by runners.grpo (tested on trl>={lo},<{hi}): its "
            f"GRPOTrainer internals that max-variance down-sampling and the FLOP meter hook into "
            f"may have changed; install 'trl>={lo},<{hi}' or re-validate runners/grpo against it"
        )
    return version


def lm_head_scores_only_labels(device: Any) -> bool:
    """Whether TRL's fused LM head projects only positions with a valid label on ``device``.

    TRL 1.16 (``trl.kernels.chunked_logprob._use_triton``): with Triton on CUDA/XPU it
    gathers the labelled positions; elsewhere it projects every position ``[:, :-1]``
    (padding included) to keep tile shapes static. Falls back to the device-type rule if
    the private helper moved.
    """
    import torch

    dev = torch.device(device) if not isinstance(device, torch.device) else device
    try:
        from trl.kernels.chunked_logprob import _use_triton

        return bool(_use_triton(dev))
    except ImportError:  # pragma: no cover - only outside the tested range
        return dev.type in ("cuda", "xpu")
