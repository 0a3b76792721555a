"""The FLOP accountant: closed-form FLOPs of every phase of a GRPO/LoRA run.

Pure: integers in, integers out; no torch, no files.

Conventions (shared by every function here, and by the tests that check them against
``torch.utils.flop_counter.FlopCounterMode``):

* A matmul of (m x k) by (k x n) costs ``2 m k n`` FLOPs (one multiply + one add).
  Bias adds, norms, activations, softmax and rotary *application* are not counted:
  they are O(d) per token against O(d^2) for the matmuls, and FlopCounterMode does not
  count them either.
* Attention is counted as dense kernels execute it: ``QK^T`` and ``AV`` over the full
  ``q_len x kv_len`` score matrix, no causal halving. Padding is computed, so callers
  pass padded lengths when they meter a real batch.
* Embedding lookups are free. The LM head costs ``2 d V`` per position where logits
  are computed, and nothing elsewhere.
* Frozen base weights get no weight gradients; activation gradients flow through them
  wherever something upstream needs a gradient. LoRA adapters get both.

Sources: Kaplan et al. 2020 (C_fwd ~ 2N per token), Hoffmann et al. 2022 (appendix F:
per-operation counts including attention), Hu et al. 2021 (LoRA), Shao et al. 2024 and
TRL ``GRPOTrainer`` 1.16 (which passes run, on which tokens).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from planner.architecture import LINEAR_MODULES, Architecture, lora_targets_problem

__all__ = [
    "FlopsBreakdown",
    "LoRA",
    "attention_flops",
    "decode_flops",
    "forward_flops",
    "generation_flops",
    "linear_flops_per_token",
    "lm_head_flops_per_token",
    "lora_backward_flops_per_token",
    "lora_forward_flops_per_token",
    "prefill_flops",
    "reward_model_flops",
    "rotary_flops",
    "score_head_flops_per_token",
    "train_pass_flops",
]


@dataclass(frozen=True)
class LoRA:
    """LoRA adapters of rank ``rank`` on the named linear modules of every layer (no
    ``targets``: no adapters, the frozen-model passes the meter prices that way)."""

    rank: int
    targets: tuple[str, ...] = LINEAR_MODULES

    def __post_init__(self) -> None:
        # Checked here, not only in CompileOptions: LoRA(-4) priced a negative adapter, a
        # repeated target doubled its forward but not its backward, and "q_proj" as a bare
        # string was a KeyError on 'q'.
        if isinstance(self.rank, bool) or not isinstance(self.rank, numbers.Integral) or self.rank < 1:
            raise ValueError(f"rank: a positive whole number, got {self.rank!r}")
        if isinstance(self.targets, str) or not isinstance(self.targets, tuple):
            raise ValueError(f"targets: a tuple of module names, e.g. ('q_proj', 'v_proj'), got {self.targets!r}")
        if self.targets and (problem := lora_targets_problem(self.targets)) is not None:
            raise ValueError(f"targets: {problem}")


def _count(value: Any, name: str) -> None:
    """A ValueError unless ``value`` is a whole number >= 0 (a token or sequence count): a
    negative batch gave negative FLOPs and a NaN length a NaN, both without complaint."""
    ok = (isinstance(value, numbers.Integral) and not isinstance(value, bool)) or (
        isinstance(value, float) and value.is_integer())
    if not ok or value < 0:
        raise ValueError(f"{name}: a whole number >= 0, got {value!r}")


@dataclass(frozen=True)
class FlopsBreakdown:
    """FLOPs of one run by component. ``rho = learning / total`` (0 for an empty run).

    Components are finite and non-negative: a NaN total failed ``total > 0`` and read as
    rho 0 (all search), and a negative one gave negative shares and a rho above 1.
    """

    search: float = 0.0
    learning: float = 0.0
    reward: float = 0.0

    def __post_init__(self) -> None:
        for name in ("search", "learning", "reward"):
            v = getattr(self, name)
            if not (0 <= v < math.inf):  # NaN fails too
                raise ValueError(f"{name}: FLOPs must be finite and non-negative, got {v!r}")

    @property
    def total(self) -> float:
        return self.search + self.learning + self.reward

    @property
    def rho(self) -> float:
        return self.learning / self.total if self.total > 0 else 0.0

    def shares(self) -> dict[str, float]:
        t = self.total or 1.0
        return {"search": self.search / t, "learning": self.learning / t, "reward": self.reward / t}

    def __add__(self, other: FlopsBreakdown) -> FlopsBreakdown:
        return FlopsBreakdown(
            self.search + other.search,
            self.learning + other.learning,
            self.reward + other.reward,
        )

    def scaled(self, k: float) -> FlopsBreakdown:
        return FlopsBreakdown(self.search * k, self.learning * k, self.reward * k)

    def as_dict(self) -> dict[str, float]:
        return {
            "search": self.search,
            "learning": self.learning,
            "reward": self.reward,
            "total": self.total,
        }


# --------------------------------------------------------------------------- per token


def linear_flops_per_token(arch: Architecture) -> int:
    """Forward FLOPs of every decoder linear layer for one token.

    ``2 * L * sum(in * out)`` over q, k, v, o, gate, up, down. Units: FLOP/token.
    Assumes no sparsity; GQA shrinks k and v to ``kv_heads * head_dim`` outputs.
    Source: Kaplan et al. 2020, table 1 (the 2N rule, N = non-embedding matmul params).
    """
    return 2 * arch.num_hidden_layers * arch.matmul_params_per_layer


def lm_head_flops_per_token(arch: Architecture) -> int:
    """FLOPs of the LM head for one position whose logits are computed: ``2 d V``.

    Tied or not, the projection is a (d x V) matmul. Source: Kaplan et al. 2020.
    """
    return 2 * arch.hidden_size * arch.vocab_size


def score_head_flops_per_token(arch: Architecture) -> int:
    """FLOPs of a reward model's per-position score head (no LM head).

    ``(h, o)``: ``2 d h + 2 h o`` (Qwen2.5-Math-PRM: Linear(d, d) -> ReLU -> Linear(d, 2));
    ``(o,)``: ``2 d o`` (a value head). Units: FLOP/token.
    """
    if not arch.score_head:
        return 0
    d = arch.hidden_size
    if len(arch.score_head) == 1:
        return 2 * d * arch.score_head[0]
    h, o = arch.score_head
    return 2 * d * h + 2 * h * o


def lora_forward_flops_per_token(arch: Architecture, lora: LoRA) -> int:
    """Forward FLOPs of the LoRA adapters for one token: ``2 L r sum(in + out)``.

    Each adapted module adds ``x A^T`` (in -> r) and ``z B^T`` (r -> out). The scaling
    multiply is elementwise. Source: Hu et al. 2021, eq. 3.
    """
    shapes = arch.linear_shapes()
    return 2 * arch.num_hidden_layers * lora.rank * sum(sum(shapes[m]) for m in lora.targets)


def lora_backward_flops_per_token(
    arch: Architecture, lora: LoRA, *, input_requires_grad: bool = True
) -> int:
    """Backward FLOPs of the LoRA adapters for one token, FLOPs.

    Per adapted module (in, out): grad of B ``2 r out``, grad of z ``2 r out``, grad of A
    ``2 r in``, and grad of x through A ``2 r in`` where x needs a gradient, summed over
    layers: ``sum_m L (4 r out + 4 r in)``, less the x-gradients the leading layers skip
    when the embeddings need none (see :func:`_body_backward`). Source: Hu et al. 2021.
    """
    return _body_backward(arch, lora, input_requires_grad=input_requires_grad).lora


@dataclass(frozen=True)
class _BodyBackward:
    """Per-token backward FLOPs of all decoder layers: activation gradients through the
    frozen linears (``base``) and the adapters (``lora``); ``attention`` is the attention
    backward in units of one layer's attention forward, summed over layers."""

    base: int
    lora: int
    attention: float
    attention_layers: int  # layers whose attention runs a backward at all


