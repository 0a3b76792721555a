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
* structured = 0.2 * 1[exactly one complete, non-empty \\boxed{} answer, at the end]
  + 0.8 * 1[correct]
* dense      = 0.5 * (share of the completion's ``a op b = c`` steps that hold and lead to
  its final answer) + 0.5 * 1[correct] -- partial credit for verifiable worked arithmetic;
  a true step that leads nowhere ("3 + 5 = 8" on the problem's numbers) is a dead end that
  lowers the share, and an equation that does no arithmetic (``x * 1 = x``, ``x + 0 = x``,
  ``x - x = 0``) is not a step, so it neither earns credit nor pads the share
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runners.rewards.func import RewardFunc

__all__ = [
    "FORMAT_WEIGHT",
    "RULE_FUNCS",
    "arithmetic_step_share",
    "completion_text",
    "prompt_text",
]

FORMAT_WEIGHT = 0.2
STEP_WEIGHT = 0.5



def completion_text(c: Any) -> str:
    """A completion as text: TRL passes strings, or message lists for chat datasets."""
    if isinstance(c, str):
        return c
    if isinstance(c, Sequence) and c and isinstance(c[-1], dict):
        return str(c[-1].get("content", ""))
    return str(c)


def prompt_text(p: Any) -> str:
    """A prompt as text: the problem, which for chat prompts is the last user message (a
    system message's instructions and numbers are not part of the problem; a list without a
    user message is read by its last message, as completions are)."""
    if isinstance(p, str):
        return p
    if isinstance(p, Sequence) and p and isinstance(p[-1], dict):
        users = [m for m in p if isinstance(m, dict) and m.get("role") == "user"]
        return str((users or list(p))[-1].get("content", ""))
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

# A number as written, with "$", thousands commas, or a bare fraction part (".5", "$.75").
_NUM = r"\$?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)"
# Operators as models write them: ASCII, Unicode (× · ÷), LaTeX (\times \cdot \div) and
# "x" between numbers ("3 x 4").
_OP = r"(?:[+\-*/×x÷·]|\\(?:times|cdot|div)(?![A-Za-z]))"
# A whole expression of literals on the left (nothing arithmetic just before it, so
# "16 - 3 - 4 = 9" is read whole, not as "3 - 4 = 9"; markdown bold "**" is not an
# operator), a number on the right that is not itself the start of an expression
# ("= 5 + 1" is a chain, not "= 5"). An expression stays on its line: in a bulleted list
# ("- 3 + 4 = 7\n- 7 * 2 = 14") the next line's bullet is no operator of this one.
_EQ_RE = re.compile(
    rf"(?<![\w.,)^/+×÷·=$-])(?<![^*]\*)(?P<lhs>[-(]*{_NUM}\)*(?:[ \t]*{_OP}[ \t]*[-(]*{_NUM}\)*)+)"
    rf"\s*=\s*(?P<rhs>-?{_NUM})(?![\d.,]*(?:[ \t]*{_OP}[ \t]*[\d($(]|\^|[A-Za-z_]))"
)
# What ends the text before a left-hand side that is the tail of a longer expression,
# spaces allowed between ("x * 3 + 4 = 7", "2^3 + 1 = 9", "\\frac{1}{2} \\times 4 = 2"):
# that equation is not read, rather than read from its middle. A lone "*" (not bold's
# "**"), "x" after a number, and "-", "+" or "*" unless it is a list item's bullet (the
# first thing on its line: markdown's three).
_MID_EXPR_RE = re.compile(
    r"(?:[/×÷·^]|\\(?:times|cdot|div)|\d\s*x|(?P<bullet>[-+]|(?<!\*)\*))\s*$"
)


def _mid_expression(before: str) -> bool:
    m = _MID_EXPR_RE.search(before)
    if m is None:
        return False
    return not m["bullet"] or before[: m.start()].rsplit("\n", 1)[-1].strip() != ""


_NUMBER_RE = re.compile(_NUM)


_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _walk(node: ast.AST, moved: Mapping[float, float] | None = None) -> float:
    """The value of an expression tree; ``moved`` replaces literals by value (every
    occurrence of a number at once)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        v = float(node.value)
        return moved.get(v, v) if moved else v
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _walk(node.operand, moved)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_walk(node.left, moved), _walk(node.right, moved))
    raise ValueError(type(node).__name__)


_ERRORS = (SyntaxError, ValueError, ZeroDivisionError, RecursionError, OverflowError)


def _parse(expr: str) -> ast.expr | None:
    """The tree of an arithmetic expression of literals (``x``/``×``/``·``/``\\times``/
    ``\\cdot`` times, ``÷``/``\\div`` divide), or None when it is not one. Parsed with
    :mod:`ast`, never ``eval``."""
    src = re.sub(r"(?<=\d),(?=\d{3})", "", expr).replace("$", "").replace("×", "*").replace("÷", "/")
    src = re.sub(r"\\(?:times|cdot)(?![A-Za-z])|·", "*", src).replace("\\div", "/")
    src = re.sub(r"(?<=[\d)\s])x(?=[\s\d(-])", "*", src)
    try:
        return ast.parse(src.strip(), mode="eval").body
    except _ERRORS:
        return None


def _evaluate(expr: str) -> float | None:
    """The value of an arithmetic expression of literals, or None when it is not one or
    divides by zero."""
    tree = _parse(expr)
    try:
        return None if tree is None else _walk(tree)
    except _ERRORS:
        return None


def _close(a: float | None, b: float) -> bool:
    return a is not None and abs(a - b) <= 1e-6 * max(1.0, abs(b))


def _value_moved(tree: ast.AST, literal: float, to: float) -> float | None:
    try:
        return _walk(tree, {literal: to})
    except _ERRORS:
        return None


# Two generic values a literal is moved to, to see how an expression depends on it: a
# rational function that is not the identity (or constant) agrees with it at both by chance
# only.
_PROBES = (0.7391, 2.3137)


def _does_no_arithmetic(tree: ast.AST, value: float) -> bool:
    """True when an expression of literals worth ``value`` computes nothing: it is one of
    its literals passed through identities (``x * 1``, ``x + 0``, ``x - 0``, ``x / 1``,
    ``16 + 2 - 2``), or its value does not hang on its other literals (``x * 0``, ``0 / x``,
    ``x - x``, ``x / x``). Literals of equal value move together, so "x - x" is seen whole.
    "10 - 5 = 5" and "4 / 2 = 2" do arithmetic: their value hangs on both literals."""
    literals = {float(n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, int | float)}
    hangs_on = {
        v for v in literals if not all(_close(_value_moved(tree, v, v + d), value) for d in _PROBES)
    }
    for v in literals:
        if all(_close(_value_moved(tree, v, v + d), v + d) for d in _PROBES):
            return True  # the identity of one literal: x * 1, x + 0
    return not hangs_on or (len(hangs_on) == 1 and _close(value, next(iter(hangs_on))))


# A unit after a number inside an expression ("4 * 20 sheep = 80", "$20/hour * 35 hours/week
# = $700", "80 miles \\div train"): dropped, so the worked arithmetic of a word problem is
# read as arithmetic.
_LATEX_OP = r"\\(?:times|cdot|div)(?![A-Za-z])"
_UNIT_RE = re.compile(
    rf"(?<=\d)(?:\s*(?:/|\\div(?![A-Za-z]))\s*[A-Za-z]+|\s+[A-Za-z]+(?:/[A-Za-z]+)?)+"
    rf"(?=\s*(?:[+\-*/×÷·=]|x\s|{_LATEX_OP}))"
)
_PERCENT_RE = re.compile(rf"(?<=\d)\s*\\?%(?=\s*(?:[+\-*/×x÷·=]|{_LATEX_OP}))")


# LaTeX around arithmetic: "\\$" is a dollar sign (money, as "$"); "\\(" and "\\)" delimit
# inline maths (not parentheses: "\\(3 \\times 4 = 12\\)"); \\left( and \\right) are parentheses.
_LATEX_TEXT = (("\\$", "$"), ("\\left(", "("), ("\\right)", ")"), ("\\(", " "), ("\\)", " "))
# The minus sign and the en dash, as typeset text writes a subtraction ("54 − 37 = 17",
# "$400 – $80 = $320"): read as "-", so a chain does not break where one is written.
_DASHES = (("\u2212", "-"), ("\u2013", "-"))


def _strip_units(text: str) -> str:
    for latex, plain in _LATEX_TEXT + _DASHES:
        text = text.replace(latex, plain)
    return _PERCENT_RE.sub("/100", _UNIT_RE.sub("", text))


def _numbers(text: str) -> set[float]:
    return {float(m.replace(",", "").replace("$", "")) for m in _NUMBER_RE.findall(text)}


@dataclass(frozen=True)
class _Step:
    """One equation read: the values its left-hand side reads (unsigned, once per
    occurrence: "90 + 90" reads 90 twice), its result, whether it is a step (an equation
    that does arithmetic, counted in the share) and whether it earns credit by itself
    (true, and grounded when a problem is given)."""

    operands: tuple[float, ...]
    result: float
    counted: bool
    holds: bool
    #: the result is written again after the equation (as a number, anywhere in the rest of
    #: the text): the step led somewhere, even where no equation after it reads it
    reused: bool = False


def _steps(text: str, prompt: str | None) -> list[_Step]:
    """The equations of ``text`` in order, each once; one that is the tail of a longer
    expression is not read. A true equation that does no arithmetic
    (:func:`_does_no_arithmetic`) is kept, uncounted, so a chain can run through it
    ("6 miles / 1 hour = 6 mph"). With ``prompt``, a true equation holds only with an
    operand from the problem or from an earlier grounded result."""
    text = _strip_units(text)
    seen: set[str] = set()
    known = _numbers(prompt) if prompt is not None else None
    steps: list[_Step] = []
    for m in _EQ_RE.finditer(text):
        if _mid_expression(text[: m.start()]):
            continue  # the tail of an expression that is not all literals: not read
        key = re.sub(r"\s+", "", m.group(0))
        if key in seen:
            continue
        seen.add(key)
        tree = _parse(m["lhs"])
        c = float(m["rhs"].replace(",", "").replace("$", ""))
        holds = _close(_evaluate(m["lhs"]), c)
        # "16 * 1 = 16" is no step: it neither earns credit nor pads the share.
        counted = not (holds and tree is not None and _does_no_arithmetic(tree, c))
        operands = tuple(float(n.replace(",", "").replace("$", "")) for n in _NUMBER_RE.findall(m["lhs"]))
        if holds and known is not None:
            holds = bool(set(operands) & known)
            if holds:  # only a grounded result grounds later steps
                known.add(c)
        reused = any(_close(v, abs(c)) for v in _numbers(text[m.end():]))
        steps.append(_Step(operands, c, counted, holds and counted, reused))
    return steps


def _take(wanted: list[float], value: float) -> bool:
    """Meet one want of ``value`` (removing it), if there is one."""
    for i, w in enumerate(wanted):
        if _close(abs(value), w):
            del wanted[i]
            return True
    return False


def _credited(steps: Sequence[_Step], answer: float | None, answered: bool) -> list[bool]:
    """Which steps contribute, by a backward pass from the chain's end.

    The end is the final ``answer`` when an equation computes it. Otherwise, when the
    completion states an answer (``answered``: one no equation computes, or one that is not
    a number), the end is the last step that holds and whose result is written again after
    it (``_Step.reused``): a true equation set down before an answer it does not reach led
    nowhere ("3 + 5 = 8" then \\boxed{18} earns nothing), while an answer reached in words
    from a restated result ("... = 12", "2/3 of x = 12, so x = 18") keeps the chain that
    feeds it. With no answer at all (a completion cut off by the length limit), the last
    step that holds ends the chain.

    Going backwards, an equation is used when it is the end or meets a want (the answer,
    or an operand of a later used equation); a used equation wants its own operands, and
    is credited when it holds. A wrong or ungrounded equation earns nothing but still
    passes its wants on, so the right steps before a slip keep their credit. Each want
    is met once, by the latest equation that computes it, so rewriting a result
    ("16 + 2 = 18", "20 - 2 = 18", ...) earns no more than computing it once.
    """
    wanted: list[float] = []
    end: _Step | None = None
    if answer is not None and any(_close(abs(s.result), abs(answer)) for s in steps):
        wanted.append(abs(answer))
    elif answered:
        end = next((s for s in reversed(steps) if s.holds and s.reused), None)
    else:
        end = next((s for s in reversed(steps) if s.holds), None)
    credit = [False] * len(steps)
    for i in reversed(range(len(steps))):
        s = steps[i]
        if s is end or _take(wanted, s.result):
            credit[i] = s.holds
            wanted.extend(s.operands)
    return credit


def _answer_value(answer: str | None) -> float | None:
    """A final answer (:func:`runners.tasks.answers.extract_answer`'s) as a number, or None
    when there is none or it is not a plain number ("\\frac{1}{2}" is read as 0.5;
    "x + 1" is not a number)."""
    from runners.tasks.answers import as_number

    if answer is None:
        return None
    for dash, plain_dash in _DASHES:  # "−3" is -3, as the steps read it
        answer = answer.replace(dash, plain_dash)
    plain = as_number(answer.replace("\\$", "$"))
    if plain is not None:
        return float(plain)
    frac = re.fullmatch(r"\s*-?\\[dt]?frac\{(\d+)\}\{(\d+)\}\s*", answer)
    # float, not int: int() refuses a numeral past 4300 digits (ValueError), and a
    # degenerate completion can box one; the reward must score it, not crash the run.
    if frac and float(frac[2]):
        return (-1 if answer.strip().startswith("-") else 1) * float(frac[1]) / float(frac[2])
    return None


def arithmetic_step_share(text: str, prompt: str | None = None) -> float:
    """Share of the worked equations ``<expression of literals> = c`` in ``text`` that
    hold and lead to the answer; 0 if there are none:

        share = #(steps that hold and are on the chain to the answer) / #steps

    A step holds when it is true (to 1e-6 relative) and, with the ``prompt``, uses an
    operand from the problem or from an earlier grounded result, so arithmetic unrelated
    to the problem earns nothing. It is on the chain when its result is the final answer
    (:func:`_answer_value`) or an operand of a later step on the chain (:func:`_credited`,
    a backward pass, each use met once). When no equation computes the answer (not a
    number, or reached in words), the chain ends at the last true step whose result is
    written again after it; with no answer at all, at the last true step. A true dead end
    ("3 + 5 = 8" on the problem's numbers, used nowhere) still counts in ``#steps``, so
    padding lowers the share instead of raising it.

    Each distinct equation counts once (repeating "2 + 2 = 4" earns nothing more). An
    equation that does no arithmetic (``16 * 1 = 16``, ``16 + 0 = 16``, ``16 * 0 = 0``,
    ``16 - 16 = 0``: :func:`_does_no_arithmetic`) is not a step at all, though a chain runs
    through it. Division by zero counts as wrong. Assumes a result is reused as written
    (same value, either sign) and in order (a step that only checks the answer after it
    is a dead end, and so is either of two options compared in words). A chain invented
    to reach the answer from the problem's numbers passes: the check is cheap and
    model-free, not a judge of relevance.
    """
    steps = _steps(text, prompt)
    total = sum(s.counted for s in steps)
    if not total:
        return 0.0
    from runners.tasks.answers import extract_answer

    answer = extract_answer(text)
    return sum(_credited(steps, _answer_value(answer), answer is not None)) / total


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
    from runners.tasks.answers import all_boxed

    boxes = re.findall(r"\\boxed\s*\{", text)
    if len(boxes) != 1:
        return False
    # A box cut off by the length limit ("\\boxed{18") or left empty holds no answer.
    complete = all_boxed(text)
    if len(complete) != 1 or not complete[0].strip():
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
        STEP_WEIGHT * arithmetic_step_share(completion_text(c), prompt_text(p)) + (1 - STEP_WEIGHT) * k
        for p, c, k in zip(prompts, completions, ok, strict=True)
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
