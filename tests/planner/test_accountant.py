"""Pure accountant invariants (no torch): the closed forms against their step-by-step sums.
FlopCounterMode checks of the same formulas: test_accountant_flopcounter.py."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.accountant import (
    FlopsBreakdown,
    LoRA,
    decode_flops,
    forward_flops,
    generation_flops,
    lora_backward_flops_per_token,
    lora_forward_flops_per_token,
    prefill_flops,
    reward_model_flops,
    score_head_flops_per_token,
    train_pass_flops,
)
from planner.architecture import LINEAR_MODULES, Architecture
from planner.registry import get_model

MODELS = ("tiny-s", "qwen2.5-1.5b", "qwen2.5-7b")


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(MODELS), st.integers(1, 300), st.integers(0, 60), st.booleans())
def test_generation_is_prefill_plus_one_decode_step_per_further_token(
    name: str, prompt: int, new: int, lora_on: bool,
) -> None:
    """The closed form sums decode steps at contexts P + 1 .. P + n - 1 after a prefill
    that yields the first token."""
    arch = get_model(name)
    lora = LoRA(8, LINEAR_MODULES) if lora_on else None
    steps = sum(decode_flops(arch, prompt + i, lora=lora) for i in range(1, new))
    want = 0 if new == 0 else prefill_flops(arch, prompt, lora=lora) + steps
    assert generation_flops(arch, prompt, new, lora=lora) == want


@given(st.sampled_from(MODELS), st.sampled_from([4, 16, 64]))
def test_lora_backward_is_twice_its_forward_when_every_input_needs_a_gradient(name: str, rank: int) -> None:
    """Per adapted (in, out) module the forward is 2 r (in + out) and the backward
    4 r (in + out); layers before the first adapter skip their input gradients."""
    arch = get_model(name)
    lora = LoRA(rank, LINEAR_MODULES)
    fwd = lora_forward_flops_per_token(arch, lora)
    assert lora_backward_flops_per_token(arch, lora) == 2 * fwd
    # Without input gradients, layer 0's q/k/v adapters need no gradient of x: 2 r in each.
    skipped = 3 * 2 * rank * arch.hidden_size
    assert lora_backward_flops_per_token(arch, lora, input_requires_grad=False) == 2 * fwd - skipped


# A toy decoder small enough to count by hand: L 2, d 8, 2 heads of 4 (q_dim 8), one kv head
# (kv_dim 4), I 16, V 10. Per layer the linears hold q 64 + k 32 + v 32 + o 64 + gate 128 +
# up 128 + down 128 = 576 weights, so per token: linears 2 L 576 = 2304, LM head 2 d V = 160,
# rotary head_dim = 4; attention(q, kv) = 4 L q kv q_dim = 64 q kv; LoRA r 2 on all seven
# modules: sum(in + out) = 128, forward 2 L r 128 = 1024.
TOY = Architecture("toy", "policy", "tiny", 8, 2, 2, 1, 16, 10, True)
TOY_LORA = LoRA(2, LINEAR_MODULES)


def test_forward_and_generation_count_by_hand() -> None:
    # B 3, T 5: 3 * (5 * 2304 + 64 * 25 + 5 * 160 + 5 * 4) = 3 * 13940.
    assert forward_flops(TOY, 3, 5) == 41820
    # Adapters on, logits at 2 positions: 3 * (5 * 3328 + 1600 + 2 * 160 + 20).
    assert forward_flops(TOY, 3, 5, logit_positions=2, lora=TOY_LORA) == 55740
    assert prefill_flops(TOY, 5) == 5 * 2304 + 1600 + 160 + 20
    assert decode_flops(TOY, 7) == 2304 + 160 + 64 * 7 + 4
    # Prefill of 5 yields token 1; tokens 2 and 3 decode at contexts 6 and 7.
    assert generation_flops(TOY, 5, 3) == 13300 + (2304 + 160 + 64 * 6 + 4) + 2916
    assert generation_flops(TOY, 5, 1) == 13300 and generation_flops(TOY, 5, 0) == 0


def test_train_pass_counts_by_hand() -> None:
    """B 3, T 5, every position's logits. Forward 3 * (5 * 3328 + 1600 + 800 + 20) = 57180.
    Backward with every input needing a gradient: frozen linears' grad_x 2304, adapters
    4 r (in + out) = 2048 per token, attention twice its forward (3200), the head's grad_x
    once per position: 3 * (5 * 4352 + 3200 + 800) = 77280."""
    full = train_pass_flops(TOY, 3, 5, TOY_LORA, input_requires_grad=True)
    assert full == 57180 + 77280
    # Frozen embeddings: layer 0's q, k, v skip grad_x through their weights (64 + 32 + 32,
    # doubled) and through A (2 r in each, 3 * 32): 3 * 5 * (256 + 96) less.
    assert train_pass_flops(TOY, 3, 5, TOY_LORA) == full - 3 * 5 * (256 + 96)
    # The chunked head recomputes its logits in backward: one more head per position.
    assert train_pass_flops(TOY, 3, 5, TOY_LORA, input_requires_grad=True, lm_head_recompute=True) == full + 3 * 5 * 160
    # Fused attention recomputes QK^T, half of each layer's attention forward (800 / 2).
    assert train_pass_flops(TOY, 3, 5, TOY_LORA, input_requires_grad=True, flash_attention=True) == full + 3 * 2 * 400
    # ... in the layers whose attention runs a backward at all: with the embeddings frozen,
    # layer 0's attention has one only if q, k or v carries an adapter (v alone suffices).
    for targets, layers in ((("v_proj",), 2), (("o_proj",), 1)):
        lora = LoRA(2, targets)
        eager, fused = (train_pass_flops(TOY, 3, 5, lora, flash_attention=f) for f in (False, True))
        assert fused - eager == 3 * layers * 400, targets
    # Checkpointing runs the body forward again (5 * 3328 + 1600 a sequence) less, with the
    # early stop, each layer's last matmul: down_proj's adapter B (r * out = 16) here, its
    # frozen weight (16 * 8) where down_proj has no adapter.
    redo = 3 * (5 * 3328 + 1600)
    assert train_pass_flops(TOY, 3, 5, TOY_LORA, gradient_checkpointing=True, checkpoint_early_stop=False) == full + redo
    assert train_pass_flops(TOY, 3, 5, TOY_LORA, gradient_checkpointing=True) == full + redo - 3 * 5 * 2 * 2 * 16
    qv = LoRA(2, ("q_proj", "v_proj"))
    on, off = (train_pass_flops(TOY, 3, 5, qv, gradient_checkpointing=True, checkpoint_early_stop=e) for e in (True, False))
    assert off - on == 3 * 5 * 2 * 2 * 16 * 8


def test_reward_models_pay_their_score_head_not_an_lm_head() -> None:
    prm = get_model("qwen2.5-math-prm-7b")  # Linear(3584, 3584) -> ReLU -> Linear(3584, 2)
    assert prm.score_head == (3584, 2)
    assert score_head_flops_per_token(prm) == 2 * 3584 * 3584 + 2 * 3584 * 2
    assert score_head_flops_per_token(dataclasses.replace(prm, score_head=(1,))) == 2 * 3584
    assert score_head_flops_per_token(TOY) == 0
    # A (4, 2) head on the toy: 2 * 8 * 4 + 2 * 4 * 2 = 80 a position, in place of the 160 LM head.
    toy_prm = dataclasses.replace(TOY, role="prm", score_head=(4, 2))
    assert reward_model_flops(toy_prm, 3, 5) == 3 * (5 * 2304 + 1600 + 5 * 80 + 20)


def test_a_breakdown_adds_scales_and_splits() -> None:
    b = FlopsBreakdown(1.0, 3.0, 4.0)
    assert b.total == 8.0 and b.rho == 0.375
    assert b.shares() == {"search": 0.125, "learning": 0.375, "reward": 0.5}
    assert b.scaled(2.0) == FlopsBreakdown(2.0, 6.0, 8.0) == b + b
    assert b.as_dict() == {"search": 1.0, "learning": 3.0, "reward": 4.0, "total": 8.0}
    empty = FlopsBreakdown()
    assert empty.rho == 0.0 and empty.shares() == {"search": 0.0, "learning": 0.0, "reward": 0.0}


# A FLOP count is 0 or at least 1: subnormal floats (5e-324) underflow to 0 when scaled by
# 0.5, so "scaling leaves rho" failed on a value no run can spend (a CI draw found it).
_FLOPS = st.one_of(st.just(0.0), st.floats(1.0, 1e22, allow_nan=False, allow_infinity=False))


@settings(max_examples=50, deadline=None)
@given(_FLOPS, _FLOPS, _FLOPS, st.floats(1e-6, 1e6))
def test_shares_are_a_split_of_the_total_and_rho_is_the_learning_share(s: float, lrn: float, r: float, k: float) -> None:
    """Where the regime label comes from: non-negative shares summing to 1 (0 for an empty
    run), the learning share is rho, and neither moves when the run is scaled."""
    b = FlopsBreakdown(s, lrn, r)
    shares = b.shares()
    assert all(0.0 <= v <= 1.0 for v in shares.values())
    if b.total > 0:
        assert sum(shares.values()) == pytest.approx(1.0, rel=1e-12)
        assert shares["learning"] == b.rho
        assert b.scaled(k).rho == pytest.approx(b.rho, rel=1e-12, abs=1e-300)
        assert (b + b).rho == pytest.approx(b.rho, rel=1e-12, abs=1e-300)
    else:
        assert b.rho == 0.0 and set(shares.values()) == {0.0}


@pytest.mark.parametrize("parts", [(math.nan, 1.0, 0.0), (1.0, math.inf, 0.0), (-2.0, 1.0, 0.0), (1.0, 1.0, -0.5)])
def test_a_breakdown_refuses_what_is_no_flop_count(parts: tuple[float, float, float]) -> None:
    # A NaN total failed "total > 0", so its rho read 0.0 (all search) while its shares were
    # NaN; an infinite one gave rho 0 too; a negative component gave negative shares and a
    # rho above 1.
    with pytest.raises(ValueError, match="FLOPs must be finite and non-negative"):
        FlopsBreakdown(*parts)
    with pytest.raises(ValueError, match="FLOPs must be finite and non-negative"):
        FlopsBreakdown(1.0, 1.0, 1.0).scaled(next(x for x in parts if not (math.isfinite(x) and x >= 0)))


@pytest.mark.parametrize(("build", "says"), [
    (lambda: LoRA(-4), "rank: a positive whole number"),
    (lambda: LoRA(0), "rank: a positive whole number"),
    (lambda: LoRA(4.0), "rank: a positive whole number"),  # type: ignore[arg-type]
    (lambda: LoRA(4, "q_proj"), "targets: a tuple of module names"),  # type: ignore[arg-type]
    (lambda: LoRA(4, ("q_proj", "q_proj")), "names a module twice"),
    (lambda: LoRA(4, ("qproj",)), "unknown module 'qproj'"),
])
def test_a_lora_that_would_be_priced_wrong_is_refused(build: Any, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        build()


@pytest.mark.parametrize(("call", "says"), [
    (lambda a: forward_flops(a, -2, 256), "batch: a whole number >= 0"),
    (lambda a: forward_flops(a, 1, float("nan")), "seq_len: a whole number >= 0"),
    (lambda a: forward_flops(a, 1, 64, logit_positions=-1), "logit_positions"),
    (lambda a: generation_flops(a, -100, 10), "prompt_len"),
    (lambda a: generation_flops(a, 10, -5), "new_tokens"),
    (lambda a: decode_flops(a, -3), "context_len"),
    (lambda a: train_pass_flops(a, 1, 64.5, LoRA(4)), "seq_len"),
])
def test_pass_counts_that_are_no_whole_number_are_refused_not_priced(call: Any, says: str) -> None:
    # They returned negative FLOPs or NaN without complaint.
    with pytest.raises(ValueError, match=says):
        call(get_model("tiny-s"))
    assert forward_flops(get_model("tiny-s"), 2, 64.0) == forward_flops(get_model("tiny-s"), 2, 64)
