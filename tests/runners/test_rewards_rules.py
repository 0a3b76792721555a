"""Rule-based reward systems (sparse, structured, dense) for both families."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from planner.errors import ConfigError
from runners.rewards import build_reward_system
from runners.rewards.rules import arithmetic_step_share

PROMPT = "Q:3+4*2-5\n"
RIGHT = "3+4=7\n7*2=4\n4-5=9\nA:9"
WRONG_STEP = "3+4=7\n7*2=5\n5-5=0\nA:0"
SHORTCUT = "3+4=7\nA:9"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sparse", [1.0, 0.0, 1.0]),
        ("structured", [1.0, 0.2, 0.8]),
        ("dense", [1.0, 0.5 * 2 / 3, 0.5 * 1 / 3 + 0.5]),
    ],
)
def test_tiny_rule_rewards(name: str, expected: list[float]) -> None:
    rs = build_reward_system(name, "tiny")
    out = rs.funcs[0]([PROMPT] * 3, [RIGHT, WRONG_STEP, SHORTCUT], answer=["9"] * 3)
    assert out == pytest.approx(expected)
    assert rs.scorer is None and rs.scored == [] and rs.is_rule
    assert rs.calls and rs.calls[-1][0] == 3 and rs.calls[-1][1] >= 0
    assert rs.funcs[0].__name__ == name


def test_qwen_rule_rewards_use_math_verify() -> None:
    comps = [
        "2+3=5 and 5*2=10.\n\nSo the answer is \\boxed{10}.",
        "Half of it: \\boxed{\\frac{1}{2}}",
        "3+3=7\n#### 7",
        "I am not sure.",
    ]
    gold = ["10", "0.5", "6", "1"]
    assert build_reward_system("sparse", "qwen2.5").funcs[0](["q"] * 4, comps, answer=gold) == [1, 1, 0, 0]
    assert build_reward_system("structured", "qwen2.5").funcs[0](["q"] * 4, comps, answer=gold) == (
        pytest.approx([1.0, 1.0, 0.0, 0.0])
    )
    # Dense step credit needs the problem's numbers (2 and 3 here) in the worked arithmetic.
    prompts = ["What is (2 + 3) * 2?"] * 4
    assert build_reward_system("dense", "qwen2.5").funcs[0](prompts, comps, answer=gold) == (
        pytest.approx([1.0, 0.5, 0.0, 0.0])
    )
    assert build_reward_system("dense", "qwen2.5").funcs[0](["q"] * 4, comps, answer=gold)[0] == 0.5


def test_the_format_bonus_needs_a_complete_answer_in_the_box() -> None:
    comps = ["\\boxed{", "So it is \\boxed{18", "\\boxed{}", "\\boxed{ }", "So it is \\boxed{18}."]
    out = build_reward_system("structured", "qwen2.5").funcs[0](["q"] * 5, comps, answer=["19"] * 5)
    assert out == pytest.approx([0.0, 0.0, 0.0, 0.0, 0.2])  # cut off or empty: no answer, no bonus


def test_arithmetic_step_share() -> None:
    assert arithmetic_step_share("4 * 5 = 20, 20 - 3 = 16, 1/0 = 2") == pytest.approx(1 / 3)
    assert arithmetic_step_share("no equations") == 0.0
    assert arithmetic_step_share("12,000 = 12000; 3 x 4 = 12") == 1.0


@pytest.mark.parametrize("text", [
    # Whole left-hand sides: each of these was read as a fragment ("3 - 4 = 9") and marked wrong.
    "16 - 3 - 4 = 9 duck eggs", "1,000 + 500 = 1,500", "2 * 3 + 4 = 10", "60/100 * 5 = 3", "(2+3)*4 = 20",
    # Word-problem arithmetic with units and percents, as GSM8K's worked solutions write it.
    "4 * 20 sheep = 80 sheep", "200 GB * 40% = 80 GB", "$20/hour * 35 hours/week = $700/week", "-3 + 5 = 2",
    # The minus sign, the en dash and a bare fraction part, as GSM8K writes them: unread, they
    # would cut a chain of steps in two.
    "54 − 37 = 17", "$400 – $80 = $320", "30 * .5 = 15", "$.75 * 4 = $3",
])
def test_worked_arithmetic_is_read_whole(text: str) -> None:
    assert arithmetic_step_share(text) == 1.0


@pytest.mark.parametrize("text", [
    # LaTeX and Unicode operators, as instruct models write them ("3 \\times 4 + 2 = 14" was
    # read as "4 + 2 = 14", wrong; "9 \\times 2 = 18" was not read at all).
    "3 \\times 4 + 2 = 14", "9 \\times 2 = 18", "6 \\cdot 7 = 42", "84 \\div 2 = 42", "3\\times4=12",
    "6 · 7 = 42", "8 ÷ 2 + 1 = 5", "\\(3 \\times 4 = 12\\)", "\\[ 9 \\times \\$2 = \\$18 \\]",
    "\\(\\left(2 + 3\\right) \\times 4 = 20\\)", "50\\% \\times 40 = 20", "80 miles \\div 2 trains = 40",
    "**16 - 3 - 4 = 9**", "- 16 - 3 - 4 = 9",
])
def test_latex_arithmetic_is_read_whole(text: str) -> None:
    assert arithmetic_step_share(text) == 1.0


@pytest.mark.parametrize("tail", ["x * 3 + 4 = 8", "2^3 + 1 = 4", "\\frac{1}{2} \\times 4 = 3", "y - 3 + 4 = 2"])
def test_the_tail_of_an_expression_is_not_read_as_an_equation(tail: str) -> None:
    # The left-hand side starts where the expression does, spaces or not: "x * 3 + 4 = 8"
    # is algebra, not the false "3 + 4 = 8" (nor a true one: it is not read at all).
    assert arithmetic_step_share(f"{tail}\n3 + 4 = 7") == 1.0


DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is absent")
def test_gsm8k_worked_solutions_read_alike_in_latex() -> None:
    rows = [json.loads(line) for line in (DATA / "gsm8k" / "test.jsonl").read_text().splitlines() if line]
    texts = [re.sub(r"<<[^>]*>>", "", r["answer"]).rsplit("####", 1)[0] for r in rows]
    plain = [arithmetic_step_share(t, r["question"]) for t, r in zip(texts, rows, strict=True)]
    latex = [arithmetic_step_share(t.replace("*", " \\times ").replace("/", " \\div "), r["question"])
             for t, r in zip(texts, rows, strict=True)]
    mean_plain, mean_latex = sum(plain) / len(rows), sum(latex) / len(rows)
    print(f"GSM8K test worked solutions: mean step share {mean_plain:.4f}, in LaTeX {mean_latex:.4f}")
    assert len(rows) == 1319 and mean_plain >= 0.9 and mean_latex == pytest.approx(mean_plain, abs=1e-3)


def test_step_credit_cannot_be_farmed() -> None:
    prompt = "Janet's ducks lay 16 eggs. She eats 3 and bakes with 4, and sells the rest at $2 each."
    worked = "16 - 3 - 4 = 9 eggs. 9 * 2 = $18.\n\\boxed{18}"
    assert arithmetic_step_share(worked, prompt) == 1.0
    assert arithmetic_step_share("1+1=2\n" * 50 + "\\boxed{17}", prompt) == 0.0  # unrelated to the problem
    assert arithmetic_step_share("16 + 2 = 18\n" * 50, prompt) == 1.0  # one distinct equation, counted once
    assert arithmetic_step_share("3x - 9 = 2x + 74") == 0.0  # algebra is not arithmetic on literals


# Janet's worked solution, and true equations on the problem's numbers that lead nowhere.
WORKED = "16 - 3 - 4 = 9 eggs. 9 * 2 = $18."
DEAD_ENDS = ["16 + 3 = 19", "16 * 2 = 32", "4 + 2 = 6", "16 - 4 = 12", "3 * 4 = 12"]


@pytest.mark.parametrize("where", ["before", "after"])
def test_true_dead_ends_lower_the_share(where: str) -> None:
    prompt = "Janet's ducks lay 16 eggs. She eats 3 and bakes with 4, and sells the rest at $2 each."
    pad = "\n".join(DEAD_ENDS)
    text = f"{pad}\n{WORKED}" if where == "before" else f"{WORKED}\n{pad}"
    assert arithmetic_step_share(f"{WORKED}\n\\boxed{{18}}", prompt) == 1.0
    # Was 1.0 padded too: every true, grounded equation earned credit.
    assert arithmetic_step_share(f"{text}\n\\boxed{{18}}", prompt) == pytest.approx(2 / 7)


@pytest.mark.parametrize("text", [
    "3 * 4 = 12. 12 + 5 = 17. 17 * 2 = 34.\n\\boxed{34}",
    "$30 x 3 = $90\n$18 x 5 = $90\n$90 + $90 = $180\n#### 180",  # one value, used twice
    "12 / 4 = 3 hours. 3 - 1 - 1 = 1 hour. 12 - 4 - 2 = 6 miles. 6 / 1 = 6 mph.\n#### 6",  # via "6 / 1"
    "3 * 4 = 12. 12 + 5 = 17. 17 * 2 = 34.",  # no answer: the last step ends the chain
])
def test_a_chain_to_the_answer_earns_the_full_share(text: str) -> None:
    assert arithmetic_step_share(text, "3 4 5 2 30 18 12 1 6") == 1.0


@pytest.mark.parametrize("side", [0, 1, 2])
def test_a_dead_end_beside_the_chain_costs_its_share(side: int) -> None:
    chain = ["3 * 4 = 12.", "12 + 5 = 17.", "17 * 2 = 34."]
    chain.insert(side, "5 * 2 = 10.")
    assert arithmetic_step_share(" ".join(chain) + "\n\\boxed{34}", "3 4 5 2") == pytest.approx(3 / 4)
    # After the answer's step it is a dead end too: the answer, not the last line, ends the chain.
    assert arithmetic_step_share(" ".join([*chain, "3 + 2 = 5."]) + "\n\\boxed{34}", "3 4 5 2") == (
        pytest.approx(3 / 5))


def test_chains_without_a_numeric_answer_or_with_a_slip() -> None:
    prompt = "3 4 5 2 1"
    # No answer: the last step that holds ends the chain, so what it does not use is a dead end.
    assert arithmetic_step_share("3 * 4 = 12. 5 * 2 = 10.", prompt) == pytest.approx(1 / 2)
    # An answer no step reaches (here not a number) leaves both steps leading nowhere.
    assert arithmetic_step_share("3 * 4 = 12. 5 * 2 = 10.\n\\boxed{x + 1}", prompt) == 0.0
    # A slip earns nothing, but the right steps it uses keep their credit.
    assert arithmetic_step_share("3 + 4 = 7. 7 * 2 = 15. 15 + 1 = 16.\n\\boxed{16}", prompt) == (
        pytest.approx(2 / 3))
    # Rewriting the answer ("16 + 2 = 18", "20 - 2 = 18") meets its want once: the rewrites are dead ends.
    rewrites = "16 + 2 = 18\n20 - 2 = 18\n3 * 6 = 18\n"
    assert arithmetic_step_share(rewrites + WORKED + "\n\\boxed{18}", "16 3 4 2") == pytest.approx(2 / 5)


JANET = ("Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes "
         "muffins for her friends every day with four. She sells the remainder at the farmers' market "
         "daily for $2 per fresh duck egg. How much in dollars does she make every day at the farmers' market?")
# Ten identities on the problem's numbers and a grounded result: no arithmetic at all.
PADDING = "".join(f"{e}\n" for e in (
    "16 * 1 = 16", "16 + 0 = 16", "2 * 1 = 2", "2 + 0 = 2", "9 * 1 = 9", "9 - 0 = 9", "16 / 1 = 16",
    "16 * 0 = 0", "16 - 16 = 0", "16 + 2 - 2 = 16",
))


@pytest.mark.parametrize("text", [
    "16 * 1 = 16", "1 * 16 = 16", "16 + 0 = 16", "16 - 0 = 16", "16 / 1 = 16", "16 \\times 1 = 16",
    "16 * 0 = 0", "0 / 16 = 0", "16 - 16 = 0", "16 / 16 = 1", "16 + 2 - 2 = 16", "2 * 16 / 2 = 16",
])
def test_an_equation_that_does_no_arithmetic_is_no_step(text: str) -> None:
    assert arithmetic_step_share(text) == 0.0  # no step at all, so no share
    assert arithmetic_step_share(f"{text}\n3 + 4 = 8") == 0.0  # and it does not pad a wrong one


@pytest.mark.parametrize("text", ["10 - 5 = 5", "4 / 2 = 2", "2 * 2 = 4", "2 - 1 = 1", "9 + 9 = 18"])
def test_a_result_equal_to_an_operand_can_still_be_arithmetic(text: str) -> None:
    assert arithmetic_step_share(text) == 1.0


def test_dense_credit_cannot_be_padded_with_identities() -> None:
    dense = build_reward_system("dense", "qwen2.5").funcs[0]
    slip = "16 - 3 - 4 = 9 eggs. 9 * 2 = 19.\n\\boxed{19}"
    right = "16 - 3 - 4 = 9 eggs. 9 * 2 = 18.\n\\boxed{18}"
    comps = ["16 + 0 = 16", "\\boxed{18}", slip, PADDING + slip, right, PADDING + right]
    # Was 0.5, 0.5, 0.25, 0.458, 1, 1: an identity alone earned what the right answer did.
    assert dense([JANET] * 6, comps, answer=["18"] * 6) == pytest.approx([0.0, 0.5, 0.25, 0.25, 1.0, 1.0])


def test_dense_credit_cannot_be_padded_with_true_dead_ends() -> None:
    dense = build_reward_system("dense", "qwen2.5").funcs[0]
    right = WORKED + "\n\\boxed{18}"
    padded = "\n".join(DEAD_ENDS) + "\n" + right
    assert dense([JANET] * 2, [right, padded], answer=["18"] * 2) == pytest.approx([1.0, 0.5 + 0.5 * 2 / 7])


def _padded(question: str) -> str:
    """Five true equations on the first numbers of ``question`` that lead nowhere."""
    nums = list(dict.fromkeys(int(n) for n in re.findall(r"(?<![\d.,])\d+(?![\d.,])", question) if int(n) > 1))
    a, b = ([*nums, 3, 5])[:2] if len(nums) != 1 else (nums[0], nums[0] + 1)
    return "".join(f"{e}\n" for e in (f"{a} + {b} = {a + b}", f"{a} * {b} = {a * b}", f"{b} + {a} + {a} = {2 * a + b}",
                                       f"{a} * {b} + {b} = {a * b + b}", f"{b} * {b} - {a} = {b * b - a}"))


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is absent")
def test_gsm8k_worked_solutions_keep_their_share_and_padding_lowers_it() -> None:
    rows = [json.loads(line) for line in (DATA / "gsm8k" / "test.jsonl").read_text().splitlines() if line]
    gold = [arithmetic_step_share(r["answer"], r["question"]) for r in rows]
    padded = [arithmetic_step_share(_padded(r["question"]) + r["answer"], r["question"]) for r in rows]
    mean_gold, mean_padded = sum(gold) / len(rows), sum(padded) / len(rows)
    lower = sum(p < g for p, g in zip(padded, gold, strict=True))
    print(f"GSM8K test gold solutions: step share {mean_gold:.4f}; + 5 true dead ends {mean_padded:.4f} "
          f"(lower in {lower} of {len(rows)})")
    # Was 0.929 gold and 0.956 padded: true padding raised the share of 113 solutions.
    assert mean_gold >= 0.9 and mean_padded < 0.5 and lower >= 0.95 * len(rows)


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is absent")
def test_an_identity_and_the_right_box_score_below_the_worked_solution() -> None:
    from runners.tasks.answers import extract_gsm8k_answer

    rows = [json.loads(line) for line in (DATA / "gsm8k" / "test.jsonl").read_text().splitlines() if line][:200]
    golds = [str(extract_gsm8k_answer(r["answer"])) for r in rows]
    prompts = [r["question"] for r in rows]
    firsts = [re.findall(r"\d+", q)[:1] or ["1"] for q in prompts]
    gamed = [f"{n[0]} * 1 = {n[0]}\n\\boxed{{{g}}}" for n, g in zip(firsts, golds, strict=True)]
    worked = [re.sub(r"<<[^>]*>>", "", r["answer"]) for r in rows]
    dense = build_reward_system("dense", "qwen2.5").funcs[0]
    mean_gamed = sum(dense(prompts, gamed, answer=golds)) / len(rows)
    mean_worked = sum(dense(prompts, worked, answer=golds)) / len(rows)
    print(f"GSM8K test[:200] dense: identity + right box {mean_gamed:.3f}, worked solution {mean_worked:.3f}")
    assert mean_gamed == pytest.approx(0.5) and mean_worked > 0.95


@pytest.mark.parametrize("dash", ["\u2212", "\u2013"])
def test_a_typeset_minus_in_the_answer_ends_the_chain_as_an_ascii_one_does(dash: str) -> None:
    """The steps read the minus sign and the en dash as "-": so must the final answer the
    chain is traced back from, or a check after it takes the chain's end (0.5 -> 1.0)."""
    text = "We get 5 - 8 = -3. Check: -3 + 8 = 5 holds. So \\boxed{-3}"
    ascii_share = arithmetic_step_share(text, "5 and 8")
    assert ascii_share == pytest.approx(0.5)  # the check is a dead end
    assert arithmetic_step_share(text.replace("-", dash), "5 and 8") == pytest.approx(ascii_share)


