"""The tiny world's task: multi-step arithmetic modulo 10 with worked steps.

A problem is a chain ``d0 o1 d1 o2 d2 ...`` of single digits and operators ``+ - *``,
evaluated left to right modulo 10 (no precedence: each step folds one more operand into
the running value, so every step is one short line). Example::

    prompt      "Q:3+4*2-5\n"
    completion  "3+4=7\n7*2=4\n4-5=9\nA:9"        (then <eos>)

Splits (``make_problems``):

* ``train``   -- 2..5 operations (RL prompts; the "native" target samples it too);
* ``heldout`` -- the same distribution from its own random stream (not a disjoint set of
  problems: docs/tinyworld.md says how much of it training and pretraining also see);
* ``harder``  -- 6..8 operations: longer chains, so more chances to err; pretraining
  includes a share of them (see ``runners.tinyworld.pretrain``) so they are hard but
  reachable.

Grading (``grade``) is by rule. A step line ``x o y=z`` at position i is correct iff it
parses, ``o`` and ``y`` are the problem's i-th operator and operand, ``x`` is the
previous line's written result (the first operand for i = 0) and ``z = (x o y) mod 10``.
So a wrong step is charged once and later steps that carry its value forward correctly
are still correct (local correctness, as in PRM800K-style step labels). The answer line
``A:z`` is correct iff ``z`` is the true answer. If every step is correct, so is the
answer that repeats the last result. The completion is read as
:func:`clean_completion` leaves it: cut at ``<eos>``, any other special token kept
as text, so a line holding one does not parse.

Flawed solutions (``sample_solution``) come from a fixed noise model, :class:`FlawModel`:
a *misconception* on "hard" steps (a product of 10 or more: the tens digit is written
instead of the units digit; a subtraction that wraps: ``y - x`` instead of
``x - y + 10``), with a rate fixed per (x, op, y) in [0.3, 0.7], plus random slips. A
policy that imitates this corpus is right on some hard steps and, where the rate is
above one half, wrong on them even under greedy decoding -- headroom that RL can remove.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "MOD",
    "OPS",
    "SPLIT_OPS",
    "FlawModel",
    "Grade",
    "Problem",
    "Split",
    "apply_op",
    "clean_completion",
    "grade",
    "is_hard_step",
    "make_problems",
    "parse_prompt",
    "problem_from_ops",
    "problem_from_prompt",
    "reference_completion",
    "sample_solution",
]

MOD = 10
OPS = "+-*"
Split = Literal["train", "heldout", "harder"]
# Inclusive ranges of the number of operations per split.
SPLIT_OPS: dict[str, tuple[int, int]] = {"train": (2, 5), "heldout": (2, 5), "harder": (6, 8)}

_PROMPT_RE = re.compile(r"^Q:([0-9](?:[+\-*][0-9])+)\n$")
_STEP_RE = re.compile(r"^([0-9])([+\-*])([0-9])=([0-9])$")
_ANSWER_RE = re.compile(r"^A:([0-9]+)$")
_SPECIAL_RE = re.compile(r"<(?:eos|pad|bos|unk)>")
# The alphabet has no '<', so in decoded text these can only come from special ids.
_FRAMING_RE = re.compile(r"^(?:<pad>)*(?:<bos>)?")


@dataclass(frozen=True)
class Problem:
    """One problem: the prompt text, the true answer and the reference step lines."""

    prompt: str
    answer: str
    steps: tuple[str, ...]

    @property
    def num_ops(self) -> int:
        return len(self.steps)


@dataclass(frozen=True)
class Grade:
    """Rule grade of one completion.

    ``step_labels`` has one entry per non-empty line written (step lines by the local
    rule, the answer line by answer correctness, unparseable lines False): what a process
    reward model is trained to predict. ``steps_correct`` counts correct step lines among
    the first ``steps_total`` (= the number of operations) -- the process judge.
    """

    answer_correct: bool
    well_formed: bool
    steps_correct: int
    steps_total: int
    step_labels: list[bool]

    @property
    def step_share(self) -> float:
        return self.steps_correct / self.steps_total if self.steps_total else 0.0


def apply_op(x: int, op: str, y: int) -> int:
    """``(x op y) mod 10``."""
    if op == "+":
        return (x + y) % MOD
    if op == "-":
        return (x - y) % MOD
    if op == "*":
        return (x * y) % MOD
    raise ValueError(f"unknown operator {op!r}")


def is_hard_step(x: int, op: str, y: int) -> bool:
    """Steps where the misconception applies: a product >= 10 or a wrapping subtraction."""
    return (op == "*" and x * y >= MOD) or (op == "-" and x < y)


def problem_from_ops(operands: list[int], ops: list[str]) -> Problem:
    """Build a problem (prompt, answer, reference steps) from its digits and operators."""
    if len(operands) != len(ops) + 1 or not ops:
        raise ValueError("need k >= 1 operators and k + 1 operands")
    expr = str(operands[0]) + "".join(f"{o}{d}" for o, d in zip(ops, operands[1:], strict=True))
    acc, steps = operands[0], []
    for o, d in zip(ops, operands[1:], strict=True):
        z = apply_op(acc, o, d)
        steps.append(f"{acc}{o}{d}={z}")
        acc = z
    return Problem(prompt=f"Q:{expr}\n", answer=str(acc), steps=tuple(steps))


def parse_prompt(prompt: str) -> tuple[list[int], list[str]]:
    """Digits and operators of a prompt ``"Q:3+4*2\\n"``; ValueError if it is not one."""
    m = _PROMPT_RE.match(_SPECIAL_RE.sub("", prompt))
    if not m:
        raise ValueError(f"not a tiny-world prompt: {prompt!r}")
    expr = m.group(1)
    return [int(c) for c in expr[0::2]], list(expr[1::2])


def problem_from_prompt(prompt: str) -> Problem:
    """Rebuild the problem from its prompt (reward functions only see prompt text)."""
    return problem_from_ops(*parse_prompt(prompt))


def reference_completion(problem: Problem) -> str:
    """The correct worked solution (without <eos>)."""
    return "\n".join((*problem.steps, f"A:{problem.answer}"))


def make_problems(split: Split, n: int, seed: int) -> list[Problem]:
    """``n`` problems of ``split``, deterministic in (split, seed).

    Operation counts are uniform over ``SPLIT_OPS[split]``, operators uniform over ``+-*``
    and digits uniform over 0..9. ``heldout`` draws from its own stream, so it is a fresh
    sample of the training distribution.
    """
    if split not in SPLIT_OPS:
        raise ValueError(f"split must be one of {sorted(SPLIT_OPS)}, got {split!r}")
    lo, hi = SPLIT_OPS[split]
    rng = random.Random(f"tinyworld:{split}:{seed}")
    out = []
    for _ in range(n):
        k = rng.randint(lo, hi)
        out.append(problem_from_ops([rng.randrange(MOD) for _ in range(k + 1)],
                                    [rng.choice(OPS) for _ in range(k)]))
    return out


def clean_completion(text: str) -> str:
    """A decoded completion as the rewards must read it: leading ``<pad>`` tokens and one
    ``<bos>`` (left padding and the prompt's marker) dropped, everything from the first
    ``<eos>`` on cut (generation stopped there; what follows is padding), and every other
    special token kept as its literal text.

    A stray special token is the policy's own output: dropping it would join its
    neighbours, so ``"A:<pad>7"`` would read as the answer ``A:7``; kept, it breaks the
    line and the grade charges it.
    """
    return _FRAMING_RE.sub("", text, count=1).split("<eos>", 1)[0]


def _clean(completion: str) -> list[str]:
    # Not a strip of every special token: one between two digits would join them into a
    # line that parses (see clean_completion).
    text = clean_completion(completion)
    return [ln.strip() for ln in text.strip().split("\n") if ln.strip()]


def grade(problem: Problem, completion: str) -> Grade:
    """Grade ``completion`` against ``problem`` by rule (see the module docstring)."""
    operands, ops = parse_prompt(problem.prompt)
    lines = _clean(completion)
    labels: list[bool] = []
    steps_correct = 0
    prev: int | None = operands[0]
    answer_seen = False
    answer_correct = False
    well_formed = bool(lines)
    for i, line in enumerate(lines):
        am = _ANSWER_RE.match(line)
        if am:
            answer_seen = True
            answer_correct = am.group(1) == problem.answer
            labels.append(answer_correct)
            # The answer must be the last line, after exactly one line per operation.
            well_formed &= i == len(lines) - 1 and i == len(ops)
            continue
        sm = _STEP_RE.match(line)
        if not sm or answer_seen:
            labels.append(False)
            well_formed = False
            prev = None
            continue
        x, o, y, z = int(sm.group(1)), sm.group(2), int(sm.group(3)), int(sm.group(4))
        ok = (
            i < len(ops)
            and prev is not None
            and x == prev
            and o == ops[i]
            and y == operands[i + 1]
            and z == apply_op(x, o, y)
        )
        labels.append(ok)
        steps_correct += int(ok and i < len(ops))
        prev = z
    well_formed &= answer_seen
    # Only the last answer line counts (a completion cannot hedge with several).
    if answer_seen:
        last = next(ln for ln in reversed(lines) if _ANSWER_RE.match(ln))
        answer_correct = last == f"A:{problem.answer}"
    return Grade(answer_correct, well_formed, steps_correct, len(ops), labels)


@dataclass(frozen=True)
class FlawModel:
    """How the pretraining corpus errs, per step (rates are probabilities).

    ``misconception_lo/hi``: the misconception rate of each hard (x, op, y) triple is
    fixed, uniform in [lo, hi] from a table seeded by ``table_seed`` (part of the world,
    not of a run). ``slip``: a random wrong result digit on any step or the answer line.
    """

    misconception_lo: float = 0.3
    misconception_hi: float = 0.7
    slip: float = 0.04
    table_seed: int = 20260713

    def misconception_rate(self, x: int, op: str, y: int) -> float:
        if not is_hard_step(x, op, y):
            return 0.0
        u = random.Random(f"{self.table_seed}:{x}{op}{y}").random()
        return self.misconception_lo + (self.misconception_hi - self.misconception_lo) * u


def _misconceived(x: int, op: str, y: int) -> int:
    # The tens digit of the product; the "absolute difference" for a wrapping subtraction.
    return (x * y) // MOD if op == "*" else y - x


def _slip(z: int, rng: random.Random) -> int:
    return (z + rng.randrange(1, MOD)) % MOD


def sample_solution(problem: Problem, rng: random.Random, flaws: FlawModel | None = None) -> str:
    """One worked solution from the corpus noise model (correct or flawed; no <eos>).

    Errors propagate: the next step starts from the written (possibly wrong) value.
    """
    fm = flaws or FlawModel()
    operands, ops = parse_prompt(problem.prompt)
    acc, lines = operands[0], []
    for o, y in zip(ops, operands[1:], strict=True):
        z = apply_op(acc, o, y)
        if rng.random() < fm.misconception_rate(acc, o, y):
            z = _misconceived(acc, o, y)
        elif rng.random() < fm.slip:
            z = _slip(z, rng)
        lines.append(f"{acc}{o}{y}={z}")
        acc = z
    answer = _slip(acc, rng) if rng.random() < fm.slip else acc
    lines.append(f"A:{answer}")
    return "\n".join(lines)
