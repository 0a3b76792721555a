"""Hugging Face model configs from registry architectures (one place for the field mapping)."""

from __future__ import annotations

from typing import Any

from planner.architecture import Architecture

__all__ = ["causal_lm", "qwen2_config"]


def qwen2_config(arch: Architecture, **overrides: Any) -> Any:
    """A ``transformers.Qwen2Config`` with ``arch``'s shapes; ``overrides`` win (e.g.
    ``attn_implementation="eager"`` so FlopCounterMode sees attention)."""
    from transformers import Qwen2Config

    fields: dict[str, Any] = {
        "vocab_size": arch.vocab_size,
        "hidden_size": arch.hidden_size,
        "intermediate_size": arch.intermediate_size,
        "num_hidden_layers": arch.num_hidden_layers,
        "num_attention_heads": arch.num_attention_heads,
        "num_key_value_heads": arch.num_key_value_heads,
        "max_position_embeddings": arch.max_position_embeddings,
        "tie_word_embeddings": arch.tie_word_embeddings,
    }
    return Qwen2Config(**{**fields, **overrides})


def causal_lm(arch: Architecture, *, device: str = "meta", **overrides: Any) -> Any:
    """A randomly initialised ``Qwen2ForCausalLM`` shaped like ``arch`` on ``device``.

    On ``"meta"`` it has shapes but no data: a 7B model builds in well under a second and
    ``FlopCounterMode`` counts its passes with no memory. Eager attention by default, since
    torch 2.13 has no FLOP formula for the fused CPU SDPA kernel (it would count 0)."""
    import torch
    from transformers import Qwen2ForCausalLM

    cfg = qwen2_config(arch, **{"attn_implementation": "eager", **overrides})
    with torch.device(device):
        return Qwen2ForCausalLM(cfg)