def test_a_boxed_fraction_with_a_huge_numeral_is_scored_not_a_crash() -> None:
    """int() refuses a numeral past 4300 digits; the dense reward read the boxed fraction with
    it, so one degenerate completion raised ValueError out of the reward (and the run)."""
    text = "3 + 4 = 7 so \\boxed{\\frac{" + "9" * 4400 + "}{2}}"
    assert arithmetic_step_share(text, "3 and 4") == 1.0  # no step computes it: the last true one ends the chain
    assert build_reward_system("dense", "qwen2.5").funcs[0](["3 and 4"], [text], answer=["7"]) == [0.5]


def test_bad_names_are_one_line_config_errors() -> None:
    with pytest.raises(ConfigError, match="reward"):
        build_reward_system("nope", "tiny")
    with pytest.raises(ConfigError, match="family"):
        build_reward_system("sparse", "llama")


@pytest.mark.parametrize("bullet", ["- ", "* ", "+ ", "1. "])
def test_a_bulleted_list_of_steps_is_read_line_by_line(bullet: str) -> None:
    """The next line's bullet is no operator: "7\\n- 7 * 2 = 14" was read as 7 - 7 * 2 = 14,
    a wrong step, and the true "3 + 4 = 7" before it was not read at all."""
    text = f"{bullet}3 + 4 = 7\n{bullet.replace('1', '2')}7 * 2 = 14\n\\boxed{{14}}"
    assert arithmetic_step_share(text, "Add 3 and 4, then double it.") == 1.0
    # Within a line a bullet-like operator still joins the expression: "x * 3 + 4 = 7" is not
    # read from its middle.
    assert arithmetic_step_share(f"{bullet}x * 3 + 4 = 7") == 0.0


