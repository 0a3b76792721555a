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


def test_a_mixture_of_experts_config_is_refused_naming_the_key() -> None:
    """A MoE config.json carries a dense-looking intermediate_size too: Mixtral's is each
    expert's, of which two run per token; Qwen2-MoE's is unused beside moe_intermediate_size
    and the shared expert. Read as Qwen2-style dense layers, its MLP FLOPs were costed as one
    dense MLP of intermediate_size, without a word."""
    import pytest

    from planner.architecture import architecture_from_hf_config
    from planner.errors import ConfigError

    dense = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
             "intermediate_size": 256, "vocab_size": 100}
    assert architecture_from_hf_config(dense | {"num_experts": None}, "d").intermediate_size == 256
    for key, extra in (("num_local_experts", {"num_local_experts": 8, "num_experts_per_tok": 2}),  # Mixtral
                       ("num_experts", {"num_experts": 60, "moe_intermediate_size": 1408}),  # Qwen2-MoE
                       ("n_routed_experts", {"n_routed_experts": 64}),  # DeepSeek-V2/V3
                       ("moe_intermediate_size", {"moe_intermediate_size": 1408})):
        with pytest.raises(ConfigError) as err:
            architecture_from_hf_config(dense | extra, "moe")
        assert str(err.value).startswith(f"moe: config.json {key} {extra[key]}: a mixture-of-experts model")
