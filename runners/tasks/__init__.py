"""GPU-path math tasks: prompt sets (GSM8K, MATH-500, Polaris-53K) and answer checking."""

from runners.tasks.answers import (
    extract_answer,
    extract_boxed,
    extract_gsm8k_answer,
    gsm8k_worked_result,
    last_number,
    verify,
)
from runners.tasks.data import DATASETS, INSTRUCTION, MathItem, load_math, to_grpo_rows

__all__ = [
    "DATASETS",
    "INSTRUCTION",
    "MathItem",
    "extract_answer",
    "extract_boxed",
    "extract_gsm8k_answer",
    "gsm8k_worked_result",
    "last_number",
    "load_math",
    "to_grpo_rows",
    "verify",
]