def test_one_true_equation_before_an_answer_it_does_not_reach_earns_nothing() -> None:
    """With the last true step as the chain's end whatever the answer, a bare answer and one
    true equation on the problem's numbers took the full step share: over GSM8K's test
    problems with their gold answers, 0.943 on average, against 0.014 now."""
    hack = "16 + 3 = 19\n\\boxed{18}"
    assert arithmetic_step_share(hack, JANET) == 0.0
    dense = build_reward_system("dense", "qwen2.5").funcs[0]
    assert dense([JANET], [hack], answer=["18"]) == [0.5]  # the answer's credit, no step credit
    assert dense([JANET], [WORKED + "\n\\boxed{18}"], answer=["18"]) == [1.0]


def test_an_answer_reached_in_words_keeps_the_chain_that_feeds_it() -> None:
    """GSM8K writes some last steps as algebra or words; the result they start from is
    written again, and the chain that computed it keeps its credit."""
    text = ("5 * 2 = 10 cleaners. 10 + 2 = 12 cleaners. So 2/3 of x is 12, and x = 18.\n"
            "#### 18")
    assert arithmetic_step_share(text, "She sold 2/3 of them, 2 more, and half of 5 * 2.") == 1.0
    # A step whose result is not written again after it is a dead end there.
    assert arithmetic_step_share("7 + 1 = 8. " + text, "7 1 5 2") == pytest.approx(2 / 3)


