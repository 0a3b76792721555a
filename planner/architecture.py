"""Model architectures as the accountant sees them: the shapes of a decoder-only transformer.

The fields mirror a Hugging Face Qwen2 ``config.json``. Pure data, no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from planner.errors import ConfigError

__all__ = ["LINEAR_MODULES", "Architecture", "FamilyDefaults", "architecture_from_hf_config", "is_count", "lora_targets_problem",
           "shape_mismatch"]

# Every linear layer of a Qwen2 decoder block, as peft names them.
LINEAR_MODULES: tuple[str, ...] = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)


def lora_targets_problem(targets: tuple[str, ...]) -> str | None:
    """What is wrong with a list of LoRA-adapted modules, or None: the accountant prices
    each by its shape (an unknown name has none), and a repeat doubled the adapter's
    forward FLOPs but not its backward (membership tests)."""
    if not targets:
        return f"empty; name the adapted modules, e.g. {list(LINEAR_MODULES)}"
    bad = [t for t in targets if t not in LINEAR_MODULES]
    if bad:
        return f"unknown module {bad[0]!r}; use names from {list(LINEAR_MODULES)}"
    if len(set(targets)) != len(targets):
        return f"{list(targets)} names a module twice; list each once"
    return None


@dataclass(frozen=True)
class FamilyDefaults:
    """Run defaults that go with a policy: expected lengths (tokens) and batch shape."""

    prompt_len: int = 256
    completion_len: int = 512
    prompts_per_round: int = 16
    lora_rank: int = 16
    # TRL turns activation checkpointing on by default; on a CPU it only slows runs down.
    gradient_checkpointing: bool = True
    # TRL 1.16's fused LM head scores only completion tokens on GPUs (Triton) and every
    # position elsewhere.
    lm_head_positions: str = "completion"


@dataclass(frozen=True)
class Architecture:
    """A Qwen2-style decoder: GQA attention, SwiGLU MLP, RMSNorm, optional tied embeddings.

    ``score_head`` describes a reward model's per-position head instead of an LM head:
    ``(d_hidden, d_out)`` is Linear(d, d_hidden) -> act -> Linear(d_hidden, d_out) and
    ``(d_out,)`` is a single Linear(d, d_out). Empty for causal LMs.
    """

    name: str
    role: str  # "policy" | "prm"
    family: str  # "tiny" | "qwen2.5"
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int = 32768
    hub_id: str | None = None
    score_head: tuple[int, ...] = ()
    defaults: FamilyDefaults = field(default_factory=FamilyDefaults)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_dim

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in_features, out_features) of each linear module of one decoder layer."""
        d, i = self.hidden_size, self.intermediate_size
        return {
            "q_proj": (d, self.q_dim),
            "k_proj": (d, self.kv_dim),
            "v_proj": (d, self.kv_dim),
            "o_proj": (self.q_dim, d),
            "gate_proj": (d, i),
            "up_proj": (d, i),
            "down_proj": (i, d),
        }

    @property
    def matmul_params_per_layer(self) -> int:
        return sum(a * b for a, b in self.linear_shapes().values())

    @property
    def num_parameters(self) -> int:
        """All parameters (embeddings, norms and biases included), as ``model.num_parameters()``."""
        d = self.hidden_size
        per_layer = self.matmul_params_per_layer + self.q_dim + 2 * self.kv_dim + 2 * d
        emb = self.vocab_size * d
        if self.score_head:
            head = _score_head_params(d, self.score_head)
        else:
            head = 0 if self.tie_word_embeddings else self.vocab_size * d
        return emb + self.num_hidden_layers * per_layer + d + head

    @property
    def non_embedding_parameters(self) -> int:
        """Matmul parameters of the decoder body (the N of the 2N / 6N shortcuts)."""
        return self.num_hidden_layers * self.matmul_params_per_layer


def _score_head_params(d: int, head: tuple[int, ...]) -> int:
    if len(head) == 1:
        return d * head[0] + head[0]
    hidden, out = head
    return d * hidden + hidden + hidden * out + out


_CONFIG_INTS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "intermediate_size", "vocab_size", "max_position_embeddings")


def is_count(v: Any) -> bool:
    """Whether ``v`` is a positive whole number as a config file gives one: an int, not a
    bool (True is an int in Python) and not a float or a numeric string."""
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


# Keys that mark a mixture-of-experts config (Mixtral, Qwen2/3-MoE, DeepSeek), when positive.
_MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size")


