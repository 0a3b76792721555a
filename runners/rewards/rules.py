"""Rule-based rewards (no model, ~0 FLOPs): sparse, structured and dense, per family.

Every function has TRL's reward signature ``f(prompts, completions, **kwargs) ->
list[float]``; ``kwargs`` carry dataset columns (``answer``) and TRL extras, ignored here.

Tiny world (answers and steps checked by ``runners.tinyworld.task.grade``; the problem
is rebuilt from the prompt text, so no column is needed):

* sparse     = 1[answer correct]
* structured = 0.2 * 1[well formed] + 0.8 * 1[answer correct]
* dense      = 0.5 * steps_correct / steps_total + 0.5 * 1[answer correct]

Qwen2.5 (math; the gold answer comes from the ``answer`` column; checked with math-verify):

* sparse     = 1[last \\boxed{} (else ``#### N``) verifies against the gold answer]
* structured = 0.2 * 1[exactly one \\boxed{} answer, at the end] + 0.8 * 1[correct]
* dense      = 0.5 * (share of the completion's ``a op b = c`` equations that hold)
  + 0.5 * 1[correct] -- partial credit for verifiable worked arithmetic
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "FORMAT_WEIGHT",
    "RULE_FUNCS",
    "arithmetic_step_share",
    "completion_text",
    "prompt_text",
]

FORMAT_WEIGHT = 0.2
STEP_WEIGHT = 0.5

RewardFunc = Callable[..., list[float]]


def completion_text(c: Any) -> str:
    """A completion as text: TRL passes strings, or message lists for chat datasets."""
    if isinstance(c, str):
        return c
    if isinstance(c, Sequence) and c and isinstance(c[-1], dict):
        return str(c[-1].get("content", ""))
    return str(c)


def prompt_text(p: Any) -> str:
    """A prompt as text (the last user message for chat prompts)."""
    if isinstance(p, str):
        return p
    if isinstance(p, Sequence) and p and isinstance(p[-1], dict):
        return "\n".join(str(m.get("content", "")) for m in p)
    return str(p)


# --------------------------------------------------------------------------- tiny world


def _tiny_grades(prompts: Sequence[Any], completions: Sequence[Any]) -> list[Any]:
    from runners.tinyworld.task import grade, problem_from_prompt

    return [
        grade(problem_from_prompt(prompt_text(p)), completion_text(c))
        for p, c in zip(prompts, completions, strict=True)
    ]


def tiny_sparse(prompts: Sequence[Any], completions: Sequence[Any], **_: Any) -> list[float]:
    return [float(g.answer_correct) for g in _tiny_grades(prompts, completions)]


def tiny_structured(prompts: Sequence[Any], completions: Sequence[Any], **_: Any) -> list[float]:
    return [
        FORMAT_WEIGHT * g.well_formed + (1 - FORMAT_WEIGHT) * g.answer_correct
        for g in _tiny_grades(prompts, completions)
    ]


def tiny_dense(prompts: Sequence[Any], completions: Sequence[Any], **_: Any) -> list[float]:
    return [
        STEP_WEIGHT * g.step_share + (1 - STEP_WEIGHT) * g.answer_correct
        for g in _tiny_grades(prompts, completions)
    ]


# --------------------------------------------------------------------------- qwen2.5 math

_EQ_RE = re.compile(
    r"(-?\d+(?:\.\d+)?)\s*([+\-*/×x÷])\s*(-?\d+(?:\.\d+)?)\s*=\s*\$?\s*(-?\d[\d,]*(?:\.\d+)?)"
)


def arithmetic_step_share(text: str) -> float:
    """Share of the ``a op b = c`` equations in ``text`` that hold (to 1e-6 relative); 0 if none.

    Division by zero counts as wrong. Only binary equations on literals are read: a
    cheap, model-free check of worked arithmetic.
    """
    found = _EQ_RE.findall(text)
    if not found:
        return 0.0
    good = 0
    for a_s, op, b_s, c_s in found:
        a, b, c = float(a_s), float(b_s), float(c_s.replace(",", ""))
        if op == "+":
            val = a + b
        elif op == "-":
            val = a - b
        elif op in "/÷":
            if b == 0:
                continue
            val = a / b
        else:
            val = a * b
        good += abs(val - c) <= 1e-6 * max(1.0, abs(c))
    return good / len(found)


def _gold(kwargs: dict[str, Any], n: int) -> list[str | None]:
    gold = kwargs.get("answer")
    if gold is None:
        raise ValueError("qwen2.5 rule rewards need an `answer` dataset column")
    return [None if g is None else str(g) for g in gold][:n]


def _correct(completions: Sequence[Any], kwargs: dict[str, Any]) -> list[bool]:
    from runners.tasks.answers import extract_answer, verify

    texts = [completion_text(c) for c in completions]
    return [verify(extract_answer(t), g) for t, g in zip(texts, _gold(kwargs, len(texts)), strict=True)]


def qwen_sparse(prompts: Sequence[Any], completions: Sequence[Any], **kw: Any) -> list[float]:
    return [float(ok) for ok in _correct(completions, kw)]


def _boxed_at_end(text: str) -> bool:
    boxes = re.findall(r"\\boxed\s*\{", text)
    if len(boxes) != 1:
        return False
    tail = text[text.rfind("\\boxed") :]
    # The answer is the last thing said: at most a short closing sentence after it.
    return len(tail) <= 200


def qwen_structured(prompts: Sequence[Any], completions: Sequence[Any], **kw: Any) -> list[float]:
    ok = _correct(completions, kw)
    return [
        FORMAT_WEIGHT * _boxed_at_end(completion_text(c)) + (1 - FORMAT_WEIGHT) * k
        for c, k in zip(completions, ok, strict=True)
    ]


def qwen_dense(prompts: Sequence[Any], completions: Sequence[Any], **kw: Any) -> list[float]:
    ok = _correct(completions, kw)
    return [
        STEP_WEIGHT * arithmetic_step_share(completion_text(c)) + (1 - STEP_WEIGHT) * k
        for c, k in zip(completions, ok, strict=True)
    ]


# (family, reward name) -> function; the function's __name__ is what TRL logs.
RULE_FUNCS: dict[tuple[str, str], RewardFunc] = {
    ("tiny", "sparse"): tiny_sparse,
    ("tiny", "structured"): tiny_structured,
    ("tiny", "dense"): tiny_dense,
    ("qwen2.5", "sparse"): qwen_sparse,
    ("qwen2.5", "structured"): qwen_structured,
    ("qwen2.5", "dense"): qwen_dense,
}