def test_chat_messages_are_read_as_their_text() -> None:
    """TRL passes conversational prompts and completions as message lists: the rewards read
    the messages' text, the completion's last message."""
    from runners.rewards.rules import completion_text, prompt_text

    user = [{"role": "user", "content": PROMPT}]
    assert prompt_text(user) == PROMPT and prompt_text(PROMPT) == PROMPT and prompt_text(7) == "7"
    # The problem is the last user message: a system prompt's text (and its numbers) is not,
    # nor is an assistant turn after it.
    chat = [{"role": "system", "content": "Answer in 3 steps."}, *user, {"role": "assistant", "content": "Sure."}]
    assert prompt_text(chat) == PROMPT
    assert prompt_text([{"role": "system", "content": "a"}, {"role": "other", "content": "b"}]) == "b"
    two = [{"role": "assistant", "content": "draft"}, {"role": "assistant", "content": "final"}]
    assert completion_text(two) == "final" and completion_text("final") == "final" and completion_text(7) == "7"
    for name, expected in (("sparse", 1.0), ("structured", 1.0), ("dense", 1.0)):
        out = build_reward_system(name, "tiny").funcs[0]([user], [[{"role": "assistant", "content": RIGHT}]])
        assert out == pytest.approx([expected]), name
    qwen = [{"role": "user", "content": "What is (2 + 3) * 2?"}]
    comp = [{"role": "assistant", "content": "\\boxed{7}"},
            {"role": "assistant", "content": "2+3=5 and 5*2=10.\n\nSo the answer is \\boxed{10}."}]
    for name in ("sparse", "structured", "dense"):
        assert build_reward_system(name, "qwen2.5").funcs[0]([qwen], [comp], answer=["10"]) == [1.0], name