def _layer_backward(arch: Architecture, lora: LoRA, x_req: bool) -> tuple[int, int, float, bool]:
    """One decoder layer's backward: ``(base, lora, attention units, output needs grad)``.

    Autograd computes a gradient only where some input requires one. A module's output
    needs a gradient if its input does or it carries an adapter; its frozen weight then
    costs ``2 in out`` per token for ``grad_x`` only when its input needs a gradient, and
    an adapter costs ``4 r out + 2 r in`` (+ ``2 r in`` for ``grad_x``). Attention
    backward is one forward matmul per operand that needs a gradient: ``grad_V``,
    ``grad_P`` (if Q or K), ``grad_Q``, ``grad_K`` (all four: twice the forward).
    """
    shapes = arch.linear_shapes()
    r = lora.rank
    base = ada = 0
    out_req: dict[str, bool] = {}

    def module(m: str, in_req: bool) -> bool:
        nonlocal base, ada
        fan_in, fan_out = shapes[m]
        adapted = m in lora.targets
        if in_req:
            base += 2 * fan_in * fan_out
        if adapted:
            ada += 4 * r * fan_out + 2 * r * fan_in + (2 * r * fan_in if in_req else 0)
        out_req[m] = in_req or adapted
        return out_req[m]

    q, k, v = (module(m, x_req) for m in ("q_proj", "k_proj", "v_proj"))
    attention = (int(v) + int(q or k) + int(q) + int(k)) / 2  # in units of the forward (2 matmuls)
    h1 = module("o_proj", q or k or v) or x_req
    mid = module("gate_proj", h1) | module("up_proj", h1)
    h2 = module("down_proj", mid) or h1
    return base, ada, attention, h2