# The sizes the accountant and the meter price a token with.
_PRICED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
           "intermediate_size", "vocab_size")


def shape_mismatch(config: Any, arch: Architecture) -> str | None:
    """The first priced size where a loaded model's ``config`` (a transformers config)
    differs from ``arch``, as ``"intermediate_size 768 (tiny-s: 192)"``; None when it has
    ``arch``'s shape. A null ``num_key_value_heads`` is multi-head attention."""
    for key in _PRICED:
        got = getattr(config, key, None)
        if key == "num_key_value_heads" and got is None:
            got = getattr(config, "num_attention_heads", None)
        if got != getattr(arch, key):
            return f"{key} {got} ({arch.name}: {getattr(arch, key)})"
    return None


def architecture_from_hf_config(
    config: Mapping[str, Any], name: str, role: str = "policy", *, family: str | None = None,
    score_head: tuple[int, ...] | None = None, where: str | None = None,
) -> Architecture:
    """An :class:`Architecture` from the fields of a Hugging Face ``config.json`` (Qwen2-style).

    An explicit ``head_dim`` other than ``hidden_size / num_attention_heads`` (Qwen3-style)
    is refused: the accountant derives the head size, and would miscount the attention.
    A mixture-of-experts config (experts or an expert size set) is refused: its MLP is no
    dense SwiGLU of ``intermediate_size``. Every size must be a positive whole number: a hand-edited config is refused, one line
    naming the key, not truncated or divided by. A key set to null counts as absent (as
    transformers reads it: a null ``num_key_value_heads`` is multi-head attention).

    ``family`` defaults to ``qwen2.5`` (``tiny`` for a vocabulary under 1000) and
    ``score_head`` to a PRM's one-logit head for ``role="prm"``. The registry's model paths
    and the runtime FLOP meter both read configs through this one function, and the registry
    checks its model files with it; ``where`` opens each error (``"NAME: config.json"``)."""
    where = where or f"{name}: config.json"
    if not isinstance(config, Mapping):
        raise ConfigError(f"{name}: config.json is not a JSON object; pass a Qwen2-style config")
    missing = [k for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                           "vocab_size") if config.get(k) is None]
    if missing:
        raise ConfigError(f"{where} lacks {missing[0]!r}; pass a Qwen2-style config")
    moe = next((k for k in _MOE_KEYS if is_count(config.get(k))), None)
    if moe is not None:
        # Its intermediate_size is one expert's (Mixtral: two run per token) or a dense size
        # beside the routed and shared experts (Qwen2-MoE): one dense MLP is the wrong cost.
        raise ConfigError(f"{where} {moe} {config[moe]}: a mixture-of-experts model, which the "
                          "accountant (dense Qwen2-style layers) does not cost; pass a dense model's config")
    fields = {"num_key_value_heads": config["num_attention_heads"], "max_position_embeddings": 32768}
    fields |= {k: config[k] for k in _CONFIG_INTS if config.get(k) is not None}
    for k, v in fields.items():
        if not is_count(v):
            raise ConfigError(f"{where} {k} is {v!r}; it must be a positive whole number")
    heads, kv = fields["num_attention_heads"], fields["num_key_value_heads"]
    if heads % kv:
        # GQA shares each k/v head among heads / kv query heads: transformers' repeat_kv
        # fails on any other layout, so no run of it exists to cost.
        raise ConfigError(f"{where} num_key_value_heads {kv} does not divide num_attention_heads "
                          f"{heads}; it must be a divisor of it")
    tied = config.get("tie_word_embeddings", False)
    if tied is not None and not isinstance(tied, bool):
        # bool("false") is True: the LM head went uncounted, without a word.
        raise ConfigError(f"{where} tie_word_embeddings is {tied!r}; it must be true or false (unquoted)")
    head_dim = config.get("head_dim")
    if head_dim is not None:
        derived = fields["hidden_size"] // fields["num_attention_heads"]
        if head_dim != derived:
            raise ConfigError(f"{where} head_dim {head_dim} differs from hidden_size / "
                              f"num_attention_heads = {derived}; only Qwen2-style layouts are costed")
    return Architecture(
        name=name,
        role=role,
        family=family or ("qwen2.5" if fields["vocab_size"] > 1000 else "tiny"),
        tie_word_embeddings=bool(tied),
        score_head=((1,) if role == "prm" else ()) if score_head is None else score_head,
        **fields,
    )
