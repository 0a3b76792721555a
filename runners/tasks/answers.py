"""Answer extraction and checking for the GPU math tasks (GSM8K, MATH-500, Polaris-53K).

Checking is delegated to ``math-verify`` (Hugging Face): both sides are parsed into
sympy objects (LaTeX and plain expressions) and compared symbolically, with numeric
rounding to 6 decimals, so ``\\frac{1}{2}``, ``0.5`` and ``\\boxed{1/2}`` all agree. Two
plain numbers (thousands separators, ``$`` and unit words allowed: ``\\$1,234``,
``18 dollars``) are compared here alike: integers exactly, decimals once both are rounded
to 6 decimals (``0.5000004`` is ``0.5``; ``0.000001`` is not ``0.000002``).
"""

from __future__ import annotations

import re
import threading
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

__all__ = [
    "all_boxed",
    "as_number",
    "extract_answer",
    "extract_boxed",
    "extract_gsm8k_answer",
    "gsm8k_worked_result",
    "last_number",
    "verify",
]

_GSM8K_RE = re.compile(r"####\s*(.+?)\s*$", re.MULTILINE)
_NUMBER_RE = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
# Like _NUMBER_RE, but also reads space-grouped thousands ("118 000") as one number.
_GROUPED_RE = re.compile(r"-?\d{1,3}(?:[, ]\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?|-?\.\d+")
_CALC_RE = re.compile(r"<<[^>]*=([^>]*)>>")
# A comma between a digit and a group of exactly three digits: a thousands separator.
_THOUSANDS_RE = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), braces balanced; None if absent."""
    starts = [m.end() for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text)]
    if not starts:
        return None
    return _balanced(text, starts[-1])


def all_boxed(text: str) -> list[str]:
    """Contents of every top-level ``\\boxed{...}``/``\\fbox{...}`` (a box inside a box
    is part of its parent), in order; truncated boxes are skipped."""
    out: list[str] = []
    pos = 0
    pattern = re.compile(r"\\(?:boxed|fbox)\s*\{")
    while (m := pattern.search(text, pos)) is not None:
        end = _closing(text, m.end())
        if end is None:
            break
        out.append(text[m.end() : end].strip())
        pos = end + 1  # past the closing brace: not the stripped length, which drops blanks
    return out


def _closing(text: str, start: int) -> int | None:
    """Index of the brace that closes the one just before ``start``; None if unbalanced."""
    i, depth = start, 1
    while i < len(text):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None  # unbalanced: a truncated completion


def _balanced(text: str, start: int) -> str | None:
    """The text from ``start`` to its matching closing brace (the opening one precedes it)."""
    end = _closing(text, start)
    return None if end is None else text[start:end].strip()


def extract_gsm8k_answer(solution: str) -> str | None:
    """The ``#### N`` value of a GSM8K worked solution, thousands separators, ``$`` (or LaTeX's
    ``\\$``) and markdown bold (``**18**``) removed (a comma that separates thousands:
    "1,234"; not "3, 5" or "(1,2)", which stay as written)."""
    found = list(_GSM8K_RE.finditer(solution))
    if not found:
        return None
    value = re.sub(r"\\?\$", "", _THOUSANDS_RE.sub("", found[-1].group(1))).strip()
    bold = re.fullmatch(r"\*\*(.+?)\*\*", value)
    return (bold[1] if bold else value).strip()


def last_number(text: str) -> str | None:
    """The last number written in ``text`` (commas dropped), None if there is none."""
    found = _NUMBER_RE.findall(text)
    return found[-1].replace(",", "") if found else None


def gsm8k_worked_result(solution: str) -> str | None:
    """The result a GSM8K worked solution states last (the text before ``####``).

    On the last line that holds a number: the last calculator annotation ``<<e=N>>``
    if any, else the first number after the last ``=``, else the last number. GSM8K's
    worked text sometimes ends with a number that is not the answer ("... out of the 24
    liters"); the result of the last calculation is what its ``####`` repeats.
    """
    body = solution.rsplit("####", 1)[0]
    for line in reversed(body.strip().split("\n")):
        calc = _CALC_RE.findall(line)
        if calc:
            return calc[-1].strip()
        eq = line.rfind("=")
        after = _GROUPED_RE.findall(line[eq + 1 :]) if eq >= 0 else []
        found = after[:1] or _GROUPED_RE.findall(line)[-1:]
        if found:
            return re.sub(r"[, ]", "", found[0])
    return None


def extract_answer(completion: str) -> str | None:
    """A model's final answer: the last ``\\boxed{}``, else a ``####`` line, else None.

    Boxes that disagree are no answer: "\\boxed{17} \\boxed{19} \\boxed{18}" is a hedge,
    and scoring its last box would reward boxing every guess. Boxes that :func:`verify`
    judges equal are one answer written twice ("\\boxed{15\\frac{39}{40}}, or
    \\boxed{\\frac{639}{40}}"; "\\boxed{18} ... \\boxed{\\$18}"): the last is returned."""
    boxes = all_boxed(completion)
    distinct = list(dict.fromkeys(re.sub(r"\s+", "", b) for b in boxes))
    if len(distinct) > 1 and not all(verify(b, distinct[-1]) for b in distinct[:-1]):
        return None
    boxed = extract_boxed(completion)
    if boxed is not None:
        return boxed
    return extract_gsm8k_answer(completion)


# A plain number with optional $, thousands groups (",", "\\,", "{,}", "\\ ", " "), a
# trailing period and unit words ("18 dollars", "1\\,000.", "$1,234"): compared as a number.
# A unit is set off by a space or \\text{}: letters written against the number are a
# product ("3xy", "2mn"), which math-verify reads.
_PLAIN_RE = re.compile(
    r"^\$?\s*(?P<num>-?(?:\d{1,3}(?:(?:,|\\,|\{,\}|\\ | )\d{3})+|\d+)(?:\.\d+)?)"
    r"(?:(?:\s*\\text\{\s*|\s+)(?P<unit>[A-Za-z][A-Za-z ]*)\}?)?\s*\.?\s*$"
)
# Words that are mathematics, not units: "5 pi" is not 5.
_MATH_WORDS = {"pi", "i", "e", "x", "y", "z", "sqrt", "frac", "cdot", "times", "degrees", "deg", "rad", "mod"}


def as_number(text: str) -> Decimal | None:
    """``text`` as a plain number (``$``, thousands groups, a trailing period and unit words
    allowed: "$1,234", "18 dollars"), or None when it is anything else ("5 pi", "x + 1")."""
    m = _PLAIN_RE.match(text.strip())
    if m is None:
        return None
    unit = (m["unit"] or "").strip().lower()
    if unit and (unit in _MATH_WORDS or len(unit) < 2):
        return None
    # Decimal, not float: "1000001" and "1000000" are different answers at any size.
    return Decimal(re.sub(r"[^\d.\-]", "", m["num"]))


_SIX_DECIMALS = Decimal("0.000001")


def _same_number(a: Decimal, b: Decimal) -> bool:
    """Integers exactly ("18.00" is 18); otherwise equal once rounded to 6 decimals."""
    if a == a.to_integral_value() and b == b.to_integral_value():
        return a == b
    with localcontext() as ctx:  # enough digits that quantizing a long number never fails
        ctx.prec = max(len(a.as_tuple().digits), len(b.as_tuple().digits)) + 8
        return a.quantize(_SIX_DECIMALS, ROUND_HALF_UP) == b.quantize(_SIX_DECIMALS, ROUND_HALF_UP)


def _parse(text: str) -> list[Any]:
    from math_verify import parse

    # math-verify's timeouts use SIGALRM, which only works on the main thread.
    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    # "\\$" (a dollar sign in MATH answers) reads as a math delimiter to math-verify.
    s = text.replace("\\$", "").strip()
    if "\\boxed" in s or "$" in s:
        return parse(s, parsing_timeout=timeout)
    # A bare answer ("18", "\\frac{\\pi}{2}", "(3,\\frac{\\pi}{2})"): box it so the LaTeX
    # extractor reads it whole; fall back to the plain-expression reading.
    got = parse(f"\\boxed{{{s}}}", parsing_timeout=timeout)
    return got or parse(s, parsing_timeout=timeout)


def verify(pred: str | None, gold: str | None, *, exact_shortcut: bool = True) -> bool:
    """True iff ``pred`` and ``gold`` denote the same mathematical answer (math-verify).

    Both are answer strings (bare, ``$...$`` or ``\\boxed{}``); None or empty is False.
    An exact string match (after whitespace strip) is accepted before parsing unless
    ``exact_shortcut`` is False (tests use that to exercise math-verify itself).
    """
    if not pred or not gold:
        return False
    if exact_shortcut and pred.strip() == gold.strip():
        return True
    pn, gn = as_number(pred), as_number(gold)
    if pn is not None and gn is not None:  # plain numbers: units and separators are not the answer
        return _same_number(pn, gn)
    pred = re.sub(r"(?<=[\d}])\.\s*$", "", pred.strip())  # a sentence's full stop is not the answer
    from math_verify import verify as mv_verify

    g, p = _parse(gold), _parse(pred)
    if not g or not p:
        return False
    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    return bool(mv_verify(g, p, timeout_seconds=timeout))