def _body_backward(arch: Architecture, lora: LoRA, *, input_requires_grad: bool) -> _BodyBackward:
    """:class:`_BodyBackward` of all layers: layers before the first that needs a gradient
    cost nothing, the first may cost part of a layer (only what follows its first adapter),
    every later layer the full backward."""
    full = _layer_backward(arch, lora, True)
    base = ada = layers = 0
    attention = 0.0
    x_req = input_requires_grad
    for i in range(arch.num_hidden_layers):
        if x_req:  # from here on every layer is full
            n = arch.num_hidden_layers - i
            return _BodyBackward(base + n * full[0], ada + n * full[1], attention + n * full[2], layers + n)
        b, a, att, x_req = _layer_backward(arch, lora, False)
        base, ada, attention, layers = base + b, ada + a, attention + att, layers + (att > 0)
    return _BodyBackward(base, ada, attention, layers)


def rotary_flops(arch: Architecture, seq_len: int) -> int:
    """FLOPs of building rotary cos/sin tables for ``seq_len`` positions: ``head_dim * T``.

    Qwen2's rotary embedding computes ``inv_freq (hd/2 x 1) @ positions (1 x T)`` once per
    forward; as a matmul that costs ``2 * hd/2 * T``. transformers 5.24 builds the table
    elementwise instead, which FlopCounterMode counts as 0: this term is the one residual
    between the accountant and FlopCounterMode (< 6e-5 on tiny models, ~1e-8 on Qwen2.5);
    it is kept so that FLOP counts, and so every plan, stay comparable across versions.
    """
    return arch.head_dim * seq_len


def attention_flops(arch: Architecture, q_len: int, kv_len: int) -> int:
    """Forward FLOPs of the attention matmuls of all layers for one sequence.

    ``L * 4 * q_len * kv_len * heads * head_dim``: ``QK^T`` and ``AV`` each cost
    ``2 q_len kv_len head_dim`` per query head (GQA repeats k and v to every query head).
    Full score matrix, no causal halving (what dense and eager kernels execute).
    Source: Hoffmann et al. 2022, appendix F.
    """
    return 4 * arch.num_hidden_layers * q_len * kv_len * arch.q_dim


# --------------------------------------------------------------------------- passes


def forward_flops(
    arch: Architecture,
    batch: int,
    seq_len: int,
    *,
    logit_positions: int | None = None,
    lora: LoRA | None = None,
) -> int:
    """FLOPs of one forward pass over ``batch`` sequences of ``seq_len`` tokens.

    ``B * [T (linear + lora) + attention(T, T) + P * head + rotary(T)]``, where ``P`` is
    the number of positions per sequence whose logits (or scores) are computed
    (default: all ``T``). Reward models use their score head instead of the LM head.
    """
    positions = seq_len if logit_positions is None else logit_positions
    for value, name in ((batch, "batch"), (seq_len, "seq_len"), (positions, "logit_positions")):
        _count(value, name)
    head = score_head_flops_per_token(arch) if arch.score_head else lm_head_flops_per_token(arch)
    per_token = linear_flops_per_token(arch)
    if lora is not None:
        per_token += lora_forward_flops_per_token(arch, lora)
    per_seq = (
        seq_len * per_token
        + attention_flops(arch, seq_len, seq_len)
        + positions * head
        + rotary_flops(arch, seq_len)
    )
    return batch * per_seq


