"""Registers every ``runners`` sub-command (one module per concept)."""

from runners.cli import card, execute, truth  # noqa: F401
