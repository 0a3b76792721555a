"""Registers every ``runners`` sub-command (one module per concept)."""

from runners.cli import card, execute, pretrain, truth  # noqa: F401