def train_pass_flops(
    arch: Architecture,
    batch: int,
    seq_len: int,
    lora: LoRA,
    *,
    logit_positions: int | None = None,
    gradient_checkpointing: bool = False,
    input_requires_grad: bool | None = None,
    lm_head_recompute: bool = False,
    checkpoint_early_stop: bool = True,
    flash_attention: bool = False,
) -> int:
    """FLOPs of one LoRA training pass (forward + backward of a scalar loss on the logits).

    forward  = ``forward_flops(..., lora)``
    backward = ``B * [T * (linear_grad_x + lora_bwd) + 2 * attention(T, T) + P * head]``
             (``head``: the LM head, or a reward model's score head)
             (+ ``P * head`` if the LM head recomputes its logits in backward, as TRL 1.16's
             chunked log-prob head does)
             (+ the body forward again, ``B * [T (linear + lora) + attention(T, T)]``, with
             activation checkpointing: each decoder layer is recomputed once).

    With non-reentrant checkpointing (transformers 5's default, ``checkpoint_early_stop``)
    the recompute stops once every tensor backward needs exists again: the last matmul of
    each layer is skipped -- ``down_proj`` (frozen weights save no input) or, when
    ``down_proj`` carries an adapter, that adapter's ``B`` (its output is not saved).

    Attention backward is twice its forward (gradients of both matmul operands); fused
    SDPA kernels (flash / memory-efficient, ``flash_attention``) also recompute the score
    matrix ``QK^T`` in backward instead of storing it: 2.5 times the forward.
    ``input_requires_grad`` defaults to ``gradient_checkpointing`` (TRL calls
    ``enable_input_require_grads`` exactly then). Units: FLOPs per pass.
    Source: the 2x-forward backward of Kaplan et al. 2020 minus weight gradients of
    frozen weights (LoRA: Hu et al. 2021).
    """
    if input_requires_grad is None:
        input_requires_grad = gradient_checkpointing
    positions = seq_len if logit_positions is None else logit_positions
    fwd = forward_flops(arch, batch, seq_len, logit_positions=positions, lora=lora)
    # A frozen head's input gradient costs its forward: the score head's, for a reward model.
    head = score_head_flops_per_token(arch) if arch.score_head else lm_head_flops_per_token(arch)
    body = _body_backward(arch, lora, input_requires_grad=input_requires_grad)
    per_layer_attention = attention_flops(arch, seq_len, seq_len) // arch.num_hidden_layers
    # Fused kernels also recompute the score matrix QK^T (half an attention forward) in
    # every layer whose attention runs a backward.
    recomputed = body.attention_layers * per_layer_attention // 2 if flash_attention else 0
    bwd_per_seq = (
        seq_len * (body.base + body.lora)
        + round(body.attention * per_layer_attention)
        + recomputed
        + positions * head * (2 if lm_head_recompute else 1)
    )
    if gradient_checkpointing:
        recompute = linear_flops_per_token(arch) + lora_forward_flops_per_token(arch, lora)
        if checkpoint_early_stop:
            recompute -= 2 * arch.num_hidden_layers * _last_matmul_params(arch, lora)
        bwd_per_seq += seq_len * recompute + attention_flops(arch, seq_len, seq_len)
    return fwd + batch * bwd_per_seq


def _last_matmul_params(arch: Architecture, lora: LoRA) -> int:
    """Parameters of the last matmul of a decoder layer (skipped by early-stopping recompute)."""
    fan_in, fan_out = arch.linear_shapes()["down_proj"]
    return lora.rank * fan_out if "down_proj" in lora.targets else fan_in * fan_out


def prefill_flops(arch: Architecture, prompt_len: int, *, lora: LoRA | None = None) -> int:
    """FLOPs of prefilling one prompt into the KV cache and sampling its first token.

    ``T (linear + lora) + attention(T, T) + rotary(T) + 1 * head``: generation only needs
    the last position's logits (``logits_to_keep=1``).
    """
    return forward_flops(arch, 1, prompt_len, logit_positions=1, lora=lora)


def decode_flops(arch: Architecture, context_len: int, *, lora: LoRA | None = None) -> int:
    """FLOPs of one KV-cached decode step for one sequence whose context (cache + new token)
    has ``context_len`` tokens: ``linear + lora + attention(1, context) + rotary(1) + head``."""
    _count(context_len, "context_len")
    per_token = linear_flops_per_token(arch) + lm_head_flops_per_token(arch)
    if lora is not None:
        per_token += lora_forward_flops_per_token(arch, lora)
    return per_token + attention_flops(arch, 1, context_len) + rotary_flops(arch, 1)


def generation_flops(
    arch: Architecture, prompt_len: int, new_tokens: int, *, lora: LoRA | None = None
) -> int:
    """FLOPs of sampling ``new_tokens`` tokens after a ``prompt_len`` prompt with a KV cache.

    Prefill yields the first token; each of the next ``n - 1`` tokens needs one decode
    step at context ``P + i`` (i = 1..n-1), so attention sums to
    ``4 L q_dim sum_i (P + i)``. Closed form, O(1).
    """
    _count(prompt_len, "prompt_len")
    _count(new_tokens, "new_tokens")
    if new_tokens == 0:
        return 0
    steps = new_tokens - 1
    per_token = linear_flops_per_token(arch) + lm_head_flops_per_token(arch) + rotary_flops(arch, 1)
    if lora is not None:
        per_token += lora_forward_flops_per_token(arch, lora)
    context_sum = steps * prompt_len + steps * (steps + 1) // 2
    decode = steps * per_token + 4 * arch.num_hidden_layers * arch.q_dim * context_sum
    return prefill_flops(arch, prompt_len, lora=lora) + decode


def reward_model_flops(scorer: Architecture, batch: int, seq_len: int) -> int:
    """FLOPs of scoring ``batch`` prompt+completion sequences of ``seq_len`` tokens with a
    (process) reward model: one forward with the score head at every position."""
    return forward_flops(scorer, batch, seq_len)