def test_qwen_dense_grounds_steps_in_the_user_message_not_a_later_turn() -> None:
    """A chat prompt that ends in an assistant prefill: the problem's numbers are in the user
    message, so a step on them is grounded (the prefill alone would ground nothing)."""
    prompt = [{"role": "system", "content": "Be brief."},
              {"role": "user", "content": "Tom has 3 apples and buys 4 more. How many now?"},
              {"role": "assistant", "content": "Let me think."}]
    dense = build_reward_system("dense", "qwen2.5").funcs[0]
    assert dense([prompt], ["3 + 4 = 7 apples. \\boxed{7}"], answer=["7"]) == pytest.approx([1.0])
    ungrounded = dense([prompt], ["5 + 2 = 7 apples. \\boxed{7}"], answer=["7"])[0]
    assert ungrounded < 1.0


def test_qwen_rule_rewards_need_the_answer_column_and_one_per_completion() -> None:
    for name in ("sparse", "structured", "dense"):
        f = build_reward_system(name, "qwen2.5").funcs[0]
        with pytest.raises(ValueError, match="`answer` dataset column"):
            f(["q"], ["\\boxed{1}"])
        with pytest.raises(ValueError):  # zip(strict=True): a missing gold is no silent drop
            f(["q", "q"], ["\\boxed{1}", "\\boxed{2}"], answer=["1"])
    with pytest.raises(ValueError):  # the dense reward reads each completion's prompt
        build_reward_system("dense", "qwen2.5").funcs[0](["q"], ["\\boxed{1}", "\\boxed{2}"], answer=["1", "2"])
    with pytest.raises(ValueError):
        build_reward_system("sparse", "tiny").funcs[0]([PROMPT], [RIGHT, RIGHT])


