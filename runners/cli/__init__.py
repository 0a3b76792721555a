"""``runners`` command line: a thin shell over the runners library."""

from __future__ import annotations

from runners.cli import commands as _commands  # noqa: F401  (registers commands)
from runners.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    """The ``runners`` console script (``pyproject.toml``): run the typer app."""
    from planner.cli.app import replace_unencodable

    replace_unencodable()
    app()
