"""Pure accountant invariants (no torch): the closed forms against their step-by-step sums.
FlopCounterMode checks of the same formulas: test_accountant_flopcounter.py."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from planner.accountant import (
    LoRA,
    decode_flops,
    generation_flops,
    lora_backward_flops_per_token,
    lora_forward_flops_per_token,
    prefill_flops,
)
from planner.architecture import LINEAR_MODULES
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