def test_the_format_bonus_is_for_one_boxed_answer_at_the_end() -> None:
    structured = build_reward_system("structured", "qwen2.5").funcs[0]
    comps = ["So it is \\fbox{18}.",  # correct, but not the \\boxed{} asked for
             "\\boxed{18}" + " And that is how the eggs were counted, one by one." * 10,  # not at the end
             "\\boxed{17} or rather \\boxed{18}"]
    assert structured(["q"] * 3, comps, answer=["18"] * 3) == pytest.approx([0.8, 0.8, 0.0])


def test_a_boxed_fraction_is_the_answer_the_chain_reaches() -> None:
    # \\frac{1}{2} is 0.5, which the step computes: the chain ends there.
    assert arithmetic_step_share("6 / 12 = 0.5\n\\boxed{\\frac{1}{2}}", "6 12") == 1.0
    # -\\frac{5}{8} is -0.625: the last step computes it from the first one's result.
    assert arithmetic_step_share("3 - 8 = -5. -5 / 8 = -0.625.\n\\boxed{-\\frac{5}{8}}", "3 8") == 1.0


def test_an_equation_rewritten_with_another_result_is_another_equation() -> None:
    # Each distinct *equation* counts once, not each left-hand side: the second is wrong.
    assert arithmetic_step_share("3 + 4 = 7. 3 + 4 = 8.") == pytest.approx(1 / 2)


