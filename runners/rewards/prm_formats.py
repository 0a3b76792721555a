"""The input each released math PRM was trained on: token ids and the positions to score.

A PRM scores a step at the token its training put after the step; fed another layout it
still returns numbers, but not the ones its authors measured. Two layouts, from the
checkpoints' own usage code:

* **Qwen2.5-Math-PRM** (``Qwen/Qwen2.5-Math-PRM-7B``, model card "Quick Start"): steps are
  the response's paragraphs (split on blank lines); the conversation
  ``system: "Please reason step by step, and put your final answer within \\boxed{}."``,
  ``user: <problem>``, ``assistant: step1<extra_0>step2<extra_0>...stepN<extra_0>`` goes
  through the tokenizer's chat template (no generation prompt), and the scores are read at
  every ``<extra_0>`` (a two-class head: softmax, class 1).
* **Skywork-o1-Open-PRM** (``SkyworkAI/skywork-o1-prm-inference``,
  ``model_utils/io_utils.prepare_input`` with ``step_token="\\n"``): ``bos + problem +
  "\\n"``, then each line of the response followed by the newline's token, scored there (a
  value head: sigmoid). The reference also scores the newline of a blank line; here a
  blank line is no step and is skipped, as the reduction (the minimum over steps) would
  otherwise charge a step that says nothing.

Which layout a scorer gets is read off its vocabulary: ``<extra_0>`` is Qwen2.5-Math-PRM's
step tag and no other Qwen2.5 tokenizer has it.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["QWEN_PRM_SYSTEM", "QWEN_PRM_TAG", "encode_qwen_prm", "encode_skywork_prm", "prm_encoder"]

#: The system prompt of Qwen2.5-Math-PRM's usage example (also the policy's instruction).
QWEN_PRM_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
QWEN_PRM_TAG = "<extra_0>"


def _paragraphs(completion: str) -> list[str]:
    return [s.strip() for s in re.split(r"\n\s*\n", completion) if s.strip()] or [""]


def _chatml(messages: list[dict[str, str]]) -> str:
    """Qwen2.5's chat template, rendered (what a tokenizer without one is given)."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def encode_qwen_prm(tokenizer: Any, problem: str, completion: str) -> tuple[list[int], list[int]]:
    """``(ids, positions)`` in Qwen2.5-Math-PRM's layout (module doc): the chat template
    applied to system / problem / tagged steps, scored at each :data:`QWEN_PRM_TAG`. A
    tokenizer without a chat template gets Qwen2.5's ChatML written out."""
    tag = tokenizer.convert_tokens_to_ids(QWEN_PRM_TAG)
    messages = [
        {"role": "system", "content": QWEN_PRM_SYSTEM},
        {"role": "user", "content": problem},
        {"role": "assistant", "content": QWEN_PRM_TAG.join(_paragraphs(completion)) + QWEN_PRM_TAG},
    ]
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    else:
        text = _chatml(messages)
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return ids, [i for i, t in enumerate(ids) if t == tag]


def encode_skywork_prm(tokenizer: Any, problem: str, completion: str) -> tuple[list[int], list[int]]:
    """``(ids, positions)`` in Skywork-o1-Open-PRM's layout (module doc): ``bos + problem +
    "\\n"``, then each non-blank line and the newline's token, scored at that token."""
    newline = tokenizer("\n", add_special_tokens=False)["input_ids"][-1]
    ids = list(tokenizer((tokenizer.bos_token or "") + problem + "\n", add_special_tokens=False)["input_ids"])
    positions = []
    for line in completion.split("\n"):
        if not line.strip():
            continue
        ids.extend(tokenizer(line, add_special_tokens=False)["input_ids"])
        ids.append(newline)
        positions.append(len(ids) - 1)
    if not positions:  # an empty response: one step, nothing in it
        ids.append(newline)
        positions.append(len(ids) - 1)
    return ids, positions


def prm_encoder(tokenizer: Any) -> Any:
    """The layout for a scorer's ``tokenizer``: Qwen2.5-Math-PRM's where the vocabulary has
    its step tag, else Skywork's."""
    return encode_qwen_prm if QWEN_PRM_TAG in tokenizer.get_vocab() else encode_skywork_prm
