"""Shared CLI parsers."""

from __future__ import annotations

import pytest

from planner.cli.app import parse_option
from planner.errors import ConfigError


@pytest.mark.parametrize(("text", "want"), [
    ("quick=true", True), ("quick=False", False), ("quick=NO", False), ("quick=yes", True),
    ("eval_samples=128", 128), ("learning_rate=1e-3", 1e-3), ("world=flat", "flat"), ("x=[1, 2]", [1, 2]),
])
def test_parse_option_values(text: str, want: object) -> None:
    # "False" kept as a string would be truthy: -o quick=False ran a quick experiment.
    assert parse_option(text) == (text.split("=")[0], want)


def test_parse_option_needs_key_and_value() -> None:
    with pytest.raises(ConfigError, match="not KEY=VALUE"):
        parse_option("quick")
