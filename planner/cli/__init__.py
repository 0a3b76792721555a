"""``planner`` command line: a thin shell over the library. See ``planner --help``."""

from __future__ import annotations

from planner.cli import commands as _commands  # noqa: F401  (registers commands)
from planner.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    """The ``planner`` console script (``pyproject.toml``): run the typer app."""
    from planner.cli.app import replace_unencodable

    replace_unencodable()
    app()