def test_every_bulleted_line_is_read() -> None:
    """The second bullet's step must be read too (a wrong one costs its share), not skipped
    as the tail of an expression on the line before."""
    for bullet in ("- ", "* ", "+ "):
        text = f"{bullet}3 + 4 = 7\n{bullet}7 * 2 = 15\n\\boxed{{15}}"
        assert arithmetic_step_share(text, "Add 3 and 4, then double it.") == pytest.approx(1 / 2), bullet


def test_every_rule_reward_is_a_reward_func_in_trls_signature() -> None:
    """RewardFunc is the reward plug point (TRL's signature; mypy checks RULE_FUNCS against
    it): every shipped rule reward, bare and as built for TRL, takes prompts, completions
    and the dataset's columns as keywords, and gives one float in [0, 1] per completion."""
    import inspect

    from runners.rewards import RewardFunc
    from runners.rewards.rules import RULE_FUNCS

    batches = {"tiny": ([PROMPT] * 3, [RIGHT, WRONG_STEP, SHORTCUT], ["9"] * 3),
               "qwen2.5": (["What is 2+3?"] * 2, ["2+3=5, so \\boxed{5}.", "\\boxed{6}"], ["5", "5"])}
    assert {f for f, _ in RULE_FUNCS} == set(batches)
    for (family, name), fn in RULE_FUNCS.items():
        built = build_reward_system(name, family).funcs
        assert len(built) == 1
        for f in (fn, built[0]):
            assert isinstance(f, RewardFunc)
            kinds = [p.kind for p in inspect.signature(f).parameters.values()]
            assert kinds[:2] == [inspect.Parameter.POSITIONAL_OR_KEYWORD] * 2 and kinds[-1] == inspect.Parameter.VAR_KEYWORD
            prompts, completions, answer = batches[family]
            out = f(prompts, completions, answer=answer)
            assert isinstance(out, list) and len(out) == len(completions), (family, name)
            assert all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in out), (family, name, out)
    assert not isinstance(42, RewardFunc)
