"""The ``runners`` Typer app (shares the guard and parsers with ``planner``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from planner.cli.app import OneLineErrors, add_version_option
from planner.cli.app import command as _command

__all__ = ["app", "command"]

app = typer.Typer(
    name="runners",
    help="RACE runners: execute proposals as real (trl) or simulated (sim) GRPO/LoRA runs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=OneLineErrors,
)
add_version_option(app)


def command(**kwargs: Any) -> Callable[[Callable[..., Any]], Any]:
    """``@command()``: register a guarded ``runners`` command (one-line errors, exit 2)."""
    return _command(app, **kwargs)
