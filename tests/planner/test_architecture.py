"""planner.architecture: what a loaded checkpoint is checked against."""

from __future__ import annotations


def test_shape_mismatch_names_the_first_priced_size_that_differs() -> None:
    from types import SimpleNamespace

    from planner.architecture import shape_mismatch
    from planner.registry import get_model

    arch = get_model("qwen2.5-1.5b")
    cfg = {k: getattr(arch, k) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                         "num_key_value_heads", "intermediate_size", "vocab_size")}
    assert shape_mismatch(SimpleNamespace(**cfg), arch) is None
    assert shape_mismatch(SimpleNamespace(**{**cfg, "num_key_value_heads": 12}), arch) == \
        "num_key_value_heads 12 (qwen2.5-1.5b: 2)"
    # No key-value head count is multi-head attention: 12 heads, not the registry's 2.
    assert shape_mismatch(SimpleNamespace(**{**cfg, "num_key_value_heads": None}), arch) == \
        "num_key_value_heads 12 (qwen2.5-1.5b: 2)"
