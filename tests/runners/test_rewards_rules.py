"""Rule-based reward systems (sparse, structured, dense) for both families."""

from __future__ import annotations

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


def test_arithmetic_step_share() -> None:
    assert arithmetic_step_share("4 * 5 = 20, 20 - 3 = 16, 1/0 = 2") == pytest.approx(1 / 3)
    assert arithmetic_step_share("no equations") == 0.0
    assert arithmetic_step_share("12,000 = 12000; 3 x 4 = 12") == 1.0


@pytest.mark.parametrize("text", [
    # Whole left-hand sides: each of these was read as a fragment ("3 - 4 = 9") and marked wrong.
    "16 - 3 - 4 = 9 duck eggs", "1,000 + 500 = 1,500", "2 * 3 + 4 = 10", "60/100 * 5 = 3", "(2+3)*4 = 20",
    # Word-problem arithmetic with units and percents, as GSM8K's worked solutions write it.
    "4 * 20 sheep = 80 sheep", "200 GB * 40% = 80 GB", "$20/hour * 35 hours/week = $700/week", "-3 + 5 = 2",
])
def test_worked_arithmetic_is_read_whole(text: str) -> None:
    assert arithmetic_step_share(text) == 1.0


def test_step_credit_cannot_be_farmed() -> None:
    prompt = "Janet's ducks lay 16 eggs. She eats 3 and bakes with 4, and sells the rest at $2 each."
    worked = "16 - 3 - 4 = 9 eggs. 9 * 2 = $18.\n\\boxed{18}"
    assert arithmetic_step_share(worked, prompt) == 1.0
    assert arithmetic_step_share("1+1=2\n" * 50 + "\\boxed{17}", prompt) == 0.0  # unrelated to the problem
    assert arithmetic_step_share("16 + 2 = 18\n" * 50, prompt) == 1.0  # one distinct equation, counted once
    assert arithmetic_step_share("3x - 9 = 2x + 74") == 0.0  # algebra is not arithmetic on literals


def test_bad_names_are_one_line_config_errors() -> None:
    with pytest.raises(ConfigError, match="reward"):
        build_reward_system("nope", "tiny")
    with pytest.raises(ConfigError, match="family"):
        build_reward_system("sparse", "llama")
